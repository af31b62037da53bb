"""Adapters that put the guard in front of unmodified MCP SDK clients (optional extras).

Nothing in the core ``fsm`` package imports this subpackage, and this ``__init__`` imports
no SDK: import the adapter of your SDK line explicitly.

- :mod:`fsm.adapters.mcp2`: the official ``mcp`` 2.x client (extra ``mcp``:
  ``mcp>=2.0.0,<3``), :func:`~fsm.adapters.mcp2.guarded_session`.
- :mod:`fsm.adapters.mcp1`: the official ``mcp`` 1.x client, the maintenance line that
  openai-agents, pydantic-ai and fastmcp 3.x pin (extra ``mcp1``: ``mcp>=1.24.0,<2``),
  :func:`~fsm.adapters.mcp1.guarded_session`.
- :mod:`fsm.adapters.mrtr`: protocol 2026-07-28's input rounds around an mcp 2.x
  ``Client`` (:func:`~fsm.adapters.mrtr.guarded_call_tool`; ``docs/mrtr.md``).
- :mod:`fsm.adapters.core`: what both share (SSE teeing, resume splicing, answer
  submission, the typed error, the event log); an SDK line is an
  :class:`~fsm.adapters.core.SdkBinding`.
- :mod:`fsm.adapters.sdkversion`: release ranges and the version check (stdlib only).
- :mod:`fsm.adapters.sdkerrors`: the typed errors an adapter raises as the SDK's JSON-RPC
  error type too (imports no SDK).

What each adapter promises and what it cannot see is in ``docs/adapter.md``.
"""

from __future__ import annotations

__all__: list[str] = []
