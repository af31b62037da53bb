"""The SSE parser against a plain reading of the event-stream rules, however the bytes
are cut, and the pieces a large event is handed on in."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.adapters._transport.sse import SseParser

Event = tuple[bytes, str | None, bytes, int | None, str | None, bool]
"""raw, id, data, retry, event type, UTF-8."""


def reference(stream: bytes) -> list[Event]:
    """The events of a whole stream, read the obvious way (WHATWG event-stream rules,
    with this parser's two documented choices: comment-only events are dropped, bytes
    that are not UTF-8 are kept and mark their event)."""
    text = stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    out: list[Event] = []
    lines: list[bytes] = []
    for line in text.split(b"\n")[:-1]:  # what follows the last line end is pending
        if line:
            lines.append(line)
            continue
        if not lines:
            continue
        fields = [ln for ln in lines if not ln.startswith(b":")]
        raw = b"\n".join(lines) + b"\n\n"
        lines = []
        if not fields:
            continue
        data: list[bytes] = []
        event_id = kind = None
        retry = None
        for f in fields:
            name, colon, value = f.partition(b":")
            value = value[1:] if colon and value.startswith(b" ") else value
            if name == b"data":
                data.append(value)
            elif name == b"id" and b"\0" not in value:
                event_id = value.decode("utf-8", "surrogateescape")
            elif name == b"retry" and re.fullmatch(rb"[0-9]+", value):
                retry = int(value)
            elif name == b"event":
                kind = value.decode("utf-8", "surrogateescape")
        try:
            raw.decode()
            utf8 = True
        except UnicodeDecodeError:
            utf8 = False
        out.append((raw, event_id, b"\n".join(data), retry, kind, utf8))
    return out


LINES = st.one_of(
    st.sampled_from(
        [
            b"id: 1",
            b"id:2",
            b"id: a\0b",
            b"data: a",
            b"data:b",
            b"data",
            b"data: ",
            b"retry: 50",
            b"retry: x",
            b"event: message",
            b": comment",
            b"other: 1",
            b"data: \xc3\xa9",
            b"data: \xff",
            b"data: \xe2\x82",
            b"",
        ]
    ),
    st.binary(max_size=12).map(lambda b: b"data: " + b.replace(b"\n", b"").replace(b"\r", b"")),
    st.integers(0, 300).map(lambda n: b"data: " + b"x" * n),
)
ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.tuples(LINES, ENDS), max_size=12))
    return b"".join(line + end for line, end in parts)


def _events(frames: list) -> list[Event]:  # type: ignore[type-arg]
    return [(f.raw, f.event_id, f.data_bytes, f.retry, f.event, f.utf8) for f in frames]


@settings(max_examples=400)
@given(streams(), st.data())
def test_the_parser_reads_what_the_rules_say_however_the_bytes_are_cut(
    stream: bytes, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    parser, got, prev = SseParser(), [], 0
    for cut in [*cuts, len(stream)]:
        got += parser.feed(stream[prev:cut])
        prev = cut
    # a CR at the very end waits for the next read: end the stream as a reader would
    got += parser.feed(b"\n") if stream.endswith(b"\r") else []
    want = reference(stream + (b"\n" if stream.endswith(b"\r") else b""))
    assert _events(got) == want
    for frame in got:
        assert frame.size == len(frame.raw)
        assert frame.data == frame.data_bytes.decode("utf-8", "surrogateescape")


def test_a_large_event_is_handed_on_in_the_pieces_it_came_in() -> None:
    """An event read in many pieces is passed on as those pieces: the bytes of each read
    are kept, not copied into one (only the message's data is joined, once)."""
    head = b'id: e1\nevent: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"t":"'
    body = b"x" * 300_000
    wire = head + body + b'"}}\n\n'
    reads = [wire[i : i + 65536] for i in range(0, len(wire), 65536)]
    parser = SseParser()
    frames = [f for r in reads for f in parser.feed(r)]
    (frame,) = frames
    assert frame.raw == wire and frame.event_id == "e1" and frame.event == "message"
    assert frame.data_bytes == wire[len(b"id: e1\nevent: message\ndata: ") : -2]
    assert len(frame.parts) >= len(reads)
    middle = {id(r) for r in reads[1:-1]}
    assert middle <= {id(p) for p in frame.parts}  # the middle reads themselves, no copies
