"""The test bed no user needs, imported as ``support.<module>`` (pytest's ``pythonpath``
puts ``tests/`` on ``sys.path``; so does ``bench/__init__.py``).

Servers, clients and stores on loopback:

- :mod:`support.scenarios`: the wire scenarios' rig (:mod:`fsm.wire.rig`) with gateway
  replicas as its middle tier, and every scenario of :mod:`fsm.wire.scenarios` by name.
- :mod:`support.gateway`: guarding gateway replicas on loopback.
- :mod:`support.redis_server`: a throwaway ``redis-server`` on loopback;
  :mod:`support.redis_cluster`: a throwaway Redis Cluster of three masters;
  :mod:`support.redis_fixtures`: module-scoped Redis fixtures.
- :mod:`support.json_server`: a 2026-07-28 server that answers each request in one JSON
  body a handler makes.
- :mod:`support.conformance_server` and :mod:`support.conformance_suite`: the server the
  official conformance suite grades, and the suite driven from the test bed.
- :mod:`support.fastmcp_clients`: fastmcp's ``Client`` as scenario clients.
- :mod:`support.kit_clients` (P1, P3, P7 planted bugs and a correct client) and
  :mod:`support.tasks_clients`: clients for the conformance kits;
  :mod:`support.kit_runs`: how the stateful tests build and run a kit's machine.
- :mod:`support.ts_client`: the official TypeScript SDK client (the Node project in
  ``tests/ts_client``) driven over JSON Lines, as a scenario client.

Tests written once for several SDK lines:

- :mod:`support.surface`, :mod:`support.guarded_surface`, :mod:`support.fastmcp_surface`:
  a guarded session's surface against the installed SDK's, and the tests every line passes.
- :mod:`support.session_endings`: two ends of a guarded session both lines drive alike.

What tests read or wait on:

- :mod:`support.changes`: waiting on a test double's state, woken at each change.
- :mod:`support.log_records`: log records captured while a block runs.
- :mod:`support.audit_logs`: synthetic client event logs of any length.
- :mod:`support.model_sources`: the source of a small model file.
- :mod:`support.models_doc`: docs/models.md's text and worked example.
- :mod:`support.monitor_reference`: the P1-P7 rules over immutable state, the reference
  the in-place monitor is compared with.
"""
