"""Shared helpers for the core tests: a fake clock, message builders, action filters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Action, Fail, Refuse

ENGINES = ("transitions", "tables")
SESSION = "s1"
POST = "post:7"
ORIGIN = 7
GET = "get"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def elicit(
    rid: Any, message: str = "Delete 3 files?", meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An ``elicitation/create`` request; ``meta`` goes into ``params._meta``."""
    params: dict[str, Any] = {"message": message}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": params}


def cancel(rid: Any, reason: str = "timeout") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": reason},
    }


def progress(n: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": n},
    }


def response(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}


def make_guard(
    engine: str = "transitions",
    clock: FakeClock | None = None,
    streams: Iterable[tuple[str, Any]] = ((POST, ORIGIN), (GET, None)),
    **config: Any,
) -> Guard:
    """A guard with session ``s1`` started and ``streams`` opened."""
    guard = Guard(
        clock=clock or FakeClock(),
        config=GuardConfig(**config),
        engine=engine,  # type: ignore[arg-type]
    )
    assert guard.feed(ev.SessionStarted(SESSION)) == ()
    for sid, origin in streams:
        assert guard.feed(ev.StreamOpened(sid, origin)) == ()
    return guard


def of(actions: Iterable[Any], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def normalise(actions: Iterable[Action]) -> list[Any]:
    """Actions as comparable values (errors compare by identity otherwise)."""
    out: list[Any] = []
    for a in actions:
        if isinstance(a, Fail):
            e = a.error
            out.append(
                (
                    "Fail",
                    a.interaction,
                    type(e).__name__,
                    str(e),
                    e.reason,
                    e.key,
                    e.stream,
                    e.evidence,
                )
            )
        elif isinstance(a, Refuse):
            out.append(("Refuse", a.key, type(a.error).__name__, str(a.error)))
        else:
            out.append(a)
    return out
