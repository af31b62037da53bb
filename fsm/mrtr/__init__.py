"""The MRTR era (protocol 2026-07-28): a call's input rounds, whose state the server may
let expire, and the decider that keeps a person from being asked twice.

* :mod:`~fsm.mrtr.call`: :class:`~fsm.mrtr.call.MrtrCall`, its events, actions and policy.
* :mod:`~fsm.mrtr.outcomes`: how a round's failure is classified.
"""

from fsm.mrtr.call import (
    CallCancelled,
    CallSnapshot,
    MrtrAction,
    MrtrCall,
    MrtrConfig,
    MrtrEvent,
    QuestionRecord,
    Retry,
    RoundFailed,
    RoundResult,
    Tick,
)
from fsm.questions import INPUT_METHODS, question_id

__all__ = [
    "INPUT_METHODS",
    "CallCancelled",
    "CallSnapshot",
    "MrtrAction",
    "MrtrCall",
    "MrtrConfig",
    "MrtrEvent",
    "QuestionRecord",
    "Retry",
    "RoundFailed",
    "RoundResult",
    "Tick",
    "question_id",
]
