"""A world's bounds reject what they do not allow, by field name, at construction."""

from __future__ import annotations

import pytest

from fsm.world import Bounds, BoundsError


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
        ({"cuts": 1.5}, "Bounds.cuts: 1.5 is not an integer >= 0 or None (any number)"),
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
