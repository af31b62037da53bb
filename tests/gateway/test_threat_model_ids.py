"""What a client sends through the gateway sets no state of a session the upstream did not
accept it for, and what the gateway keeps and writes per event does not grow with a
request id's length.

| attacker | what they try | what they would get | what the gateway does | test |
|---|---|---|---|---|
| B, no token, A's session id | a `ping` with `MCP-Protocol-Version: 1999-01-01` (refused `401`) | every request the gateway makes for A carries the bogus version: A's resume is refused | the version is the session's only once the upstream accepted a request carrying it | `test_a_refused_request_does_not_change_the_sessions_protocol_version` |
| B, A's session id | an `initialize` in A's session, answered with a new `Mcp-Session-Id` | the gateway's requests for A go to the new session | an established session's id is never replaced | `test_an_established_session_id_is_never_replaced` |
| a client | a call whose request id is long | each event id carries the id's base64: megabytes written per event, held per stream | a call whose id is longer than the gateway tracks (its JSON text over 256 characters) goes untracked, its events with the upstream's ids (`test_long_request_ids.py`); a tracked call's stream name over 256 bytes is named by a digest in event ids; a resume with one works | `test_an_event_id_does_not_grow_with_the_request_id` |

Real loopback HTTP: the scripted upstream (``scripted_upstream.py``), behind the bearer
check of ``auth_upstream.py`` where a request must be refused; every wait is on an
observed event under a safety timeout.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from auth_upstream import SessionAuth  # noqa: E402

from fsm.adapters._transport.http import MAX_TRACKED_ID  # noqa: E402
from fsm.gateway import ids  # noqa: E402
from fsm.gateway.store import MemoryStore  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PROTOCOL = "2025-11-25"
BOGUS = "1999-01-01"
A = {**scripted.HEAD, "mcp-protocol-version": PROTOCOL, "authorization": "Bearer tok-a"}
"""A's headers (its bearer token, the protocol version its client negotiated)."""
STEP = 10.0
"""Safety timeout of one step (seconds): it only elapses when the step's event never comes."""


def resumes(upstream: scripted.Upstream) -> list[dict[str, str]]:
    """The headers of each resume ``GET`` (one with ``Last-Event-ID``) the upstream got."""
    return [h for m, h, _ in upstream.requests if m == "GET" and "last-event-id" in h]


async def own_resume(
    upstream: scripted.Upstream,
    url: str,
    cut: anyio.Event,
    meanwhile: Callable[[httpx2.AsyncClient], Awaitable[None]],
) -> tuple[dict[str, str], list[Any]]:
    """A initializes a session through the gateway at ``url`` and calls a tool; once its
    first event came, ``meanwhile`` runs, then the upstream cuts the call's stream
    (``cut``: ``upstream.call`` waits for it) and the gateway resumes it on its own: the
    headers of that resume as the upstream got them, and the messages A's call brought."""
    async with httpx2.AsyncClient(timeout=STEP) as http:
        sid = (await http.post(url, json=scripted.INIT, headers=A)).headers["mcp-session-id"]
        h = {**A, "mcp-session-id": sid}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=h)).status_code == 202
        with anyio.fail_after(STEP):
            async with http.stream("POST", url, json=scripted.CALL, headers=h) as resp:
                chunks = resp.aiter_raw()
                raw = await chunks.__anext__()
                await meanwhile(http)
                cut.set()
                raw += b"".join([c async for c in chunks])
    [own] = resumes(upstream)
    return own, [json.loads(d) for _, d in scripted.parse(raw) if d]


def cut_upstream(cut: anyio.Event, **kwargs: Any) -> scripted.Upstream:
    """An upstream whose call stream sends one event, then ends abruptly once ``cut`` is
    set; a resume brings the call's result (keywords go to :class:`Upstream`)."""
    replay = lambda _: [scripted.sse("e2", scripted.result(7))]  # noqa: E731
    return scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), cut], complete=False, replay=replay, **kwargs
    )


async def test_a_refused_request_does_not_change_the_sessions_protocol_version() -> None:
    """B, with no token, sends a ``ping`` of A's session with a bogus protocol version:
    the upstream refuses it (``401``), and the resume the gateway then makes for A carries
    A's version; A's call ends with its result."""
    cut = anyio.Event()
    upstream = cut_upstream(cut)
    refused: list[int] = []

    async def b_pings(http: httpx2.AsyncClient) -> None:
        ping = {"jsonrpc": "2.0", "id": "b", "method": "ping"}
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID, "mcp-protocol-version": BOGUS}
        refused.append((await http.post(url, json=ping, headers=headers)).status_code)

    # the bearer check of auth_upstream.py in front: no or an unknown token gets 401
    async with scripted.gateway_for(SessionAuth(upstream)) as gw:  # type: ignore[arg-type]
        url = gw.url
        own, messages = await own_resume(upstream, url, cut, b_pings)
    assert refused == [401]
    assert own["mcp-protocol-version"] == PROTOCOL
    assert messages == [scripted.PROGRESS, scripted.result(7)]


