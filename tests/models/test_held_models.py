"""The held-connection models (``models/guarded_held.py``; their pins, verdicts and
shortest counterexamples in ``pins.py``): the patience as the models count it, and the
failure the guard as it was ends with where the guard completes.

The world's ``hold`` (a server refusing resumes while it holds the connection an abrupt
cut left half-open) is a feature of the checker's world like any other: it is proved by
models that must pass (the shipped guard, whatever the server's refusal, up to the longest
hold its patience waits out, and a server that never lets go) and models that must fail
(one refusal beyond the patience, the guard as it was, a guard patient without end).
"""

from __future__ import annotations

from dataclasses import replace

import pins
import pytest

from fsm.checker import check, replay
from fsm.worlds.sse import Bounds, BoundsError, World
from models.guarded import GuardPolicy
from models.guarded_held import PATIENT_CONFIG, held, tolerated

HELD = pins.FAMILIES["held"]


def test_the_patience_is_checked_where_the_server_holds() -> None:
    """``patience`` is among the properties exactly where the world holds a connection."""
    for name in HELD.pins:
        model, report = pins.report(name)
        assert ("patience" in {r.name for r in report.results}) == (model.bounds.hold is not None)


def test_the_patience_is_counted_in_refusals_as_the_models_say() -> None:
    """The longest holds the pinned models wait out (k=14, k=5) are what :func:`tolerated`
    computes from the guard's default patience: 14 refusals waited out with backoff (0.5 s
    doubling to 15 s, the last wait cut to the 150 s horizon), 5 with ``Retry-After: 30``."""
    assert PATIENT_CONFIG.resume_patience_s == 150.0
    assert tolerated(PATIENT_CONFIG) == 14
    assert tolerated(PATIENT_CONFIG, 30.0) == 5


COMPLETION = [
    "backoff elapses",
    "resume answered",
    "server sends elicitation 0",
    "deliver 1",
    "user answers 0",
    "answer POST 0",
    "deliver 2",
]
"""After the third refusal: the server has let go; resume, be asked, answer, get the
result."""


def test_where_the_guard_as_it_was_fails_the_guard_completes_with_the_result() -> None:
    """The impatient guard's shortest counterexample, move for move, in the same world
    (``hold=3``) with the shipped guard: the impatient one has ended the call failed at
    the third refusal; the guard is still waiting, and the server's next moves bring the
    result and the interaction completes (the ``completed`` outcome, the user's answer
    accepted)."""
    faulty, report = pins.report("impatient[409,k=3]")
    path = report.assert_violated("patience").names
    failed = replay(faulty, path)[-1]
    assert failed.env.ended and failed.env.conflict == "failed"

    guard = World(GuardPolicy(PATIENT_CONFIG), held(3), name="guard, same world")
    waiting = replay(guard, path)[-1]
    assert not waiting.env.ended and waiting.env.conflict == "refused"
    assert waiting.env.held == 0  # the server lets go now: the next resume gets through
    done = replay(guard, [*path, *COMPLETION])[-1]
    assert done.env.ended and done.env.conflict == "" and done.env.server == ("answered",)
    assert guard.properties()  # the same properties judge both
    assert all(p.name != "patience" or p.predicate(done) for p in guard.properties())


def test_hold_is_a_bound_like_the_others() -> None:
    with pytest.raises(BoundsError, match=r"Bounds\.hold: -1 is not an integer >= 0 or None"):
        Bounds(hold=-1)
    with pytest.raises(BoundsError, match=r"Bounds\.held_answer: '418' is not one of 409"):
        Bounds(held_answer="418")  # type: ignore[arg-type]
    b = Bounds().updated({"hold": "none", "held_answer": "400-exists"})
    assert (b.hold, b.held_answer) == (None, "400-exists")
    assert replace(b, hold=2).hold == 2
    assert Bounds().hold == 0  # the default: no hold, the shipped models' spaces unchanged


def test_the_sdk_client_gives_up_on_a_held_connection_too() -> None:
    """The mcp 2.3.0 client's model against the same server: a refused resume is a failed
    reconnection attempt, and it stops after two (``Maximum reconnection attempts``)."""
    from models.mcp_sdk_2_3 import MODEL

    report = check(MODEL.with_bounds({"hold": "3"}))
    path = report.assert_violated("patience")
    assert [n for n in path.names if n == "resume answered"] == ["resume answered"] * 2
