"""On the mcp 1.x line: the typed errors :mod:`fsm.adapters.mcp1` raises are the SDK's
``McpError`` too (code -32000, ``data.reason``), and leaving a guarded session ends its
standalone GET stream ``closed``, not failed. A real mcp 1.x client and server on
127.0.0.1."""

from __future__ import annotations

import json

import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from fsm.audit import audit_text
from fsm.errors import SessionExpiredError
from support.session_endings import close_with_the_get_stream_open, errors_after_expiry

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_except_mcperror_catches_a_session_expired_error() -> None:
    caught, typed = await errors_after_expiry()
    assert len(caught) == 2
    for err in [*caught, typed]:
        assert isinstance(err, SessionExpiredError) and isinstance(err, McpError)
        assert isinstance(err.error, types.ErrorData)
        assert err.error.code == -32000
        assert err.error.data["reason"] == err.reason == "session-expired"
        assert err.error.message == str(err) and type(err).__name__ == "SessionExpiredError"


async def test_a_session_close_ends_the_get_stream_closed() -> None:
    closed = await close_with_the_get_stream_open()
    assert closed.deletes == 1 and closed.failures == {}
    closed.assert_get_ended_closed()
    records = [json.loads(line) for line in closed.live.splitlines()[1:]]
    assert all(isinstance(r["wall"], str) for r in records)
    assert audit_text(closed.live, complete=True).ok
