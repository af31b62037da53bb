"""The loopback test bed: a real ``mcp`` server, a fault proxy, scenarios (extra ``mcp``).

Used by the demo, the end-to-end tests and the benchmarks; embedders want
:mod:`fsm.adapters` instead. Nothing in the core ``fsm`` package imports this subpackage;
importing it requires an ``mcp`` extra (``pip install dead-or-resumable[mcp]``).

Modules (import them explicitly; this ``__init__`` stays light on purpose):

- :mod:`fsm.harness.server`: an in-process mcp streamable-HTTP server on 127.0.0.1 with
  a destructive ``delete_files`` tool whose elicitation deadline is fired by explicit command
  (silent, or emitting ``notifications/cancelled``), a progress-streaming tool, session
  expiry on command, and session-scoped (or deliberately shared) in-memory event stores.
- :mod:`fsm.harness.proxy`: a fault-injecting loopback HTTP/1.1 relay that relays SSE
  incrementally, records a bounded traffic log, cuts streams (abrupt, reset or clean) and
  fails answer POSTs (connection error or chosen HTTP status) on command.
- :mod:`fsm.harness.scenarios`: deterministic scenario drivers (seed incident, replayed
  cancel, failed answer POST, expired session, happy path) that run any client behind the
  :class:`~fsm.harness.scenarios.ClientFactory` seam and return a structured
  :class:`~fsm.harness.scenarios.ScenarioResult`.

- :func:`fsm.harness.scenarios.guarded_client`: the client factory that runs the scenarios
  through :func:`fsm.adapters.mcp2.guarded_session`.
- :mod:`fsm.harness.demo`: ``python -m fsm demo [--json]``, the seed incident with the plain
  and the guarded client side by side.

Protocol 2026-07-28 (input rounds, ``InputRequiredResult``; see ``docs/mrtr.md``):

- :mod:`fsm.harness.mrtr_server`: a real ``MCPServer`` in 2026-07-28 mode whose sealed
  ``requestState`` expires, and which restarts with a fresh key, on explicit command.
- :mod:`fsm.harness.mrtr_demo`: the demo's second scene, plain vs guarded
  (:mod:`fsm.adapters.mrtr`).
- :mod:`fsm.harness.serving`: uvicorn on a bound socket, shared by both test servers.
- :mod:`fsm.harness.sdk`: the installed SDK line (1.x or 2.x) as the test bed needs it;
  :mod:`fsm.harness.fastmcp_clients`: fastmcp's ``Client`` as scenario clients.
- :mod:`fsm.harness.ts_client`: the official TypeScript SDK client (``node``,
  ``tests/ts_client``) driven over JSON Lines, as a scenario client and in the seed incident.

All traffic stays on 127.0.0.1. Faults are driven by explicit commands from the caller, never
by timers racing the machine; every wait has a safety timeout.
"""

from __future__ import annotations

__all__: list[str] = []
