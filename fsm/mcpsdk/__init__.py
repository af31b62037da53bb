"""Real-MCP test harness built on the official ``mcp`` 2.3.0 SDK (optional extra ``mcp``).

Nothing in the core ``fsm`` package imports this subpackage; importing it requires the
``mcp`` extra (``pip install dead-or-resumable[mcp]``).

Modules (import them explicitly; this ``__init__`` stays light on purpose):

- :mod:`fsm.mcpsdk.server`: an in-process mcp 2.3.0 streamable-HTTP server on 127.0.0.1 with
  a destructive ``delete_files`` tool whose elicitation deadline is fired by explicit command
  (silent, or emitting ``notifications/cancelled``), a progress-streaming tool, session
  expiry on command, and session-scoped (or deliberately shared) in-memory event stores.
- :mod:`fsm.mcpsdk.proxy`: a fault-injecting loopback HTTP/1.1 relay that relays SSE
  incrementally, records a bounded traffic log, cuts streams (abrupt, reset or clean) and
  fails answer POSTs (connection error or chosen HTTP status) on command.
- :mod:`fsm.mcpsdk.scenarios`: deterministic scenario drivers (seed incident, replayed
  cancel, failed answer POST, expired session, happy path) that run any client behind the
  :class:`~fsm.mcpsdk.scenarios.ClientFactory` seam and return a structured
  :class:`~fsm.mcpsdk.scenarios.ScenarioResult`.

- :mod:`fsm.mcpsdk.adapter`: :func:`~fsm.mcpsdk.adapter.guarded_session`, the guard in
  front of an unmodified mcp 2.3.0 ``ClientSession`` (see ``docs/adapter.md``), and
  :func:`fsm.mcpsdk.scenarios.guarded_client`, its client factory for the scenarios.
- :mod:`fsm.mcpsdk.demo`: ``python -m fsm demo [--json]``, the seed incident with the plain
  and the guarded client side by side.

Protocol 2026-07-28 (input rounds, ``InputRequiredResult``; see ``docs/mrtr.md``):

- :mod:`fsm.mcpsdk.mrtr_server`: a real ``MCPServer`` in 2026-07-28 mode whose sealed
  ``requestState`` expires, and which restarts with a fresh key, on explicit command;
  a one-question tool, a re-asking tool, a polling tool, a survey tool.
- :mod:`fsm.mcpsdk.mrtr_adapter`: :func:`~fsm.mcpsdk.mrtr_adapter.guarded_call_tool`,
  the MRTR rules around an unmodified mcp 2.3.0 ``Client``.
- :mod:`fsm.mcpsdk.mrtr_demo`: the demo's second scene, plain vs guarded.
- :mod:`fsm.mcpsdk.serving`: uvicorn on a bound socket, shared by both test servers.

All traffic stays on 127.0.0.1. Faults are driven by explicit commands from the caller, never
by timers racing the machine; every wait has a safety timeout.
"""

from __future__ import annotations

__all__: list[str] = []
