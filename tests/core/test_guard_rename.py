"""``rename_snapshot``: a guard fed one story with request ids swapped ends in the renamed
snapshot, and decides alike from it (what the model checker's symmetry reduction rests on)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from core_support import ENGINES, POST, SESSION, FakeClock, cancel, elicit, make_guard, normalise

from fsm import SubmissionResult
from fsm import events as ev
from fsm.sse.guard import rename_snapshot

REJECT = SubmissionResult(
    400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "Unknown request"}}
)


def _story(a: Any, b: Any, engine: str) -> tuple[Any, list[Any]]:
    """Two requests on the POST stream: ``a`` answered and rejected, ``b`` cancelled,
    a third (id 5) left presented; the stream then cut. Returns (snapshot, actions)."""
    clock = FakeClock()
    guard = make_guard(engine, clock)
    out: list[Any] = []
    for n, msg in enumerate((elicit(a), elicit(b), elicit(5), cancel(b)), start=1):
        out += guard.feed(ev.SseEvent(POST, msg, f"e{n}"))
    out += guard.feed(ev.UserAnswered((SESSION, a), {"action": "accept"}))
    out += guard.feed(ev.SubmissionOutcome((SESSION, a), REJECT))
    return guard.snapshot(), normalise(out)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_story_with_ids_swapped_ends_in_the_renamed_snapshot(engine: str) -> None:
    snap, _ = _story(1, 2, engine)
    swapped, _ = _story(2, 1, engine)
    assert snap != swapped
    keys = {(SESSION, 1): (SESSION, 2), (SESSION, 2): (SESSION, 1)}
    assert rename_snapshot(snap, keys) == swapped
    assert rename_snapshot(snap, {}) is snap


@pytest.mark.parametrize("engine", ENGINES)
def test_the_renamed_guard_decides_alike(engine: str) -> None:
    snap, _ = _story(1, 2, engine)
    keys = {(SESSION, 1): (SESSION, 3), (SESSION, 2): (SESSION, 1), (SESSION, 3): (SESSION, 2)}
    original, renamed = make_guard(engine), make_guard(engine)
    original.restore(snap)
    renamed.restore(rename_snapshot(snap, keys))
    lost = ev.StreamLost(POST, clean=False)
    assert renamed.snapshot() == rename_snapshot(original.snapshot(), keys)
    a, b = normalise(original.feed(lost)), normalise(renamed.feed(lost))
    assert a  # the cut ends the interaction: something to compare
    reprs = {repr(old): repr(new) for old, new in keys.items()}
    pattern = re.compile("|".join(re.escape(r) for r in reprs))
    assert repr(b) == pattern.sub(lambda m: reprs[m.group()], repr(a))  # ids renamed in them
    assert renamed.snapshot() == rename_snapshot(original.snapshot(), keys)


@pytest.mark.parametrize("engine", ENGINES)
def test_renaming_one_request_to_a_string_id_gives_that_story(engine: str) -> None:
    """Only ``b`` is renamed, to a string id (JSON-RPC ids may be numbers or strings, mixed
    in one session): the failures caused by ``a`` keep their key, and the records are in
    the guard's order of mixed ids."""
    snap, _ = _story(1, 2, engine)
    renamed = rename_snapshot(snap, {(SESSION, 2): (SESSION, "b")})
    assert renamed == _story(1, "b", engine)[0]
