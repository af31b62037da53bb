"""Bad arguments to the kits and the worlds get a clear ``ValueError``: a choice of
properties that names none (a typo, or a bare string read as its letters) would check
nothing and pass every run, and a bound out of range would explore nothing."""

from __future__ import annotations

from typing import Any

import pytest

from fsm.properties import PROPERTIES
from fsm.worlds.sse import Bounds, World
from models.guarded import CONFIG, GuardPolicy
from support.kit_runs import KITS


@pytest.mark.parametrize("kit", sorted(KITS))
def test_a_kit_checks_the_properties_it_is_given(kit: str) -> None:
    assert KITS[kit]().checked == frozenset(PROPERTIES)
    assert KITS[kit](check=["P2", "L1"]).checked == {"P2", "L1"}


@pytest.mark.parametrize("kit", sorted(KITS))
@pytest.mark.parametrize(
    ("check", "message"), [("P2", "not the string 'P2'"), (["P2", "P8"], "not a property: 'P8'")]
)
def test_a_kit_refuses_a_check_that_names_no_property(kit: str, check: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KITS[kit](check=check)


@pytest.mark.parametrize(
    ("kit", "bounds", "message"),
    [
        ("sse", {"max_tool_calls": -1}, "max_tool_calls=-1 and max_requests=6 must be >= 0"),
        ("sse", {"max_requests": -1}, "max_tool_calls=3 and max_requests=-1 must be >= 0"),
        ("mrtr", {"questions": 0}, r"out of range: questions=0 \(>= 1\)"),
        ("mrtr", {"server_ttl_s": 0.0}, r"out of range: server_ttl_s=0.0 \(> 0\)"),
        ("mrtr", {"server_ttl_s": float("nan")}, r"server_ttl_s=nan \(> 0\)"),
        ("tasks", {"questions": -1, "ttl_s": -2.0}, r"questions=-1 \(>= 1\), ttl_s=-2.0 \(> 0\)"),
    ],
)
def test_a_kit_refuses_bounds_out_of_range(kit: str, bounds: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KITS[kit](**bounds)


def test_a_kit_takes_the_smallest_bounds_in_range() -> None:
    assert KITS["sse"](max_tool_calls=0, max_requests=0).max_requests == 0
    assert KITS["mrtr"](questions=1, server_ttl_s=0.5).server_ttl_s == 0.5
    assert KITS["tasks"](questions=1, ttl_s=0.5).questions == 1


def test_a_world_refuses_properties_that_name_none() -> None:
    policy = GuardPolicy(CONFIG)
    with pytest.raises(ValueError, match="not a property: 'P0'"):
        World(policy, Bounds(), properties=["P1", "P0"])
    chosen = World(policy, Bounds(), properties=["P1"])
    assert [p.name for p in chosen.properties() if p.name in PROPERTIES] == ["P1"]
