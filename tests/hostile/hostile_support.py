"""Helpers for the hostile-input tests, on top of the core tests' (``Clock`` is their
hand-moved clock: it may go backwards, clocks are hostile too)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Ignore
from tests.core.core_support import GET, ORIGIN, POST, SESSION, cancel, of, response
from tests.core.core_support import FakeClock as Clock

__all__ = [
    "GET",
    "ORIGIN",
    "POST",
    "SESSION",
    "Clock",
    "cancel",
    "elicit",
    "guard",
    "of",
    "reasons",
    "request",
    "response",
]


def elicit(rid: Any, message: str = "Delete 3 files?", **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "elicitation/create",
        "params": {"message": message, **params},
    }


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def guard(
    clock: Clock | None = None,
    streams: Iterable[tuple[str, Any]] = ((POST, ORIGIN), (GET, None)),
    session: str = SESSION,
    **config: Any,
) -> Guard:
    """A guard with ``session`` started and ``streams`` opened."""
    g = Guard(clock=clock or Clock(), config=GuardConfig(**config))
    g.feed(ev.SessionStarted(session))
    for sid, origin in streams:
        g.feed(ev.StreamOpened(sid, origin))
    return g


def reasons(actions: Iterable[Any]) -> list[str]:
    return [a.reason for a in actions if isinstance(a, Ignore)]
