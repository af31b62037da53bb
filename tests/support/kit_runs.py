"""How the stateful tests run a conformance kit's machine (:mod:`fsm.testing`): every run
derandomized with no example database, so results do not depend on the machine or on
earlier runs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from fsm.testing import ConformanceFailure, kit_settings

__all__ = ["FIRST_BUG", "FIXED", "first_failure"]

FIXED = settings(kit_settings("fsm-fast"), derandomize=True, database=None)
"""The kits' fast profile, derandomized, no example database."""

FIRST_BUG = settings(
    FIXED, report_multiple_bugs=False, phases=[p for p in Phase if p is not Phase.explain]
)
"""As :data:`FIXED`, stopping at the first bug found (shrunk, not explained)."""


def first_failure(machine: Any) -> ConformanceFailure:
    """The failure a run of the kit's state ``machine`` ends with (none fails the test)."""
    with pytest.raises(ConformanceFailure) as info:
        run_state_machine_as_test(machine, settings=FIRST_BUG)
    return info.value
