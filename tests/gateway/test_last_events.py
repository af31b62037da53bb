"""What the gateway keeps of a finished stream for a resume that lost its result: the
newest events passed on, whole, however many pieces a large one was passed on in."""

from __future__ import annotations

from fsm.gateway.app import _final_event, _LastEvents


def test_an_event_passed_on_in_pieces_is_kept_whole() -> None:
    last = _LastEvents(limit=1000)
    last.add(b"id: a\ndata: 1\n\n")
    for piece in (b'id: b\ndata: {"t":"', b"x" * 300, b'"}', b"\n\n"):
        last.add(piece)
    kept = last.value()
    assert kept == b'id: b\ndata: {"t":"' + b"x" * 300 + b'"}\n\n'
    assert _final_event(kept) == kept


def test_nothing_is_kept_of_an_event_over_the_limit_or_cut_off() -> None:
    last = _LastEvents(limit=100)
    last.add(b"id: a\ndata: 1\n\n")
    last.add(b"id: b\ndata: " + b"x" * 200)
    last.add(b"\n\n")
    assert last.value() is None  # over the limit: not kept, never a part of it
    last.add(b"id: c\ndata: 3\r\n\r\n")  # the next event starts afresh
    assert last.value() == b"id: c\ndata: 3\r\n\r\n"
    last.add(b"id: d\ndata: 4")  # the connection ended inside an event
    assert last.value() is None
