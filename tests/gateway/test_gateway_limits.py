""":class:`GatewayLimits` refuses, at construction, every value that would not bound what
it names: a count below its minimum, a body budget smaller than one body, a share outside
the budget, and a number of seconds that is negative, zero where a wait must pass, not a
number or infinite."""

from __future__ import annotations

from typing import Any

import pytest

from fsm.gateway.app import GatewayLimits

COUNTS = (
    "max_body",
    "max_sessions",
    "max_final",
    "max_finals",
    "max_kept_bytes",
    "observations",
    "remembered",
    "max_event_bytes",
    "upstream_requests_per_session",
    "max_unaccepted",
    "max_credentials",
)
"""The counts that must be at least 1."""
WAITS = ("session_idle_s", "upstream_idle_s", "body_timeout_s", "lease_s", "probe_timeout_s")
"""The numbers of seconds that must be finite and > 0."""
HOLDS = ("standalone_hold_s", "session_keepalive_s")
"""The numbers of seconds that must be finite and >= 0 (0: none)."""

NAN, INF = float("nan"), float("inf")


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
    _refused({name: value}, rf"^GatewayLimits\.{name} must be finite and > 0$")


@pytest.mark.parametrize("name", HOLDS)
@pytest.mark.parametrize("value", [-1.0, NAN, INF])
def test_a_hold_is_finite_and_not_negative(name: str, value: float) -> None:
    _refused({name: value}, rf"^GatewayLimits\.{name} must be finite and >= 0$")


@pytest.mark.parametrize("name", HOLDS)
def test_a_hold_of_zero_is_none(name: str) -> None:
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
