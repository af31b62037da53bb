"""What ``fsm demo`` runs (extra ``mcp``): not public API, and free to change in any release.

The seed incident replayed against a real mcp server on 127.0.0.1, plain client beside
guarded client, then protocol 2026-07-28's input rounds. Embedders want
:mod:`fsm.adapters`; a test suite of its own wants :mod:`fsm.testing`. Nothing in the core
``fsm`` package imports this one, and this ``__init__`` imports nothing, so ``fsm demo``
without the extra says what to install instead of failing on an import.

- :mod:`fsm.demo.cli`: ``python -m fsm demo [--json]``, the two scenes side by side.
- :mod:`fsm.wire.scenarios`: the seed incident as a scenario on the rig.
- :mod:`fsm.wire.rig`: the rig it runs on (server, fault proxy, HTTP client, a scripted
  user), the client seam any client implements to run it, and its result.
- :mod:`fsm.wire.server`: an in-process mcp streamable-HTTP server with a destructive
  ``delete_files`` tool whose elicitation deadline is fired by explicit command (silent,
  or emitting ``notifications/cancelled``), session expiry on command, and session-scoped
  (or deliberately shared) in-memory event stores.
- :mod:`fsm.wire.proxy`: a fault-injecting loopback HTTP/1.1 relay that relays SSE
  incrementally, records a bounded traffic log, cuts streams and fails answer POSTs on
  command.
- :mod:`fsm.demo.mrtr_scene`: the second scene, plain vs guarded
  (:mod:`fsm.adapters.mrtr`), on :mod:`fsm.wire.mrtr_server`, a real ``MCPServer`` in
  2026-07-28 mode whose sealed ``requestState`` expires, and which restarts with a fresh
  key, on explicit command.
- :mod:`fsm.wire.serving`: uvicorn on a bound socket, shared by both servers;
  :mod:`fsm.wire.sdk`: the installed SDK line (1.x or 2.x).

All traffic stays on 127.0.0.1. Faults are driven by explicit commands, never by timers
racing the machine; every wait has a safety timeout.
"""

from __future__ import annotations

__all__: list[str] = []
