"""The gateway's event ids: signed, bound to their session, read back only as issued;
keys from the environment or a file, rotated without breaking ids in flight."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm.adapters._transport.sse import MAX_EVENT_ID, usable_event_id
from fsm.gateway.ids import (
    ENV_KEY,
    ENV_PREVIOUS_KEY,
    EventIdKeys,
    GatewayEventId,
    IdRewriter,
    parse_event_id,
)

KEYS = EventIdKeys(b"k" * 32)
OTHER = EventIdKeys(b"o" * 32)


def issued(stream: str, upstream: bytes, session: str = "s1", keys: EventIdKeys = KEYS) -> str:
    piece = IdRewriter(stream, session, keys).rewrite(b"id: " + upstream + b"\ndata: {}\n\n")
    return piece.split(b"\n")[0][4:].decode("utf-8", "replace")


@pytest.mark.parametrize(
    "upstream", ["e1", "a.b.c", "0_5 with spaces", "9" * 40, "x" * MAX_EVENT_ID, "x.", "~!"]
)
@pytest.mark.parametrize("stream", ["post:7", 'post:"x.y"', "get", "get/3"])
def test_an_issued_id_reads_back_in_its_session(stream: str, upstream: str) -> None:
    value = issued(stream, upstream.encode())
    assert parse_event_id(value, "s1", KEYS) == GatewayEventId(stream, 1, upstream)


def signed(tag: str, stream: str, position: str, upstream: str) -> str:
    """The id the gateway would issue in session s1 under KEYS, built by hand."""
    fields = [b"s1", stream.encode(), position.encode(), upstream.encode()]
    message = b"".join(b"%d:%s" % (len(f), f) for f in fields)
    mac = hmac.new(KEYS.current, message, hashlib.sha256).digest()[:16]
    return f"{tag}.{position}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}.{upstream}"


def test_the_format_is_tag_position_mac_upstream_id() -> None:
    # pinned: replicas of one deployment (a rolling upgrade) must issue the same ids
    value = issued("post:7", b"e1.x")
    assert value == signed("cG9zdDo3", "post:7", "1", "e1.x")
    assert len(value.split(".")[2]) == 22


def test_a_position_is_signed_as_it_is_written_out() -> None:
    ids = IdRewriter("get/2", "s1", KEYS, position=1_234_567_889, last="z")
    value = ids.rewrite(b"id: e9\r\ndata: {}\r\n\r\n").split(b"\r\n")[0][4:].decode()
    assert value.split(".")[1] == "1234567890"
    assert parse_event_id(value, "s1", KEYS) == GatewayEventId("get/2", 1_234_567_890, "e9")
    assert ids.rewrite(b"data: {}\n\n") == b"data: {}\n\n"  # no id: nothing signed
    assert ids.position == 1_234_567_890


def test_a_piece_that_continues_a_line_has_no_id_line_at_its_start() -> None:
    """A large event is passed on in the pieces it was read in: a piece that starts in
    the middle of a data line (``..."grid: 3"...`` cut before ``id:``) is data, not an
    event id to sign."""
    ids = IdRewriter("post:1", "s1", KEYS)
    head = ids.rewrite(b'id: e1\ndata: {"text":"gr')
    middle = b'id: 3 and more"}'
    assert ids.rewrite(middle, line_start=False) == middle
    assert ids.position == 1
    assert ids.rewrite(b"id: e2\ndata: {}\n\n", line_start=True).startswith(b"id: cG9zdDox.2.")
    assert head.startswith(b"id: cG9zdDox.1.")


def test_positions_count_the_events_passed_on_and_carry_over() -> None:
    ids = IdRewriter("get", "s1", KEYS)
    out = ids.rewrite(b"id: a\ndata: 1\n\nid: b\ndata: 2\n\n")
    values = [line[4:].decode() for line in out.split(b"\n") if line.startswith(b"id: ")]
    assert [parse_event_id(v, "s1", KEYS) for v in values] == [
        GatewayEventId("get", 1, "a"),
        GatewayEventId("get", 2, "b"),
    ]
    assert (ids.position, ids.last) == (2, "b")
    ids.advance_to(1, "a")  # behind: ignored
    ids.advance_to(9, "z")
    assert (ids.position, ids.last) == (9, "z")


def test_another_session_a_foreign_key_and_other_formats_are_refused() -> None:
    value = issued("post:7", b"e1")
    assert parse_event_id(value, "s2", KEYS) is None
    assert parse_event_id(value, "s1", OTHER) is None
    for bad in ["", "e1", "x.1.e1", value.replace(".1.", ".01.", 1), value + "\n"]:
        assert parse_event_id(bad, "s1", KEYS) is None


def _forged(value: str, field: int, text: str) -> str:
    parts = value.split(".", 3)
    parts[field] = text
    return ".".join(parts)


@pytest.mark.parametrize(
    ("field", "text", "stream", "position", "upstream"),
    [
        (0, "Z2V0", "get", "1", "e1"),  # another stream
        (0, "cG9zdDo4", "post:8", "1", "e1"),
        (1, "2", "post:7", "2", "e1"),  # a later position
        (1, "999999999", "post:7", "999999999", "e1"),
        (3, "e2", "post:7", "1", "e2"),  # another upstream id
        (3, "e1.x", "post:7", "1", "e1.x"),
    ],
)
def test_changing_a_field_of_an_issued_id_voids_it(
    field: int, text: str, stream: str, position: str, upstream: str
) -> None:
    value = issued("post:7", b"e1")
    forged = _forged(value, field, text)
    assert parse_event_id(forged, "s1", KEYS) is None
    # the same fields with their own MAC are an id the gateway reads: only the MAC refused it
    resigned = signed(forged.split(".")[0], stream, position, upstream)
    assert parse_event_id(resigned, "s1", KEYS) == GatewayEventId(stream, int(position), upstream)


def test_a_stream_of_no_kind_the_guard_uses_is_refused_even_signed() -> None:
    for stream in ["other", "post", "", "xget"]:
        value = issued(stream, b"e1")
        assert value == signed(value.split(".")[0], stream, "1", "e1")
        assert parse_event_id(value, "s1", KEYS) is None


def test_a_mac_is_not_the_mac_of_another_id() -> None:
    value = issued("post:7", b"e1")
    others = [issued("get", b"e1"), issued("post:7", b"e2"), issued("post:7", b"e1", "s2")]
    for other in others:
        assert other.split(".")[2] != value.split(".")[2]
        assert parse_event_id(_forged(value, 2, other.split(".")[2]), "s1", KEYS) is None
    assert parse_event_id(_forged(value, 2, "A" * 22), "s1", KEYS) is None
    assert parse_event_id(_forged(value, 2, value.split(".")[2][:21]), "s1", KEYS) is None


def test_the_mac_fields_cannot_slide_into_each_other() -> None:
    # position 1 with upstream id "2x" and position 12 with "x" are different ids
    value = issued("get", b"2x")
    tag, _, mac, _ = value.split(".", 3)
    assert parse_event_id(f"{tag}.12.{mac}.x", "s1", KEYS) is None
    assert parse_event_id(f"{tag}.1.{mac}.2x", "s1", KEYS) == GatewayEventId("get", 1, "2x")


@given(
    st.sampled_from(["post:7", 'post:"a.b"', "get", "get/2"]),
    st.text(min_size=1).filter(lambda t: "\r" not in t and "\n" not in t),
)
def test_any_usable_upstream_id_reads_back_and_no_other_is_issued(
    stream: str, upstream: str
) -> None:
    ids = IdRewriter(stream, "s1", KEYS)
    before = ids.rewrite(b"id: e0\ndata: {}\n\n").split(b"\n")[0]
    line = ids.rewrite(b"id: " + upstream.encode() + b"\ndata: {}\n\n").split(b"\n")[0]
    if usable_event_id(upstream.encode()):
        got = parse_event_id(line[4:].decode(), "s1", KEYS)
        assert got == GatewayEventId(stream, 2, upstream)
    else:  # the last usable event's id again
        assert line == before and (ids.position, ids.last) == (1, "e0")


UNUSABLE_IDS = [b"a\tb", b"abc ", b" abc", b"a\x7fb", b"e\xff1", "é".encode(), b"x" * 1025]


def test_an_unusable_upstream_id_is_never_issued() -> None:
    """An upstream id no ``Last-Event-ID`` header can bring back as sent (a control
    character, a space at either end, DEL, not UTF-8, not ASCII, over MAX_EVENT_ID): its
    line stands for the last usable event's id issued again, or for nothing (a comment
    line, not an empty ``id:`` that would reset the client's id) before there is one;
    neither ``position`` nor ``last`` moves. Before, each was signed into an id of its own
    (``e\xff1`` even became ``last`` as ``e\ufffd1``, an id the gateway never reads back):
    a client resuming from it got 400."""
    ids = IdRewriter("get", "s1", KEYS)
    for bad in UNUSABLE_IDS:  # nothing usable yet: no id field at all
        piece = b"event: message\nid: " + bad + b"\ndata: {}\n\n"
        assert ids.rewrite(piece) == b"event: message\n:\ndata: {}\n\n"
        assert (ids.position, ids.last) == (0, None)
    first = ids.rewrite(b"id: e1\ndata: {}\n\n").split(b"\n")[0]
    assert parse_event_id(first[4:].decode(), "s1", KEYS) == GatewayEventId("get", 1, "e1")
    for bad in UNUSABLE_IDS:
        assert ids.rewrite(b"id: " + bad + b"\ndata: {}\r\n\r\n").split(b"\n")[0] == first
        assert (ids.position, ids.last) == (1, "e1")
    assert ids.rewrite(b"id: \ndata: {}\n\n") == b"id: \ndata: {}\n\n"  # a reset: as sent
    line = ids.rewrite(b"id: e2\ndata: {}\n\n").split(b"\n")[0]
    assert parse_event_id(line[4:].decode(), "s1", KEYS) == GatewayEventId("get", 2, "e2")
    assert (ids.position, ids.last) == (2, "e2")


def test_an_unusable_id_after_a_resume_reissues_the_id_resumed_from() -> None:
    """A rewriter advanced to the client's (or the store's) cursor issues that cursor's
    id again for an unusable upstream id; a cursor no id could carry is not issued."""
    ids = IdRewriter("post:7", "s1", KEYS)
    ids.advance_to(4, "e4")
    line = ids.rewrite(b"id: a\tb\n\n").split(b"\n")[0]
    assert parse_event_id(line[4:].decode(), "s1", KEYS) == GatewayEventId("post:7", 4, "e4")
    for last in ["e\ufffd1", "e\udc801", "x" * 1025]:
        stale = IdRewriter("post:7", "s1", KEYS, position=5, last=last)
        assert stale.rewrite(b"id: a\tb\n\n") == b":\n\n"


@given(st.data())
def test_any_change_to_an_issued_id_is_refused_or_reads_the_same(data: st.DataObject) -> None:
    value = issued("post:7", b"e1.x")
    at = data.draw(st.integers(0, len(value) - 1))
    char = data.draw(st.one_of(st.characters(codec="ascii"), st.characters()))
    changed = value[:at] + char + value[at + 1 :]
    got = parse_event_id(changed, "s1", KEYS)
    if changed != value:
        assert got is None
    assert parse_event_id(value, "s1", KEYS) == GatewayEventId("post:7", 1, "e1.x")


@given(st.text(st.characters(), max_size=60))
def test_no_text_raises(value: str) -> None:
    assert parse_event_id(value, "s1", KEYS) is None


def test_a_lone_surrogate_anywhere_is_refused() -> None:
    value = issued("get", b"e1")
    tag, position, mac, upstream = value.split(".", 3)
    for bad in [
        f"{tag}.{position}.{mac}.{upstream}\udc80",
        f"{tag}.{position}.{mac[:21]}\udc80.{upstream}",
        f"{tag}\udc80.{position}.{mac}.{upstream}",
        f"{tag}.{position}\udc80.{mac}.{upstream}",
    ]:
        assert parse_event_id(bad, "s1", KEYS) is None
    assert parse_event_id(value, "s1\udc80", KEYS) is None


def test_a_rotation_accepts_the_previous_key_until_it_is_dropped() -> None:
    old = issued("get", b"e1", keys=KEYS)
    rotated = EventIdKeys(b"n" * 32, (KEYS.current,))
    assert parse_event_id(old, "s1", rotated) == GatewayEventId("get", 1, "e1")
    new = issued("get", b"e2", keys=rotated)
    assert parse_event_id(new, "s1", EventIdKeys(b"n" * 32)) is not None  # signed by current
    assert parse_event_id(new, "s1", KEYS) is None
    assert parse_event_id(old, "s1", EventIdKeys(b"n" * 32)) is None  # dropped


def test_keys_from_the_environment() -> None:
    assert EventIdKeys.from_env({}) is None
    assert EventIdKeys.from_env({"FSM_GATEWAY_ID": "a" * 32}) is None
    keys = EventIdKeys.from_env({ENV_KEY: " " + "a" * 32 + "\n", ENV_PREVIOUS_KEY: "b" * 32})
    assert keys == EventIdKeys(b"a" * 32, (b"b" * 32,))
    assert EventIdKeys.from_env({ENV_KEY: "ключ" * 8}) == EventIdKeys("ключ".encode() * 8)
    assert "aaaa" not in repr(keys) and "bbbb" not in repr(keys)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({ENV_KEY: "short-secret"}, ENV_KEY),
        ({ENV_KEY: "short-secret" + " " * 40}, ENV_KEY),  # stripped
        ({ENV_KEY: "a" * 32, ENV_PREVIOUS_KEY: "short-secret"}, ENV_PREVIOUS_KEY),
    ],
)
def test_a_short_key_in_the_environment_is_refused_unshown(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes") as caught:
        EventIdKeys.from_env(env)
    assert named in str(caught.value)
    assert "short-secret" not in str(caught.value) and "aaaa" not in str(caught.value)


def test_keys_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("\n" + "a" * 32 + "\n\n" + "b" * 32 + "\n")
    assert EventIdKeys.from_file(path) == EventIdKeys(b"a" * 32, (b"b" * 32,))
    path.write_bytes(b"  " + b"a" * 32 + b"  \r\n")
    assert EventIdKeys.from_file(str(path)) == EventIdKeys(b"a" * 32)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n \n",
        "a" * 32 + "\n" + "b" * 32 + "\n" + "c" * 32,  # three keys
        "short-secret",
        "a" * 32 + "\nshort-secret\n",
    ],
)
def test_a_key_file_without_one_or_two_keys_is_refused_unshown(tmp_path: Path, text: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ValueError, match="event-id key file") as caught:
        EventIdKeys.from_file(path)
    message = str(caught.value)
    assert str(path) in message
    assert "short-secret" not in message and "aaaa" not in message and "cccc" not in message


def test_a_key_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    undecodable = tmp_path / "latin1"
    undecodable.write_bytes(b"\xff" * 40)
    for path in [tmp_path / "missing", tmp_path, undecodable]:
        with pytest.raises(ValueError, match="cannot read") as caught:
            EventIdKeys.from_file(path)
        assert str(path) in str(caught.value)


def test_no_key_is_shown() -> None:
    keys = EventIdKeys(b"secret-" * 6, (b"older-" * 6,))
    assert "secret" not in repr(keys) and "older" not in repr(keys)
    assert "secret" not in str(keys) and "older" not in str(keys)
    generated = EventIdKeys.generate()
    assert len(generated.current) == 32 and generated.previous == ()
    assert generated.current.hex() not in repr(generated)
    assert str(generated.current) not in repr(generated)
    assert generated != EventIdKeys.generate()
    with pytest.raises(ValueError, match="at least 32 bytes") as caught:
        EventIdKeys(b"short-secret")
    assert "short-secret" not in str(caught.value)
    with pytest.raises(ValueError, match="at least 32 bytes") as caught:
        EventIdKeys(b"a" * 32, (b"short-secret",))
    assert "short-secret" not in str(caught.value)


def test_a_previous_key_without_a_current_one_is_refused() -> None:
    with pytest.raises(ValueError, match="is set but"):
        EventIdKeys.from_env({ENV_PREVIOUS_KEY: "b" * 32})


@given(st.lists(st.sampled_from([b"id:", b"id: ", b"\n", b"\r", b"x", b"data: ", b"\r\n"])))
def test_rewrite_finds_the_id_lines_the_line_pattern_matches(parts: list[bytes]) -> None:
    """``rewrite`` looks for ``id:`` lines with ``bytes.find`` (fast on a large event);
    it rewrites exactly the lines ``_ID_LINE`` matches, in order."""
    from fsm.gateway.ids import _ID_LINE

    piece = b"".join(parts)
    found, expected = IdRewriter("get", "s1", KEYS), IdRewriter("get", "s1", KEYS)
    assert found.rewrite(piece) == _ID_LINE.sub(expected._one, piece)
    assert found.position == expected.position
