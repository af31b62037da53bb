"""The SSE era (protocol 2025-03-26 to 2025-11-25): resumable streams replayed with
``Last-Event-ID``, and the guard that decides, event by event, what a client does.

* :mod:`~fsm.sse.guard`: :class:`~fsm.sse.guard.Guard` and its policy,
  :class:`~fsm.sse.guard.GuardConfig`; its snapshot records.
* :mod:`~fsm.sse.history`: what a stream remembers of the event ids it carried.
* :mod:`~fsm.sse.observe`: a guard's inputs and decisions as P1-P7 observations.
"""

from fsm.sse.guard import Guard, GuardConfig
from fsm.sse.history import EventHistory
from fsm.sse.observe import ObservedGuard

__all__ = ["EventHistory", "Guard", "GuardConfig", "ObservedGuard"]
