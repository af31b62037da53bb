"""A task whose client crashes, with its durable store (``models/guarded_tasks_durable.py``):
the task rules made durable hold P1-P7 and L1 with one crash, alone and with each fault;
the same rules without a store (``guarded-tasks[answers,crash]``) violate P2."""

from __future__ import annotations

import pytest
from shipped import Shipped, pin_tests

SHIPPED = Shipped(("guarded_tasks_durable.py",))
WITHOUT = Shipped(("guarded_tasks.py",))

PINNED: dict[str, tuple[int, int]] = {
    "guarded-tasks-durable[answers,crash]": (159, 223),
    "guarded-tasks-durable[answers,supersede,crash]": (686, 969),
    "guarded-tasks-durable[answers,reask,crash]": (492, 691),
    "guarded-tasks-durable[answers,fail,crash]": (297, 429),
    "guarded-tasks-durable[answers,purge,crash]": (318, 421),
    "guarded-tasks-durable[answers,drop,crash]": (246, 363),
    "guarded-tasks-durable[answers,lost,crash]": (367, 535),
    "guarded-tasks-durable[answers,ttl,crash]": (259, 411),
}


test_every_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_task_rules_with_their_store_satisfy_every_property(name: str) -> None:
    _, report = SHIPPED.report(name)
    report.assert_properties()
    assert report.result("presented").path is not None


def test_the_same_world_without_the_store_asks_again() -> None:
    """The must-fail twin: the same crash, the rules restarted with the task id alone."""
    _, report = WITHOUT.report("guarded-tasks[answers,crash]")
    path = report.assert_violated("P2")
    assert "client crashes" in [str(s.action) for s in path.steps]
