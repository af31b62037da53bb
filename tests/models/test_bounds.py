"""A world's bounds reject what they do not allow, by field name, at construction, in
every era alike (one mechanism: :class:`fsm.worlds.common.WorldBounds`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from fsm.worlds.common import WorldBounds
from fsm.worlds.mrtr import MrtrBounds
from fsm.worlds.sse import Bounds, BoundsError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"replay": "never"}, "Bounds.replay: 'never' is not one of after, inclusive, start"),
        ({"deadline": "sometimes"}, "Bounds.deadline: 'sometimes' is not one of silent, cancel"),
        (
            {"unknown_answer": "418"},
            "Bounds.unknown_answer: '418' is not one of 202, 404, 404rpc, rpc, 500rpc, neterr",
        ),
        ({"user": "sometimes"}, "Bounds.user: 'sometimes' is not one of answers, never"),
        ({"requests": -1}, "Bounds.requests: -1 is not an integer >= 0"),
        ({"cuts": 1.5}, "Bounds.cuts: 1.5 is not an integer >= 0 or None (no limit)"),
        ({"post_faults": True}, "Bounds.post_faults: True is not an integer >= 0"),
        ({"reaper": 1}, "Bounds.reaper: 1 is not True or False"),
        ({"ttl": 0}, "Bounds.ttl: 0 is not a number > 0"),
        ({"rewinds": -2}, "Bounds.rewinds: -2 is not an integer >= 0"),
    ],
)
def test_bad_values_are_refused_naming_the_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(BoundsError) as info:
        Bounds(**changes)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_updated_parses_text_per_field() -> None:
    b = Bounds().updated(
        {
            "requests": "3",
            "reaper": "true",
            "clock": "no",
            "ttl": "2",
            "replay": "inclusive",
            "rewinds": "1",
        }
    )
    assert (b.requests, b.reaper, b.clock, b.ttl, b.replay) == (3, True, False, 2.0, "inclusive")
    assert b.rewinds == 1
    assert Bounds().updated({}) == Bounds()
    with pytest.raises(BoundsError, match="no bound 'colour'; the bounds are requests, cuts"):
        Bounds().updated({"colour": "red"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"questions": -1}, "MrtrBounds.questions: -1 is not an integer >= 0"),
        ({"lost": 1.0}, "MrtrBounds.lost: 1.0 is not an integer >= 0"),
        ({"restarts": False}, "MrtrBounds.restarts: False is not an integer >= 0"),
        ({"on_invalid": "ignore"}, "MrtrBounds.on_invalid: 'ignore' is not one of reject, reask"),
        ({"user": "sometimes"}, "MrtrBounds.user: 'sometimes' is not one of answers, never"),
        ({"tick": "late"}, "MrtrBounds.tick: 'late' is not one of seen, missed"),
        ({"ttl": -0.5}, "MrtrBounds.ttl: -0.5 is not a number > 0"),
    ],
)
def test_mrtr_bounds_refuse_bad_values_naming_the_field(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(BoundsError) as info:
        MrtrBounds(**changes)  # type: ignore[arg-type]
    assert str(info.value) == message
    with pytest.raises(BoundsError):
        replace(MrtrBounds(), **changes)


def test_mrtr_bounds_are_updated_from_text() -> None:
    b = MrtrBounds().updated({"questions": "2", "on_invalid": "reask", "ttl": "1.5"})
    assert (b.questions, b.on_invalid, b.ttl) == (2, "reask", 1.5)
    with pytest.raises(BoundsError, match="no bound 'requests'; the bounds are questions"):
        MrtrBounds().updated({"requests": "2"})


def test_the_cross_field_rule_of_the_sse_bounds_holds() -> None:
    with pytest.raises(BoundsError, match="several sessions need get_cuts=0"):
        Bounds(sessions=2, get_cuts=1)


def test_a_bound_of_a_type_no_rule_reads_is_a_type_error() -> None:
    @dataclass(frozen=True, slots=True)
    class Odd(WorldBounds):
        names: tuple[str, ...] = ()
        user: str = "answers"
        ttl: float = 0.5

    with pytest.raises(TypeError, match=r"Odd\.names: a checked field is an int, int \| None"):
        Odd()
