"""An application that stops following a stream (``StreamAbandoned``): the stream ends
``dead`` with one typed error, its requests die with it, and an ended stream ignores it.
The SSE parser's event bound and its reading of invalid UTF-8."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm import EventTooLargeError, Guard, StreamAbandonedError
from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport.sse import EventTooLarge, SseParser

PIECES = [
    b"id: 1\r\ndata: a\r\n\r\n",
    b"data: b\n\n",
    b"id: 3\rdata: c\r\r",
    b"data: \xc3\xa9\n\n",
    b":comment\n\n",
    b"data: x\n\r\n",
    b"retry: 5\n\n",
    b"data: \xff\n\n",
]

ELICIT = {
    "jsonrpc": "2.0",
    "id": 5,
    "method": "elicitation/create",
    "params": {"message": "Delete 3 files?", "requestedSchema": {"type": "object"}},
}


def _guard_with_prompt() -> Guard:
    g = Guard(clock=lambda: 0.0)
    g.feed(ev.SessionStarted("s"))
    g.feed(ev.StreamOpened("post:1", 1))
    (present,) = g.feed(ev.SseEvent("post:1", ELICIT, "e1"))
    assert isinstance(present, act.Present)
    return g


@pytest.mark.parametrize(
    ("reason", "error"),
    [("abandoned", StreamAbandonedError), ("event-too-large", EventTooLargeError)],
)
def test_an_abandoned_stream_fails_once_and_withdraws_its_prompt(
    reason: str, error: type[Exception]
) -> None:
    g = _guard_with_prompt()
    actions = g.feed(ev.StreamAbandoned("post:1", reason, "the reader left"))
    fails = [a for a in actions if isinstance(a, act.Fail)]
    assert len(fails) == 1 and type(fails[0].error) is error
    assert fails[0].error.reason == reason and "the reader left" in str(fails[0].error)
    assert act.Withdraw(("s", 5), reason) in actions
    assert g.stream_state("post:1") == "dead" and g.state_of(("s", 5)) == "dead"
    again = g.feed(ev.StreamAbandoned("post:1"))
    assert [type(a) for a in again] == [act.Ignore]  # one outcome, never a second


def test_a_stream_waiting_to_resume_can_be_abandoned() -> None:
    g = _guard_with_prompt()
    (wait,) = g.feed(ev.StreamLost("post:1", clean=False))
    assert isinstance(wait, act.Wait) and g.stream_state("post:1") == "waiting"
    actions = g.feed(ev.StreamAbandoned("post:1"))
    assert any(isinstance(a, act.Fail) for a in actions)
    assert g.stream_state("post:1") == "dead" and g.live_streams() == []


def test_live_streams_and_stream_of() -> None:
    g = _guard_with_prompt()
    g.feed(ev.StreamOpened("get"))
    assert g.live_streams() == ["post:1", "get"]
    assert g.stream_of(("s", 5)) == "post:1" and g.stream_of(("s", 6)) is None


def test_the_parser_bounds_one_event_buffered_or_whole() -> None:
    parser = SseParser(max_event=100)
    assert [e.data for e in parser.feed(b"data: " + b"x" * 50 + b"\n\n")] == ["x" * 50]
    with pytest.raises(EventTooLarge):
        SseParser(max_event=100).feed(b"data: " + b"x" * 100)  # never ends
    with pytest.raises(EventTooLarge):
        SseParser(max_event=100).feed(b"data: " + b"x" * 100 + b"\n\ndata: y\n\n")
    unbounded = SseParser()
    assert len(unbounded.feed(b"data: " + b"x" * 10_000 + b"\n\n")[0].data) == 10_000


def test_the_parser_marks_invalid_utf8_and_keeps_its_bytes() -> None:
    raw = b'id: 1\ndata: {"a": "\xff\xfe"}\n\n'
    (event,) = SseParser().feed(raw)
    assert event.event_id == "1" and not event.utf8
    assert event.raw == raw
    parser = SseParser()  # a sequence cut across two chunks is still UTF-8
    (ok,) = parser.feed("data: é".encode()[:-1]) + parser.feed("é".encode()[-1:] + b"\n\n")
    assert ok.utf8 and ok.data == "é"


@given(st.lists(st.sampled_from(PIECES), max_size=8), st.data())
def test_the_parser_gives_the_same_events_however_the_bytes_are_split(
    pieces: list[bytes], data: st.DataObject
) -> None:
    """Events do not depend on where reads cut the bytes: a CR split from its LF, a UTF-8
    sequence or an event cut in two."""
    raw = b"".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    whole = [(e.raw, e.event_id, e.data, e.utf8) for e in SseParser().feed(raw)]
    parser, got, prev = SseParser(), [], 0
    for cut in [*cuts, len(raw)]:
        got += [(e.raw, e.event_id, e.data, e.utf8) for e in parser.feed(raw[prev:cut])]
        prev = cut
    assert got == whole


def test_an_event_dripped_in_pieces_is_bounded_by_what_its_pieces_cost() -> None:
    """A byte per read, or many one-character lines: the event is refused once its held
    pieces would cost about ``max_event``, long before its text alone would reach it."""
    parser = SseParser(max_event=100_000)
    with pytest.raises(EventTooLarge):
        parser.feed(b"data: ")
        for _ in range(10_000):  # 10,000 characters of text
            parser.feed(b"x")
    with pytest.raises(EventTooLarge):
        SseParser(max_event=100_000).feed(b"data: x\n" * 10_000)  # 80,000 characters
    ok = SseParser(max_event=100_000).feed(b"data: " + b"x" * 90_000 + b"\n\n")
    assert len(ok[0].data) == 90_000  # one piece: its text is what counts


def test_an_event_just_under_the_bound_passes_however_its_reads_cut_it() -> None:
    """Reads larger than :data:`PIECE_COST` count their length: an event of 99,000 bytes
    under a bound of 100,000 passes in reads of 1 KiB as in one read."""
    wire = b"data: " + b"x" * (99_000 - 8) + b"\n\n"
    for size in (1024, 4096, len(wire)):
        parser = SseParser(max_event=100_000)
        (event,) = [e for i in range(0, len(wire), size) for e in parser.feed(wire[i : i + size])]
        assert len(event.data_bytes) == 99_000 - 8
