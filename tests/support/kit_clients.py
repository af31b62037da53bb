"""Clients with one planted bug each, for measuring the conformance kit (and a correct one).

Each is the library's :class:`~fsm.sse.guard.Guard` behind the kit's client seam
(``factory(clock) -> client`` with ``feed(event) -> actions``), changed in exactly one
place, so the kit can find one property violated and nothing else:

* :class:`BatchBlindClient` (P1): de-duplicates, but reads a replay batch event by event:
  a request whose ``notifications/cancelled`` comes later in the same batch is presented,
  then withdrawn. A batch is judged as a whole (docs/testing.md), so that presentation is
  of a request the client was already told is dead.
* :class:`RetriesNotFoundClient` (P3): classifies an answer POST's HTTP 500 carrying
  JSON-RPC "Request not found" as retryable (a server error) instead of terminal, so it
  keeps the request's stream resumable and resumes it after the next cut.
* :class:`CursorRewindClient` (P7): on a duplicate delivery (an event id the stream
  already carried) moves its resume cursor back to that id; its next resume of the
  stream uses it, older than the newest id seen.
* :func:`correct_client`: the guard itself, unchanged.

:data:`BUGGY` maps each to the property the kit must report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fsm import actions as act
from fsm import events as ev
from fsm.outcomes import Classifier, OutcomeClass, Rule
from fsm.sse.guard import Guard, GuardConfig
from fsm.testing.kit import ClientFactory

Clock = Callable[[], float]


class BatchBlindClient:
    """The guard fed a :class:`~fsm.events.ReplayBatch` one event at a time (each marked
    replayed), so it never sees a cancellation that follows a request in the batch."""

    def __init__(self, clock: Clock) -> None:
        self.guard = Guard(clock=clock)

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """``guard.feed(event)``; a batch's events are fed in turn, their actions joined."""
        if isinstance(event, ev.ReplayBatch):
            return [
                a
                for item in event.events
                for a in self.guard.feed(
                    ev.SseEvent(item.stream, item.data, item.event_id, item.retry_ms, True)
                )
            ]
        return self.guard.feed(event)


NOT_FOUND_IS_RETRYABLE = Rule(
    "500-is-retryable",
    lambda r: r.status == 500,
    OutcomeClass.RETRYABLE,
    doc="any HTTP 500 is a server error, whatever its JSON-RPC body says (the bug)",
)


class RetriesNotFoundClient:
    """The guard with one classifier row in front: every HTTP 500 is retryable, the
    terminal "Request not found" included."""

    def __init__(self, clock: Clock) -> None:
        config = GuardConfig(classifier=Classifier().with_rules(NOT_FOUND_IS_RETRYABLE))
        self.guard = Guard(clock=clock, config=config)

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """``guard.feed(event)``."""
        return self.guard.feed(event)


class CursorRewindClient:
    """The guard whose resumes carry a cursor of this wrapper's own: the newest event id
    seen on the stream, moved back to a duplicate's id when a duplicate arrives."""

    def __init__(self, clock: Clock) -> None:
        self.guard = Guard(clock=clock)
        self.seen: dict[str, set[str]] = {}
        self.cursor: dict[str, str] = {}

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """``guard.feed(event)`` with each ``Resume``'s cursor replaced by this one's."""
        items: Sequence[ev.SseEvent] = ()
        if isinstance(event, ev.ReplayBatch):
            items = event.events
        elif isinstance(event, ev.SseEvent):
            items = (event,)
        for item in items:
            if item.event_id is not None:
                seen = self.seen.setdefault(item.stream, set())
                if item.event_id in seen and item.data not in (None, "", b""):
                    self.cursor[item.stream] = item.event_id  # the bug: back to the duplicate
                elif item.event_id not in seen:
                    seen.add(item.event_id)
                    self.cursor[item.stream] = item.event_id
        return [
            act.Resume(a.stream, self.cursor.get(a.stream, a.cursor))
            if isinstance(a, act.Resume)
            else a
            for a in self.guard.feed(event)
        ]


def correct_client(clock: Clock) -> Guard:
    """The library's guard, unchanged: it must pass."""
    return Guard(clock=clock)


BUGGY: dict[str, tuple[ClientFactory, str]] = {
    "batch-blind": (BatchBlindClient, "P1"),
    "not-found-retried": (RetriesNotFoundClient, "P3"),
    "cursor-rewind": (CursorRewindClient, "P7"),
}
"""Name -> (factory, the property the kit must report against it)."""
