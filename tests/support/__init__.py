"""The test bed no user needs, imported as ``support.<module>`` (pytest's ``pythonpath``
puts ``tests/`` on ``sys.path``; so does ``bench/__init__.py``).

- :mod:`support.scenarios`: the wire scenarios' rig (:mod:`fsm.wire.rig`) with gateway
  replicas as its middle tier, and every scenario of :mod:`fsm.wire.scenarios` by name.
- :mod:`support.gateway`: guarding gateway replicas on loopback.
- :mod:`support.redis_server`: a throwaway ``redis-server`` on loopback.
- :mod:`support.fastmcp_clients`: fastmcp's ``Client`` as scenario clients.
- :mod:`support.kit_clients`: clients with one planted bug each (P1, P3, P7) and a
  correct one, for the conformance kit's tests and its found-rate benchmark.
- :mod:`support.ts_client`: the official TypeScript SDK client (the Node project in
  ``tests/ts_client``) driven over JSON Lines, as a scenario client.
"""
