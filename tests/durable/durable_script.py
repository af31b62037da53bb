"""One scripted session for the store tests and the crash child: two questions on a
tool call (one answered, one shown), a cancelled one on the GET stream, tombstones
evicted, a progress event; and :func:`drive`, which feeds it to a durable guard and writes
each ``Persist`` to the stores given."""

from __future__ import annotations

from typing import Any

from fsm import events as ev
from fsm.actions import Persist
from fsm.durable import Store
from fsm.outcomes import SubmissionResult
from fsm.sse.guard import Guard, GuardConfig, SseDelta

CONFIG = GuardConfig(durable=True, max_tombstones=3)
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}


def ask(rid: int | str, text: str = "Go?") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": {"m": text}}


def cancel(rid: int | str) -> dict[str, Any]:
    params = {"requestId": rid, "reason": "timeout"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


SCRIPT: tuple[ev.Event, ...] = (
    ev.SessionStarted("s1"),
    ev.StreamOpened("post:1", origin=1),
    ev.SseEvent("post:1", ask(1), "e1"),
    ev.UserAnswered(("s1", 1), {"action": "accept", "content": {"n": 3}}),
    ev.SubmissionOutcome(("s1", 1), SubmissionResult(202)),
    ev.SseEvent("post:1", ask("1", "string id"), "e2"),
    ev.StreamOpened("get"),
    ev.SseEvent("get", ask(7), "g1"),
    ev.SseEvent("get", cancel(7), "g2"),  # a cause with an error class in it
    *(ev.SseEvent("get", ask(i), f"g{i}") for i in range(10, 14)),  # tombstones evicted
    ev.SseEvent("post:1", PROGRESS, "e3"),
)


def drive(*stores: Store) -> Guard:
    """Feed :data:`SCRIPT` to a fresh durable guard, writing each delta to ``stores``."""
    guard = Guard(clock=lambda: 5.0, config=CONFIG)
    for event in SCRIPT:
        for action in guard.feed(event):
            if isinstance(action, Persist):
                assert isinstance(action.delta, SseDelta)
                for store in stores:
                    store.write(action.delta)
    return guard
