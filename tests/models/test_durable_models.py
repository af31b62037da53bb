"""A client that crashes (``models/guarded_durable.py``): the world's ``crashes`` is
proved by the guard with its durable store holding P1-P7 and L1, and the same guard
restarted without a store failing P2 with a pinned shortest counterexample."""

from __future__ import annotations

import pytest
from shipped import Shipped, pin_tests

from fsm.checker import replay
from fsm.worlds.sse import Bounds, Restart

SHIPPED = Shipped(("guarded_durable.py",))

PINNED: dict[str, tuple[int, int]] = {
    "guarded-durable[after,answers]": (2124, 4871),
    "guarded-durable[after,never]": (171, 374),
    "guarded-durable[inclusive,answers]": (3430, 8019),
    "guarded-durable[inclusive,never]": (235, 504),
    "no-store[inclusive]": (1802, 4054),
}

SHORTEST = {"no-store[inclusive]": {"P2": (7, None)}}

ASKED = ["server sends elicitation 0", "deliver 0", "deliver 1"]


def test_no_crashes_by_default() -> None:
    assert Bounds().crashes == 0
    assert Restart() == ("restart",)


test_every_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)


@pytest.mark.parametrize("name", sorted(n for n in PINNED if n.startswith("guarded")))
def test_the_guard_with_its_store_satisfies_every_property(name: str) -> None:
    _, report = SHIPPED.report(name)
    report.assert_properties()
    assert report.result("presented").path is not None


def test_without_a_store_an_asked_question_is_asked_again() -> None:
    SHIPPED.assert_violates_exactly("no-store[inclusive]", SHORTEST["no-store[inclusive]"])
    _, report = SHIPPED.report("no-store[inclusive]")
    path = report.assert_violated("P2")
    assert [str(s.action) for s in path.steps] == [
        *ASKED,
        "client crashes False",
        "backoff elapses",
        "resume answered",
        "deliver 1",
    ]


def test_a_prompt_on_screen_at_the_crash_is_shown_once_more() -> None:
    model, _ = SHIPPED.report("guarded-durable[after,never]")
    states = replay(model, [*ASKED, "client crashes False"])
    assert states[-1].env.prompts == frozenset({0})
    assert states[-1].agent.monitor.reshown == frozenset({("s", 0)})


def test_an_answer_in_flight_at_the_crash_is_posted_again_not_asked() -> None:
    model, _ = SHIPPED.report("guarded-durable[after,answers]")
    for delivered in (False, True):
        crash = f"client crashes {delivered}"
        states = replay(model, [*ASKED, "user answers 0", crash, "answer POST 0"])
        after = states[-2]
        assert after.env.posts == frozenset({0}) and after.env.prompts == frozenset()
        assert states[-1].env.server[0] == "answered"