async def test_an_established_session_id_is_never_replaced() -> None:
    """An ``initialize`` sent in A's session is answered with a new session id: the
    gateway's own requests for A keep A's session id."""
    cut = anyio.Event()
    upstream = cut_upstream(cut, issue_sessions=True)
    answered: list[str | None] = []

    async def initialize_again(http: httpx2.AsyncClient) -> None:
        again = {**scripted.INIT, "id": "again"}
        headers = {**A, "mcp-session-id": upstream.issued[0]}
        resp = await http.post(url, json=again, headers=headers)
        answered.append(resp.headers.get("mcp-session-id"))

    async with scripted.gateway_for(upstream) as gw:
        url = gw.url
        own, messages = await own_resume(upstream, url, cut, initialize_again)
    assert upstream.issued == ["session-1", "session-2"]
    assert answered == ["session-2"]  # the upstream's answer, passed on as it came
    assert own["mcp-session-id"] == "session-1"
    assert messages == [scripted.PROGRESS, scripted.result(7)]


async def call_and_resume(rid: Any) -> tuple[bytes, str, int, list[Any], list[str]]:
    """A call with request id ``rid`` through a gateway, left after its first event and
    resumed with that event's id: the first event as the client got it, its id, the
    resume's status, the messages it brought and the stream names of the cursors the
    gateway's store holds then."""
    upstream = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS)],
        hold=anyio.Event(),  # held open until the gateway leaves it
        replay=lambda _: [scripted.sse("e2", scripted.result(rid))],
    )
    async with scripted.gateway_for(upstream) as gw, httpx2.AsyncClient(timeout=STEP) as http:
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        with anyio.fail_after(STEP):
            async with http.stream("POST", gw.url, json=scripted.tool_call(rid), headers=h) as old:
                first = await old.aiter_raw().__anext__()
            [(event_id, _)] = scripted.parse(first)
            assert event_id is not None
            resume = {**h, "last-event-id": event_id}
            async with http.stream("GET", gw.url, headers=resume) as resumed:
                raw = b"".join([c async for c in resumed.aiter_raw()])
            entries = cast(MemoryStore, gw.gateway.store)._entries
            while not (cursors := [item for kind, _, item in entries if kind == "cursor"]):
                await anyio.sleep(0.01)  # written as the client's first connection ended
    messages = [json.loads(d) for _, d in scripted.parse(raw) if d]
    return first, event_id, resumed.status_code, messages, cursors


async def test_an_event_id_does_not_grow_with_the_request_id() -> None:
    """A call whose request id is the longest the gateway tracks (its JSON text
    ``MAX_TRACKED_ID`` characters; its stream's name, over 256 bytes): its first event is
    written with about the bytes of a call with id 7 (its stream is named by a digest in
    its event ids, and in the store that keeps its cursor), and a resume with that
    event's id brings the call's result."""
    long_id = "x" * (MAX_TRACKED_ID - 2)  # two quotes: its JSON text is at the bound
    short, short_id, *short_resume, short_cursors = await call_and_resume(7)
    long, digest_id, *long_resume, long_cursors = await call_and_resume(long_id)
    assert len(long) <= len(short) + 32
    assert digest_id.startswith(ids.DIGEST_MARK) and not short_id.startswith(ids.DIGEST_MARK)
    assert short_resume == [200, [scripted.result(7)]]
    assert long_resume == [200, [scripted.result(long_id)]]
    assert short_cursors == ["post:7"]
    assert long_cursors == [ids.store_name("post:" + json.dumps(long_id))]
    assert long_cursors[0].startswith(ids.DIGEST_MARK) and len(long_cursors[0]) < 64


def test_a_store_names_a_long_stream_by_its_digest_and_a_short_one_by_itself() -> None:
    long_a, long_b = "post:" + json.dumps("a" * 300), "post:" + json.dumps("b" * 300)
    assert ids.store_name("post:7") == "post:7"
    assert ids.store_name("x" * 256) == "x" * 256  # the longest kept whole
    assert ids.store_name("x" * 257).startswith(ids.DIGEST_MARK)
    assert ids.store_name(long_a) != ids.store_name(long_b)
    assert ids.store_name(long_a) == ids.store_name(long_a) and len(ids.store_name(long_a)) == 25


def test_a_digest_tag_reads_back_while_its_rewriter_lives_and_only_in_its_session() -> None:
    """A stream name over 256 bytes is named by a digest: its ids read back in their
    session while the rewriter that issued them lives, under those keys; never in
    another session, under other keys (another replica) or once it is gone."""
    keys = ids.EventIdKeys(b"k" * 32)
    stream = "post:" + json.dumps("y" * 300)
    rewriter = ids.IdRewriter(stream, "s1", keys)
    value = rewriter.rewrite(b"id: e1\ndata: {}\n\n").split(b"\n")[0][4:].decode()
    assert value.startswith(ids.DIGEST_MARK) and len(value) < 64
    assert ids.parse_event_id(value, "s1", keys) == ids.GatewayEventId(stream, 1, "e1")
    assert ids.parse_event_id(value, "s2", keys) is None
    assert ids.parse_event_id(value, "s1", ids.EventIdKeys(keys.current)) is None
    del rewriter
    assert ids.parse_event_id(value, "s1", keys) is None
