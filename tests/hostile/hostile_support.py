"""Helpers for the hostile-input tests: a hand-moved clock, message builders, filters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Ignore

SESSION = "s1"
POST = "post:7"
ORIGIN = 7
GET = "get"


class Clock:
    """A clock the test sets by hand (it may go backwards: clocks are hostile too)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


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


def cancel(rid: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": "timeout"},
    }


def response(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}


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


def of(actions: Iterable[Any], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def reasons(actions: Iterable[Any]) -> list[str]:
    return [a.reason for a in actions if isinstance(a, Ignore)]
