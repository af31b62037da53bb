""":class:`GatewayLimits` refuses, at construction, every value that would not bound what
it names: a count below its minimum, a body budget smaller than one body, a share outside
the budget, and a number of seconds that is negative, zero where a wait must pass, not a
number or infinite."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from fsm.gateway.app import GatewayLimits

OTHER_RULES = {
    "max_pending_refusals": ">= 0",
    "upstream_connections": "None or >= 1",
    "max_receiving_bytes": ">= max_body",
    "max_receiving_bytes_per_peer": "None, or between max_body and max_receiving_bytes",
}
"""The counts with a rule of their own (tested below); every other count is >= 1."""
COUNTS = [f.name for f in fields(GatewayLimits) if f.type == "int" and f.name not in OTHER_RULES]
"""The counts that must be at least 1: every ``int`` field not in :data:`OTHER_RULES`, so
that a count added without a range check fails here."""
HOLDS = ("standalone_hold_s", "session_keepalive_s")
"""The numbers of seconds that must be finite and >= 0 (0: none)."""
WAITS = [f.name for f in fields(GatewayLimits) if "float" in f.type and f.name not in HOLDS]
"""The numbers of seconds that must be finite and > 0: every other ``float`` field."""

NAN, INF = float("nan"), float("inf")


def test_every_field_is_a_count_or_a_number_of_seconds_with_a_rule() -> None:
    ruled = {*COUNTS, *OTHER_RULES, *WAITS, *HOLDS}
    assert ruled == {f.name for f in fields(GatewayLimits)}
    assert len(COUNTS) == 11 and len(WAITS) == 5


def _refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GatewayLimits(**kwargs)


@pytest.mark.parametrize("name", COUNTS)
def test_a_count_below_one_is_refused(name: str) -> None:
    _refused({name: 0}, rf"^GatewayLimits\.{name} must be >= 1$")
    GatewayLimits(**{name: 1, "max_receiving_bytes": 1 << 40})


@pytest.mark.parametrize("name", WAITS)
@pytest.mark.parametrize("value", [0.0, -1.0, NAN, INF, -INF])
def test_a_wait_is_finite_and_positive(name: str, value: float) -> None:
    _refused({name: value}, rf"^GatewayLimits\.{name}: .* is not a finite number of seconds > 0$")


@pytest.mark.parametrize("name", HOLDS)
@pytest.mark.parametrize("value", [-1.0, NAN, INF])
def test_a_hold_is_finite_and_not_negative(name: str, value: float) -> None:
    _refused({name: value}, rf"^GatewayLimits\.{name}: .* is not a finite number of seconds >= 0$")


@pytest.mark.parametrize("name", HOLDS)
def test_a_hold_of_zero_is_accepted(name: str) -> None:
    assert getattr(GatewayLimits(**{name: 0.0}), name) == 0.0


def test_the_body_budgets_hold_at_least_one_body() -> None:
    _refused({"max_body": 10, "max_receiving_bytes": 9}, "max_receiving_bytes must be >= max_body")
    for share in (9, 101):
        _refused(
            {"max_body": 10, "max_receiving_bytes": 100, "max_receiving_bytes_per_peer": share},
            "max_receiving_bytes_per_peer must be >= max_body and <= max_receiving_bytes",
        )
    GatewayLimits(max_body=10, max_receiving_bytes=100, max_receiving_bytes_per_peer=10)


def test_other_bounds_out_of_range_are_refused() -> None:
    _refused({"max_pending_refusals": -1}, r"max_pending_refusals must be >= 0$")
    _refused({"upstream_connections": 0}, r"upstream_connections must be None or >= 1$")
    assert GatewayLimits(max_pending_refusals=0, upstream_connections=1).upstream_connections == 1
