"""A client that crashes (``models/guarded_durable.py``): the world's ``crashes`` is
proved by the guard with its durable store holding P1-P7 and L1, and the same guard
restarted without a store failing P2 with a pinned shortest counterexample (pins and
verdicts: ``pins.py``); here, what that counterexample is and what the store keeps."""

from __future__ import annotations

import pins

from fsm.checker import replay
from fsm.worlds.sse import Bounds, Restart

ASKED = ["server sends elicitation 0", "deliver 0", "deliver 1"]


def test_no_crashes_by_default() -> None:
    assert Bounds().crashes == 0
    assert Restart() == ("restart",)


def test_without_a_store_an_asked_question_is_asked_again() -> None:
    assert pins.counterexample("no-store[inclusive]", "P2").names == [
        *ASKED,
        "client crashes False",
        "backoff elapses",
        "resume answered",
        "deliver 1",
    ]


def test_a_prompt_on_screen_at_the_crash_is_shown_once_more() -> None:
    model, _ = pins.report("guarded-durable[after,never]")
    states = replay(model, [*ASKED, "client crashes False"])
    assert states[-1].env.prompts == frozenset({0})
    assert states[-1].agent.monitor.reshown == frozenset({("s", 0)})


def test_an_answer_in_flight_at_the_crash_is_posted_again_not_asked() -> None:
    model, _ = pins.report("guarded-durable[after,answers]")
    for delivered in (False, True):
        crash = f"client crashes {delivered}"
        states = replay(model, [*ASKED, "user answers 0", crash, "answer POST 0"])
        after = states[-2]
        assert after.env.posts == frozenset({0}) and after.env.prompts == frozenset()
        assert states[-1].env.server[0] == "answered"
