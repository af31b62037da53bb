"""What the monitor says it holds (``fsm/properties.py``), pinned where ``make mutate``
found it unpinned: :meth:`fsm.properties.Facts.retained` counts every entry of every
set and map of the facts, so a container added without being counted fails here."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fsm import properties as P
from support.monitor_reference import BUDGETS, OBSERVATIONS

# bounded by the seven property names, not by the traffic: not counted
_FIXED = {"violated"}


def _entries(facts: P.Facts) -> int:
    """Every entry the facts hold, counted from their attributes: the seen event ids by
    stream (each id one entry, each stream one more) and each key's stream twice (the
    per-stream index holds it again)."""
    total = 0
    for name in P.Facts.__slots__:
        value = getattr(facts, name)
        if isinstance(value, set | dict) and name not in _FIXED:
            total += len(value)
    return total + sum(len(ids) for ids in facts.seen.values()) + len(facts.stream_of)


def test_a_fresh_monitor_holds_nothing() -> None:
    assert P.Monitor().retained() == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(OBSERVATIONS, max_size=40), BUDGETS, st.one_of(st.none(), st.integers(0, 3)))
def test_retained_counts_every_entry_of_the_facts_and_the_window(
    observations: list[P.Observation], budgets: P.Budgets, retain: int | None
) -> None:
    monitor = P.Monitor(budgets, retain=retain)
    for obs in observations:
        monitor.observe(obs)
        assert monitor.facts.retained() == _entries(monitor.facts), obs
        assert monitor.retained() == monitor.facts.retained() + len(monitor._ended)


K1, K2 = ("s1", 1), ("s1", 2)
ACCEPT = {"action": "accept"}


def test_forgetting_an_interaction_drops_its_re_asks_and_reshown_prompts() -> None:
    monitor = P.Monitor(retain=0)
    for obs in (
        P.Began("post:1"),
        P.Delivered(K1, "post:1", 0.0),
        P.Answered(K1, ACCEPT),
        P.Delivered(K2, "post:1", 0.0, question=K1),
        P.Presented(K2, 0.0),
        P.Reshown(K2, 1.0),
        P.Delivered(K2, "post:1", 1e9, replayed=True),  # past its deadline
        P.EventSeen("post:1", "e1"),
        P.EventSeen("get", "e1"),
        P.EventSeen("get", "e2"),
    ):
        monitor.observe(obs)
    facts = monitor.facts
    assert facts.asks == {K2: K1} and facts.reshown == {K2} and facts.stale_delivery == {K2}
    assert facts.retained() == _entries(facts)
    monitor.observe(P.Ended("post:1", "completed"))
    assert facts.asks == {} and facts.reshown == set() and facts.stale_delivery == set()
    assert facts.retained() == _entries(facts)  # the ids seen on get are still counted


def test_a_question_answered_unseen_then_shown_under_a_re_ask_is_not_shown_again() -> None:
    """P2 counts a question's presentations under any of its keys: the first key shown
    after its re-ask was shown is a second presentation of the same question."""
    monitor = P.Monitor()
    for obs in (
        P.Delivered(K1, "post:1", 0.0),
        P.Answered(K1, ACCEPT),
        P.Delivered(K2, "post:2", 0.0, question=K1),
        P.Presented(K2, 0.0),
    ):
        assert monitor.observe(obs) == ()
    assert monitor.observe(P.Presented(K1, 1.0)) == (
        P.Violation("P2", f"{K1!r} presented: it asks again what {K1!r} asked"),
    )
    k3 = ("s1", 3)
    assert monitor.observe(P.Delivered(k3, "post:3", 2.0, question=K2)) == ()
    assert monitor.observe(P.Presented(k3, 2.0)) == (
        P.Violation("P2", f"{k3!r} presented: it asks again what {K1!r} asked"),
    )


def _state(*observations: P.Observation) -> P.MonitorState:
    state = P.MonitorState()
    for obs in observations:
        state = P.step(state, obs, P.Budgets())[0]
    return state


REASKED = (
    P.Delivered(K1, "post:1", 0.0),
    P.Answered(K1, ACCEPT),
    P.Delivered(K2, "post:2", 0.0, question=K1),
    P.Presented(K2, 0.0),
)


def test_the_pure_step_remembers_which_question_a_shown_re_ask_asked() -> None:
    """The state the checker keeps holds no set of asked questions: thawing it finds the
    question a shown re-ask asked again."""
    _, bad = P.step(_state(*REASKED), P.Presented(K1, 1.0), P.Budgets())
    assert [v.name for v in bad] == ["P2"]
    shown_first = _state(
        P.Delivered(K1, "post:1", 0.0),
        P.Presented(K1, 0.0),
        P.Answered(K1, ACCEPT),
        P.Delivered(K2, "post:2", 0.0, question=K1),
    )
    _, bad = P.step(shown_first, P.Presented(K2, 1.0), P.Budgets())
    assert [v.name for v in bad] == ["P2"]


def test_renaming_keys_renames_re_asks_and_reshown_prompts() -> None:
    """Either key of a re-ask may be renamed alone; a key not renamed keeps its name."""
    state = _state(*REASKED, P.Reshown(K2, 1.0))
    new1, new2 = ("s2", 1), ("s2", 2)
    both = P.rename_keys(state, {K1: new1, K2: new2})
    assert dict(both.asks) == {new2: new1} and set(both.reshown) == {new2}
    first = P.rename_keys(state, {K1: new1})
    assert dict(first.asks) == {K2: new1} and set(first.reshown) == {K2}
    second = P.rename_keys(state, {K2: new2})
    assert dict(second.asks) == {new2: K1} and set(second.reshown) == {new2}


def test_a_reshown_prompt_is_judged_by_name_for_each_rule_it_breaks() -> None:
    """A prompt shown again after a restart: of a re-ask whose question was answered
    (P2), a second time (P2), of a request known dead (P1), past its deadline (P6)."""
    k3, k4 = ("s1", 3), ("s1", 4)
    monitor = P.Monitor()
    for obs in (
        P.Delivered(K1, "post:1", 0.0),
        P.Presented(K1, 0.0),
        P.Answered(K1, ACCEPT),
        P.Delivered(K2, "post:2", 0.0, question=K1),
        P.Presented(K2, 0.0),  # P2: a re-ask shown
        P.Delivered(k3, "post:3", 0.0),
        P.Presented(k3, 0.0),
        P.Cancelled(k3),
        P.Delivered(k4, "post:4", 0.0),
        P.Presented(k4, 0.0),
        P.Delivered(k4, "post:4", 1e9, replayed=True),
    ):
        monitor.observe(obs)
    judged = {
        P.Reshown(K2, 1.0): ("P2", f"{K2!r} shown again after it was answered"),
        P.Reshown(K2, 2.0): ("P2", f"{K2!r} shown again after a restart twice"),
        P.Reshown(k3, 1.0): ("P1", f"{k3!r} shown again after the client knew it dead"),
        P.Reshown(k4, 1e9): ("P6", f"{k4!r} shown again past its deadline"),
    }
    for shown, (name, why) in judged.items():
        assert monitor.observe(shown) == (P.Violation(name, why),), shown


def test_a_restart_forgets_every_event_id_seen_and_counts_none() -> None:
    monitor = P.Monitor()
    for obs in (P.EventSeen("get", "e1"), P.EventSeen("get", "e2"), P.Restarted()):
        monitor.observe(obs)
    assert monitor.facts.seen == {} and monitor.facts.retained() == _entries(monitor.facts)
