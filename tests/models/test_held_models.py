"""The held-connection models (``models/guarded_held.py``): pinned state spaces, verdicts,
shortest counterexamples, and the failure the guard as it was ends with where the guard
completes.

The world's ``hold`` (a server refusing resumes while it holds the connection an abrupt
cut left half-open) is a feature of the checker's world like any other: it is proved by
models that must pass (the shipped guard, whatever the server's refusal, up to the longest
hold its patience waits out, and a server that never lets go) and models that must fail
(one refusal beyond the patience, the guard as it was, a guard patient without end).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from shipped import Shipped, pin_tests

from fsm.checker import check, replay
from fsm.worlds.sse import Bounds, BoundsError, World
from models.guarded import GuardPolicy
from models.guarded_held import PATIENT_CONFIG, held, tolerated

PINNED: dict[str, tuple[int, int]] = {
    "guarded-held[409,k=14]": (4827, 12185),
    "guarded-held[400-exists,k=14]": (4827, 12185),
    "guarded-held[409-retry-after,k=5]": (1857, 4598),
    "guarded-held[409,k=15]": (4982, 12612),
    "guarded-held[409,forever]": (2344, 5232),
    "impatient[409,k=3]": (894, 2199),
    "impatient[400-exists,k=1]": (360, 837),
    "endless-patience[409,forever]": (348, 789),
}

SHORTEST: dict[str, dict[str, tuple[int, int | None]]] = {
    # the call's stream cut after its priming event; every resume refused until the
    # refusal the patience does not wait out (or the budget of 3, or the first for a
    # table that judged Render's 400 terminal)
    "guarded-held[409,k=15]": {"patience": (32, None)},
    "impatient[409,k=3]": {"patience": (8, None)},
    "impatient[400-exists,k=1]": {"patience": (4, None)},
    # a refusal, its wait, the resume refused again: the same state
    "endless-patience[409,forever]": {"L1": (5, 3)},
}

SHIPPED = Shipped(("guarded_held.py",))


test_every_held_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)


@pytest.mark.parametrize("name", sorted(n for n in PINNED if n not in SHORTEST))
def test_the_guard_waits_out_every_hold_its_patience_allows(name: str) -> None:
    model, report = SHIPPED.report(name)
    report.assert_properties()
    for witness in ("presented", "completed", "held", "cut-and-resumed"):
        assert report.result(witness).path is not None, witness
    assert ("patience" in {r.name for r in report.results}) == (model.bounds.hold is not None)


@pytest.mark.parametrize("name", sorted(SHORTEST))
def test_faulty_clients_violate_exactly_what_they_should(name: str) -> None:
    SHIPPED.assert_violates_exactly(name, SHORTEST[name])


def test_the_patience_is_counted_in_refusals_as_the_models_say() -> None:
    """The longest holds above are what :func:`tolerated` computes from the guard's
    default patience: 14 refusals waited out with backoff (0.5 s doubling to 15 s, the
    last wait cut to the 150 s horizon), 5 with ``Retry-After: 30``."""
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
    faulty, report = SHIPPED.report("impatient[409,k=3]")
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
