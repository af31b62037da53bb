"""Unit checks of harness parts that need mcp but no network: the event stores."""

from __future__ import annotations

import pytest
from mcp.server.streamable_http import EventMessage
from mcp.types.jsonrpc import JSONRPCNotification

from fsm.wire.server import SessionScopedEventStore, SharedEventStore

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def _note(tag: str) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"tag": tag})


async def _replay(store: object, cursor: str) -> tuple[str | None, list[str]]:
    seen: list[str] = []

    async def send(ev: EventMessage) -> None:
        assert isinstance(ev.message, JSONRPCNotification) and ev.message.params is not None
        seen.append(str(ev.message.params["tag"]))

    stream = await store.replay_events_after(cursor, send)  # type: ignore[attr-defined]
    return stream, seen


async def test_scoped_store_never_replays_other_sessions() -> None:
    store = SessionScopedEventStore()
    a, b = store.for_session("A"), store.for_session("B")
    prime_a = await a.store_event("2", None)
    await b.store_event("2", None)
    await a.store_event("2", _note("a1"))
    await b.store_event("2", _note("b1"))
    await a.store_event("_GET_stream", _note("a-get"))
    assert await _replay(a, prime_a) == ("2", ["a1"])
    # a cursor of session A is unknown to session B
    assert await _replay(b, prime_a) == (None, [])


async def test_shared_store_leaks_across_sessions_like_the_sdk_example() -> None:
    store = SharedEventStore()
    prime_a = await store.store_event("2", None)  # session A's tools/call, id 2
    await store.store_event("2", _note("a1"))
    await store.store_event("2", _note("b1"))  # session B's tools/call, also id 2
    assert await _replay(store, prime_a) == ("2", ["a1", "b1"])


async def test_stores_are_bounded() -> None:
    store = SessionScopedEventStore(capacity_per_session=3)
    view = store.for_session("A")
    first = await view.store_event("1", None)
    for i in range(5):
        await view.store_event("1", _note(str(i)))
    assert await _replay(view, first) == (None, [])  # evicted cursor: unknown
