"""What ``fsm demo`` runs (extra ``mcp``): not public API, and free to change in any release.

The seed incident replayed against a real mcp server on 127.0.0.1, plain client beside
guarded client, then protocol 2026-07-28's input rounds. Embedders want
:mod:`fsm.adapters`; a test suite of its own wants :mod:`fsm.testing`. Nothing in the core
``fsm`` package imports this one, and this ``__init__`` imports nothing, so ``fsm demo``
without the extra says what to install instead of failing on an import.

- :mod:`fsm.demo.cli`: ``python -m fsm demo [--json]``, the two scenes side by side.
- :mod:`fsm.demo.mrtr_scene`: the second scene, plain vs guarded
  (:mod:`fsm.adapters.mrtr`), on :mod:`fsm.wire.mrtr_server`, a real ``MCPServer`` in
  2026-07-28 mode whose sealed ``requestState`` expires, and which restarts with a fresh
  key, on explicit command.
- :mod:`fsm.demo.table`: the side-by-side table both scenes print.

The first scene is the ``seed`` scenario of :mod:`fsm.wire` (the public wire scenarios:
the fault proxy, the loopback servers, the rig they run on, their verdict), run with the
plain client and with the guarded one.

All traffic stays on 127.0.0.1. Faults are driven by explicit commands, never by timers
racing the machine; every wait has a safety timeout.
"""

from __future__ import annotations

__all__: list[str] = []
