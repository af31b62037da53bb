"""A task whose client crashes, with its durable store (``models/guarded_tasks_durable.py``):
the task rules made durable hold P1-P7 and L1 with one crash, alone and with each fault
(pins and verdicts: ``pins.py``); the same rules without a store
(``guarded-tasks[answers,crash]``) violate P2."""

from __future__ import annotations

import pins


def test_the_same_world_without_the_store_asks_again() -> None:
    """The must-fail twin: the same crash, the rules restarted with the task id alone."""
    assert "client crashes" in pins.counterexample("guarded-tasks[answers,crash]", "P2").names
