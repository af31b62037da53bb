"""The SSE guard's exact outputs (``fsm/sse/guard.py``), pinned where ``make mutate`` found
them unpinned: an abandoned stream's failure and the abandonment of one already ended,
and a renaming that renames a failure's key everywhere it is named."""

from __future__ import annotations

from fsm import events as ev
from fsm.actions import Fail, Ignore
from fsm.errors import StaleRequestError, StreamAbandonedError
from fsm.machines.product import Cause
from fsm.sse.guard import Guard, KeyRenaming


def test_an_abandoned_stream_fails_once_then_is_ignored_by_name() -> None:
    guard = Guard(clock=lambda: 0.0)
    guard.feed(ev.SessionStarted("s"))
    guard.feed(ev.StreamOpened("get"))
    (fail,) = guard.feed(ev.StreamAbandoned("get"))
    assert isinstance(fail, Fail) and isinstance(fail.error, StreamAbandonedError)
    assert str(fail.error) == "get abandoned (the application stopped following it)"
    assert fail.error.evidence == ("the application stopped following it",)
    assert guard.feed(ev.StreamAbandoned("get", detail="again")) == (
        Ignore("stream-terminal", "get is dead", stream="get"),
    )


def test_a_renaming_renames_a_causes_key_message_and_evidence() -> None:
    renaming = KeyRenaming({("s", 1): ("s", 2)})
    cause = Cause(StaleRequestError, "('s', 1) is stale", ("s", 1), ("key ('s', 1)", "t=3"))
    assert renaming.cause(cause) == Cause(
        StaleRequestError, "('s', 2) is stale", ("s", 2), ("key ('s', 2)", "t=3")
    )
    unkeyed = Cause(StaleRequestError, "the stream died", None, ())
    assert renaming.cause(unkeyed) == unkeyed
    assert renaming.cause(None) is None
