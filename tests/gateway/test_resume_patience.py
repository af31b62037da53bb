"""A resume the upstream refuses because it still holds the old connection is retried by
the gateway within its patience; the client never sees the refusal unless the patience
is spent, and then gets one ending error.

The refusals are the patient rows of the guard's resume table (``fsm.outcomes``): ``409``
(the TypeScript SDK), a ``4xx`` saying the old connection is still attached, ``429`` and
``503`` with ``Retry-After``. The upstream refuses a scripted number of times, so the
test is bounded by that count; backoff and jitter are the guard's, made tiny and fixed
here (``GuardConfig.resume_jitter``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import GATEWAY_GUARD  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

REFUSALS: dict[str, tuple[int, bytes, tuple[tuple[bytes, bytes], ...]]] = {
    "409": (409, b"Conflict: Stream already has an active connection", ()),
    "400-already-attached": (
        400,
        b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32000, '
        b'"message": "Bad Request: session already attached"}}',
        (),
    ),
    "429-retry-after": (429, b"slow down", ((b"retry-after", b"0"),)),
    "503-retry-after": (503, b"busy", ((b"retry-after", b"0"),)),
}


class HoldsTheOldConnection(scripted.HeldCallStream):
    """A call stream that sends one event and stays open until its reader goes; a resume
    ``GET`` is refused (``refusal``) ``refuse`` times (``None``: always), then gets the
    call's result."""

    def __init__(self, refusal: str, refuse: int | None) -> None:
        super().__init__()
        self.refusal_reply = REFUSALS[refusal]
        self.left = refuse

    def refusal(self) -> scripted.Refusal | None:
        if self.left is None:
            return self.refusal_reply
        if self.left > 0:
            self.left -= 1
            return self.refusal_reply
        return None


def _config(patience_s: float) -> Any:
    return replace(
        GATEWAY_GUARD,
        backoff_initial_s=0.001,
        backoff_max_s=0.002,
        resume_jitter=lambda: 0.0,
        resume_patience_s=patience_s,
    )


async def _resume_after_a_break(gw: Any) -> tuple[int, list[dict[str, Any]]]:
    """Begin a call, read its first event, drop the connection, resume with the id the
    gateway gave: the resume's status and the messages it brought."""
    async with httpx2.AsyncClient(timeout=30) as http:
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as old:
            [(event_id, _)] = scripted.parse(await old.aiter_raw().__anext__())
        assert event_id is not None
        with anyio.fail_after(30):
            resume = {**h, "last-event-id": event_id}
            async with http.stream("GET", gw.url, headers=resume) as resumed:
                raw = b"".join([c async for c in resumed.aiter_raw()])
        return resumed.status_code, [json.loads(d) for _, d in scripted.parse(raw) if d]


@pytest.mark.parametrize("refusal", list(REFUSALS))
async def test_a_refused_resume_is_retried_until_the_upstream_takes_it(refusal: str) -> None:
    """Refused three times, then accepted: the client's resume gets the result, and
    never the refusal; every retry resumes from the same event."""
    up = HoldsTheOldConnection(refusal, refuse=3)
    async with scripted.gateway_for(up, config=_config(patience_s=150.0)) as gw:
        status, messages = await _resume_after_a_break(gw)
    assert (status, messages) == (200, [scripted.result(7)])
    assert up.refused == 3
    assert len(up.resumed_from) == 4 and len(set(up.resumed_from)) == 1


async def test_a_resume_refused_past_the_patience_ends_the_call_with_one_error() -> None:
    """Refused for good: after ``resume_patience_s`` the client's resume gets one
    JSON-RPC error for its call, ``resume-patience-spent``, not the upstream's ``409``."""
    up = HoldsTheOldConnection("409", refuse=None)
    async with scripted.gateway_for(up, config=_config(patience_s=0.1)) as gw:
        status, messages = await _resume_after_a_break(gw)
    assert status == 200
    [ending] = messages
    assert ending["id"] == 7 and ending["error"]["code"] == -32000
    assert ending["error"]["data"]["reason"] == "resume-patience-spent"
    assert up.refused >= 2
