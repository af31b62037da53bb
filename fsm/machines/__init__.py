"""The machines: each state machine declared once (:mod:`~fsm.machines.spec`), run by
either engine (:mod:`~fsm.machines.tables`, :mod:`~fsm.machines.runtime`), and composed
into products by declared rows that one runtime applies (:mod:`~fsm.machines.product`).

* :mod:`~fsm.machines.resumption`: transport resumption per stream and session liveness
  per server request (the SSE era), and their product.
* :mod:`~fsm.machines.rounds`: the rounds of a 2026 call (the MRTR era), and its product.
* :mod:`~fsm.machines.tasks`: a task's lifecycle and its input request keys (the tasks
  era), and their product.

Nothing here decides: the eras' deciders (:mod:`fsm.sse`, :mod:`fsm.mrtr`, :mod:`fsm.tasks`)
do, and only :class:`~fsm.machines.product.ProductRun` changes a machine's state.
"""

from fsm.machines.resumption import (
    LIVENESS,
    LIVENESS_DEAD,
    LIVENESS_LIVE,
    PRODUCT,
    TRANSPORT,
    TRANSPORT_LIVE,
)
from fsm.machines.rounds import MRTR_PRODUCT, ROUNDS, ROUNDS_LIVE
from fsm.machines.tasks import TASK, TASK_INPUT, TASK_INPUT_LIVE, TASK_LIVE, TASKS_PRODUCT

__all__ = [
    "LIVENESS",
    "LIVENESS_DEAD",
    "LIVENESS_LIVE",
    "MRTR_PRODUCT",
    "PRODUCT",
    "ROUNDS",
    "ROUNDS_LIVE",
    "TASK",
    "TASKS_PRODUCT",
    "TASK_INPUT",
    "TASK_INPUT_LIVE",
    "TASK_LIVE",
    "TRANSPORT",
    "TRANSPORT_LIVE",
]
