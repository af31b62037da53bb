"""A large message read by its envelope is judged as its full decode is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.adapters._transport import envelope
from fsm.messages import parse

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x", "\\u0069d"])
ENVELOPE_VALUES = st.one_of(
    VALUES, st.just("2.0"), st.just("elicitation/create"), st.just({"message": "Delete?"})
)


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """JSON text of an object with JSON-RPC's keys (repeated, escaped, missing), or of
    something else, or not JSON at all."""
    members = draw(st.lists(st.tuples(KEYS, ENVELOPE_VALUES), max_size=6))
    text = "{" + ",".join(f'"{k}":{json.dumps(v)}' for k, v in members) + "}"
    text = draw(st.sampled_from([text, text[:-1], "[" + text + "]", text + " ", " " + text]))
    return text.encode()


def _judged(data: bytes) -> Any:
    try:
        return parse(envelope.decode(data))
    except (ValueError, RecursionError):
        return "refused"


def _full(data: bytes) -> Any:
    try:
        return parse(json.loads(data))
    except (ValueError, RecursionError):
        return "refused"


@settings(max_examples=500)
@given(messages())
def test_the_envelope_is_judged_as_the_full_decode(data: bytes) -> None:
    assert _judged(data) == _full(data)


@given(messages())
def test_without_msgspec_every_message_is_decoded_in_full(data: bytes) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(envelope, "_decoder", None)
        assert _judged(data) == _full(data)
        try:
            want = json.loads(data)
        except ValueError:
            return
        assert envelope.decode(data) == want


def test_a_large_response_is_checked_but_its_payload_not_built() -> None:
    payload = {"content": [{"type": "text", "text": "x" * 1_000_000}]}
    data = json.dumps({"jsonrpc": "2.0", "id": 7, "result": payload}).encode()
    assert envelope.decode(data) == {"jsonrpc": "2.0", "id": 7, "result": envelope.ELIDED}
    with pytest.raises(ValueError):  # still checked to be JSON, to its last byte
        envelope.decode(data[:-3] + b"\x01" + data[-2:])
    request = {"jsonrpc": "2.0", "id": 8, "method": "elicitation/create", "params": payload}
    assert envelope.decode(json.dumps(request).encode()) == request  # a question: in full
