"""An MRTR call whose client crashes (``models/guarded_mrtr_durable.py``): the world's
``crashes`` is proved by the MRTR rules with their store holding P1-P7 and L1, and the
same rules restarted with nothing failing P2 with a pinned shortest counterexample."""

from __future__ import annotations

import pytest
from shipped import Shipped, pin_tests

from fsm.checker import replay
from fsm.worlds.mrtr import MrtrBounds, Restart

SHIPPED = Shipped(("guarded_mrtr_durable.py",))

PINNED: dict[str, tuple[int, int]] = {
    "guarded-mrtr-durable[answers]": (43, 45),
    "guarded-mrtr-durable[reasks]": (83, 92),
    "guarded-mrtr-durable[polls]": (83, 92),
    "guarded-mrtr-durable[lost]": (106, 127),
    "guarded-mrtr-durable[reasks,lost]": (219, 282),
    "no-store-mrtr[answers]": (59, 64),
}

SHORTEST = {"no-store-mrtr[answers]": {"P2": (4, None), "P6": (5, None)}}

ANSWERED_THEN_CRASHED = ["server responds", "user answers 0", "client crashes"]


def test_no_crashes_by_default() -> None:
    assert MrtrBounds().crashes == 0
    assert Restart() == ("restart",)


test_every_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)


@pytest.mark.parametrize("name", sorted(n for n in PINNED if n.startswith("guarded")))
def test_the_rules_with_their_store_satisfy_every_property(name: str) -> None:
    _, report = SHIPPED.report(name)
    report.assert_properties()
    assert report.result("presented").path is not None


def test_after_a_crash_the_stored_answer_is_sent_again_not_asked() -> None:
    model, _ = SHIPPED.report("guarded-mrtr-durable[answers]")
    states = replay(model, [*ANSWERED_THEN_CRASHED, "server responds"])
    assert states[-2].env.inflight is not None and states[-2].env.inflight[1] == {0}
    assert states[-1].env.ended == "completed" and states[-1].env.prompts == frozenset()


def test_without_a_store_an_answered_question_is_asked_again() -> None:
    SHIPPED.assert_violates_exactly("no-store-mrtr[answers]", SHORTEST["no-store-mrtr[answers]"])
    _, report = SHIPPED.report("no-store-mrtr[answers]")
    path = report.assert_violated("P2")
    assert [str(s.action) for s in path.steps] == [*ANSWERED_THEN_CRASHED, "server responds"]
    assert "Retry(None, ())" in path.steps[2].note  # the application issued the call again
