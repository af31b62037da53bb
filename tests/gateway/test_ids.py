"""The gateway's event ids: signed, bound to their session, read back only as issued;
keys from the environment or a file, rotated without breaking ids in flight."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


@pytest.mark.parametrize("upstream", ["e1", "a.b.c", "0_5 with spaces", "9" * 40])
@pytest.mark.parametrize("stream", ["post:7", 'post:"x.y"', "get", "get/3"])
def test_an_issued_id_reads_back_in_its_session(stream: str, upstream: str) -> None:
    value = issued(stream, upstream.encode())
    assert parse_event_id(value, "s1", KEYS) == GatewayEventId(stream, 1, upstream)


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


@given(st.data())
def test_any_change_to_an_issued_id_is_refused_or_reads_the_same(data: st.DataObject) -> None:
    value = issued("post:7", b"e1.x")
    at = data.draw(st.integers(0, len(value) - 1))
    char = data.draw(st.characters(codec="ascii"))
    changed = value[:at] + char + value[at + 1 :]
    got = parse_event_id(changed, "s1", KEYS)
    assert got is None or got == parse_event_id(value, "s1", KEYS)


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
    keys = EventIdKeys.from_env({ENV_KEY: " " + "a" * 32 + "\n", ENV_PREVIOUS_KEY: "b" * 32})
    assert keys == EventIdKeys(b"a" * 32, (b"b" * 32,))
    with pytest.raises(ValueError, match="at least 32 bytes") as caught:
        EventIdKeys.from_env({ENV_KEY: "short-secret"})
    assert "short-secret" not in str(caught.value)


def test_keys_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("\n" + "a" * 32 + "\n\n" + "b" * 32 + "\n")
    assert EventIdKeys.from_file(path) == EventIdKeys(b"a" * 32, (b"b" * 32,))
    for text in ["", "\n\n", "a" * 32 + "\n" + "b" * 32 + "\n" + "c" * 32, "short-secret"]:
        path.write_text(text)
        with pytest.raises(ValueError, match="event-id key file") as caught:
            EventIdKeys.from_file(path)
        assert "short-secret" not in str(caught.value)
    with pytest.raises(ValueError, match="cannot read"):
        EventIdKeys.from_file(tmp_path / "missing")


def test_no_key_is_shown() -> None:
    keys = EventIdKeys(b"secret-" * 6, (b"older-" * 6,))
    assert "secret" not in repr(keys) and "older" not in repr(keys)
    assert EventIdKeys.generate() != EventIdKeys.generate()
    with pytest.raises(ValueError):
        EventIdKeys(b"short")
