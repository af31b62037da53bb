"""An MRTR call whose client crashes (``models/guarded_mrtr_durable.py``): the world's
``crashes`` is proved by the MRTR rules with their store holding P1-P7 and L1, and the
same rules restarted with nothing failing P2 with a pinned shortest counterexample (pins
and verdicts: ``pins.py``); here, what that counterexample is and what the store keeps."""

from __future__ import annotations

import pins

from fsm.checker import replay
from fsm.worlds.mrtr import MrtrBounds, Restart

ANSWERED_THEN_CRASHED = ["server responds", "user answers 0", "client crashes"]


def test_no_crashes_by_default() -> None:
    assert MrtrBounds().crashes == 0
    assert Restart() == ("restart",)


def test_after_a_crash_the_stored_answer_is_sent_again_not_asked() -> None:
    model, _ = pins.report("guarded-mrtr-durable[answers]")
    states = replay(model, [*ANSWERED_THEN_CRASHED, "server responds"])
    assert states[-2].env.inflight is not None and states[-2].env.inflight[1] == {0}
    assert states[-1].env.ended == "completed" and states[-1].env.prompts == frozenset()


def test_without_a_store_an_answered_question_is_asked_again() -> None:
    path = pins.counterexample("no-store-mrtr[answers]", "P2")
    assert path.names == [*ANSWERED_THEN_CRASHED, "server responds"]
    assert "Retry(None, ())" in path.steps[2].note  # the application issued the call again
