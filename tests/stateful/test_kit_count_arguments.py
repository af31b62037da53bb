"""Every kit's count arguments are integers, its durations numbers, checked in one place.

``conformance_machine(max_requests=nan)`` passed ``nan < 0`` and made every precondition
``len(...) < nan`` false: the kit sent no request and passed a client known to violate
P2. ``questions=1.5`` (MRTR and tasks kits) passed ``1.5 < 1``. A count is an ``int`` (not
a ``bool``) at least its minimum (``max_tool_calls``, ``max_requests`` >= 0; ``questions``
>= 1); a duration is a finite number > 0 (not a ``bool``, not NaN, not an infinity).
Anything else is a ``ValueError`` naming the argument and its value, from every public
entry point of :mod:`fsm.testing` that takes one.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from fsm.testing import ConformanceFailure, Sdk230Client, conformance_machine, kit_settings
from support.kit_runs import KITS

COUNTS = [
    ("sse", "max_tool_calls", 0),
    ("sse", "max_requests", 0),
    ("mrtr", "questions", 1),
    ("tasks", "questions", 1),
]
DURATIONS = [("mrtr", "server_ttl_s"), ("tasks", "ttl_s")]

NOT_COUNTS: list[Any] = [math.nan, math.inf, -math.inf, 1.5, 2.0, True, False, "3", None, 3 + 0j]


@pytest.mark.parametrize(("kit", "name", "least"), COUNTS)
@pytest.mark.parametrize("value", NOT_COUNTS, ids=repr)
def test_a_count_that_is_not_an_integer_is_refused(
    kit: str, name: str, least: int, value: Any
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r} (an integer >= {least})")):
        KITS[kit](**{name: value})


@pytest.mark.parametrize(("kit", "name", "least"), COUNTS)
def test_a_count_is_exactly_an_integer_at_least_its_minimum(
    kit: str, name: str, least: int
) -> None:
    """The smallest integer is taken, one less is refused for its range, and the same
    value as a float for its type."""
    assert getattr(KITS[kit](**{name: least}), name) == least
    assert type(getattr(KITS[kit](**{name: least + 2}), name)) is int
    with pytest.raises(ValueError, match=f"{name}={least - 1} \\(>= {least}\\)"):
        KITS[kit](**{name: least - 1})
    with pytest.raises(ValueError, match=f"{name}={float(least + 2)!r} \\(an integer"):
        KITS[kit](**{name: float(least + 2)})


@pytest.mark.parametrize(("kit", "name"), DURATIONS)
@pytest.mark.parametrize("value", [True, "5", None, [1]], ids=repr)
def test_a_duration_that_is_not_a_number_is_refused(kit: str, name: str, value: Any) -> None:
    """A ``bool``, a string, ``None`` or a list as a duration is refused with the
    documented ``ValueError`` naming the field (``True > 0`` holds, so a bool is checked
    by type)."""
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r} (a finite number > 0)")):
        KITS[kit](**{name: value})


@pytest.mark.parametrize(("kit", "name"), DURATIONS)
@pytest.mark.parametrize("value", [math.inf, math.nan, 0, -1.0], ids=repr)
def test_a_duration_that_is_not_a_finite_number_above_0_is_refused(
    kit: str, name: str, value: Any
) -> None:
    """No TTL a kit states is infinite (a task's ``ttlMs`` is an integer: an infinite
    ``ttl_s`` made the run die of ``OverflowError``), NaN or not above 0."""
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        KITS[kit](**{name: value})


def test_every_wrong_bound_is_named_at_once() -> None:
    with pytest.raises(ValueError) as caught:
        KITS["sse"](max_tool_calls=math.nan, max_requests=1.5)
    assert "max_tool_calls=nan (an integer >= 0), max_requests=1.5 (an integer >= 0)" in str(
        caught.value
    )
    with pytest.raises(ValueError) as caught:
        KITS["tasks"](questions=True, ttl_s=True)
    assert "questions=True (an integer >= 1), ttl_s=True (a finite number > 0)" in str(caught.value)


def test_a_nan_bound_cannot_make_a_violating_client_pass() -> None:
    """The attack: with ``max_requests=nan`` the kit sent no request, so the mcp 2.3.0
    client's P2 violation (found at once with the defaults) went unseen. Now the NaN is
    refused, and the same client with an integer bound still fails."""
    with pytest.raises(ValueError, match="max_requests=nan"):
        conformance_machine(Sdk230Client, max_requests=math.nan)
    machine = conformance_machine(Sdk230Client, max_requests=6)
    with pytest.raises(ConformanceFailure):
        quick = settings(kit_settings(), phases=[Phase.generate], database=None)
        run_state_machine_as_test(machine, settings=quick)
