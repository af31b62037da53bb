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
