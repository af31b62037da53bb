"""The one implementation of P1-P7 (:class:`fsm.properties.Facts`) judges as the rules did
when they were written over the immutable state (:mod:`support.monitor_reference`, a
frozen copy of the old :func:`fsm.properties.step`), however it is run: through the pure
:func:`fsm.properties.step` the model checker uses, through :func:`fsm.properties.forget`,
and in place through the online :class:`fsm.properties.Monitor`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm import properties as P
from fsm.errors import RequestKey
from support import monitor_reference as ref
from support.monitor_reference import BUDGETS, OBSERVATIONS

SEQUENCES = st.lists(OBSERVATIONS, max_size=60)
RETAIN = st.one_of(st.none(), st.integers(0, 3))
INTERACTIONS = st.sampled_from(["post:1", "post:2", "post:3", "get", "get/2", "get#1"])
MANY = settings(max_examples=1000, deadline=None)
K1 = ("s1", 1)


@MANY
@given(SEQUENCES, BUDGETS)
def test_step_judges_every_observation_as_the_old_step(
    observations: list[P.Observation], budgets: P.Budgets
) -> None:
    """The same violations, in the same order, and an equal state (equal hash too: the
    checker interns its states by it) after every observation."""
    new = old = P.MonitorState()
    for obs in observations:
        new, bad = P.step(new, obs, budgets)
        old, expected = ref.step(old, obs, budgets)
        assert bad == expected, obs
        assert new == old and hash(new) == hash(old), obs
    assert P.unfinished(new) == ref.unfinished(old)


@MANY
@given(SEQUENCES, BUDGETS, st.lists(INTERACTIONS, max_size=3))
def test_forget_leaves_the_state_the_old_forget_left(
    observations: list[P.Observation], budgets: P.Budgets, gone: list[str]
) -> None:
    state = P.MonitorState()
    for obs in observations:
        state = ref.step(state, obs, budgets)[0]
    for interaction in gone:
        forgotten = P.forget(state, interaction)
        assert forgotten == ref.forget(state, interaction)
        state = forgotten


@MANY
@given(SEQUENCES, BUDGETS, RETAIN)
def test_the_online_monitor_judges_as_the_old_one(
    observations: list[P.Observation], budgets: P.Budgets, retain: int | None
) -> None:
    """In place, forgetting past ``retain``: the same violations, numbered alike, and the
    same state after every observation; the same unfinished interactions at the end."""
    new = P.Monitor(budgets, retain=retain)
    old = ref.Monitor(budgets, retain=retain)
    for obs in observations:
        assert new.observe(obs) == old.observe(obs), obs
        assert new.state == old.state, obs
    assert new.finish() == old.finish()
    assert (new.violations, new.count) == (old.violations, old.count)


@MANY
@given(SEQUENCES, SEQUENCES, BUDGETS)
def test_a_thawed_state_judges_on_as_the_facts_it_was_frozen_from(
    before: list[P.Observation], after: list[P.Observation], budgets: P.Budgets
) -> None:
    """Freezing and thawing lose nothing the rules read, the indexes included (the keys
    and streams learnt since the last revival and loss, the keys of each stream)."""
    facts = P.Facts(budgets)
    for obs in before:
        facts.observe(obs)
    frozen = facts.freeze()
    thawed = P.Facts.thaw(frozen, budgets)
    assert thawed.freeze() == frozen
    for obs in after:
        assert thawed.observe(obs) == facts.observe(obs), obs
        assert thawed.freeze() == facts.freeze(), obs
    for interaction in ("post:1", "get"):
        assert thawed.forget(interaction) == facts.forget(interaction)
        assert thawed.freeze() == facts.freeze()


@settings(max_examples=300, deadline=None)
@given(SEQUENCES, BUDGETS, OBSERVATIONS)
def test_step_shares_the_fields_the_observation_left_alone(
    observations: list[P.Observation], budgets: P.Budgets, obs: P.Observation
) -> None:
    """What ``step`` returns holds its argument's own objects wherever a field is
    unchanged: states stay cheap to compare and hash, and share their memory."""
    state = P.MonitorState()
    for earlier in observations:
        state = P.step(state, earlier, budgets)[0]
    after = P.step(state, obs, budgets)[0]
    for name, was, now in zip(P.MonitorState._fields, state, after, strict=True):
        if now == was and name != "session_gone":
            assert now is was, name


def test_the_monitor_updates_its_facts_in_place() -> None:
    """An observation costs what it changes: the monitor's sets and maps are the same
    objects after a thousand interactions, never copied."""
    monitor = P.Monitor(retain=8)
    facts = monitor.facts
    fields = {name: getattr(facts, name) for name in ("dead", "presented", "stream_of", "seen")}
    for n in range(1_000):
        key, stream = ("s1", n), f"post:{n}"
        for obs in (
            P.Began(stream),
            P.Delivered(key, stream, float(n)),
            P.Presented(key, float(n)),
            P.EventSeen(stream, f"e{n}"),
            P.Cancelled(key),
            P.Ended(stream, "failed"),
        ):
            assert monitor.observe(obs) == ()
    assert monitor.facts is facts
    assert all(getattr(facts, name) is value for name, value in fields.items())
    assert len(facts.stream_of) == 8 and monitor.retained() < 200


def test_assigning_a_state_makes_the_monitor_judge_from_it() -> None:
    monitor = P.Monitor()
    told = monitor.state
    monitor.observe(P.Delivered(K1, "post:1", 0.0))
    monitor.observe(P.Presented(K1, 0.0))
    monitor.state = told
    assert monitor.observe(P.Presented(K1, 1.0)) == ()
    assert [v.name for v in monitor.observe(P.Presented(K1, 2.0))] == ["P2"]


def test_the_monitor_reports_what_it_forgets() -> None:
    forgotten: list[tuple[str, set[RequestKey]]] = []
    monitor = P.Monitor(retain=0, on_forget=lambda i, keys: forgotten.append((i, keys)))
    for obs in (P.Delivered(K1, "post:1", 0.0), P.Ended("post:1", "completed")):
        monitor.observe(obs)
    assert forgotten == [("post:1", {K1})]
    with pytest.raises(ValueError, match=r"^retain must be >= 0 or None$"):
        P.Monitor(retain=-1)
