"""The guarded session stands in for mcp 2.x's ``ClientSession``.

Every public coroutine method of the installed ``ClientSession`` is on
:class:`fsm.adapters.mcp2.GuardedSession` with the SDK's signature, or excluded with a
reason (:data:`fsm.adapters.core.NOT_RACED`); ``guarded_session`` takes every parameter
of ``ClientSession`` and ``streamable_http_client`` (or :data:`~fsm.adapters.core.NOT_TAKEN`
says why not) and checks its keywords at the call. Over real HTTP on 127.0.0.1, each
request method answers as the plain SDK session does, and a prompt or resource read
whose interaction dies ends with one typed error that is also ``MCPError``. The tests
both lines pass are :class:`support.guarded_surface.GuardedSurfaceTests`; the 1.x line:
``tests/e2e_v1/test_guarded_surface_v1.py``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import ClientSession

from fsm.adapters.core import NOT_RACED, NOT_TAKEN, RACED_METHODS, raced_method
from fsm.adapters.mcp2 import GuardedSession, guarded_session
from support.guarded_surface import GuardedSurfaceTests

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(90)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "adapter.md"


class TestGuardedSession(GuardedSurfaceTests):
    """mcp 2.x's ``ClientSession`` and :mod:`fsm.adapters.mcp2`."""


def test_only_what_the_caller_set_is_passed_on() -> None:
    """Keywords at their defaults stay out of the SDK call (an older 2.x release without
    one works); a keyword given a value goes on."""
    sig = inspect.signature(GuardedSession.get_prompt)
    assert sig.parameters["allow_input_required"].default is False
    from fsm.adapters.core import non_default

    assert non_default(GuardedSession.get_prompt, {"name": "a", "meta": None}) == {"name": "a"}
    given = {"allow_input_required": True, "arguments": {"x": "1"}}
    assert non_default(GuardedSession.get_prompt, given) == given
    assert non_default(guarded_session, {"max_sse_event_size": 1048576}) == {}
    assert non_default(guarded_session, {"max_sse_event_size": None}) == {
        "max_sse_event_size": None
    }


def test_every_exclusion_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    undocumented = [name for name in (*NOT_RACED, *NOT_TAKEN) if f"`{name}`" not in text]
    assert undocumented == []


async def test_a_method_it_does_not_race_is_refused_by_name() -> None:
    """Only the request methods :data:`RACED_METHODS` names are raced: another method of
    the SDK session (here the handshake, which :data:`NOT_RACED` excludes) is refused, as
    a derived method and through ``raced``, before anything reaches the raw session."""
    assert "initialize" in NOT_RACED and "initialize" not in RACED_METHODS
    refused = "'initialize' is not a request method a guarded session races"
    with pytest.raises(ValueError, match=refused):
        raced_method(ClientSession.initialize)
    sent: list[str] = []

    class RawSession:
        async def initialize(self) -> None:
            sent.append("initialize")

    guarded = GuardedSession(RawSession(), cast(Any, None))  # refused before the guard
    with pytest.raises(ValueError, match=refused):
        await guarded.raced("initialize")
    assert sent == []
