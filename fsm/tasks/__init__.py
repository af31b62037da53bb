"""The tasks era (the ``io.modelcontextprotocol/tasks`` extension of protocol 2026-07-28):
a task polled with ``tasks/get`` whose input requests the server may supersede, fail or
purge, and the decider that keeps a person from being asked twice.

* :mod:`~fsm.tasks.task`: :class:`~fsm.tasks.task.TaskCall`, its events, actions, policy and
  snapshot.
* :mod:`~fsm.tasks.outcomes`: how a failed ``tasks/get`` or ``tasks/update`` is classified.
"""

from fsm.questions import INPUT_METHODS
from fsm.tasks.task import (
    STATUSES,
    KeyRecord,
    Poll,
    Polled,
    PollFailed,
    QuestionRecord,
    TaskAction,
    TaskCall,
    TaskCancelled,
    TaskConfig,
    TaskCreated,
    TaskEvent,
    TaskResumed,
    TaskSnapshot,
    Tick,
    Update,
    UpdateAcked,
    UpdateFailed,
)

__all__ = [
    "INPUT_METHODS",
    "STATUSES",
    "KeyRecord",
    "Poll",
    "PollFailed",
    "Polled",
    "QuestionRecord",
    "TaskAction",
    "TaskCall",
    "TaskCancelled",
    "TaskConfig",
    "TaskCreated",
    "TaskEvent",
    "TaskResumed",
    "TaskSnapshot",
    "Tick",
    "Update",
    "UpdateAcked",
    "UpdateFailed",
]
