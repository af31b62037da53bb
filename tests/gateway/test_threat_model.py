"""The gateway adds no authority: whatever a client holding another client's session id
can do to that session through the gateway (one replica or several), it could do talking
to the upstream directly. Nothing it sends changes another client's prompts, streams,
cursors or session unless the upstream accepted it.

The upstream binds each MCP session to the principal of the bearer token of its
``initialize`` (``auth_upstream.py``: no or an unknown token ``401``; another principal's
token ``403``, or ``404`` as servers that hide other users' sessions answer). A is a
legitimate client (the unmodified mcp client, token ``tok-a``) in the middle of a call: its
``delete_files`` tool waits on an ``elicitation/create``, "Delete 3 files?". B knows A's
``Mcp-Session-Id`` and sends raw HTTP. Each row runs twice, ``direct`` (to the upstream)
and ``gateway`` (two replicas on one shared store; three for the cursor row) and expects
the same for A both ways: A's prompt still A's to answer, the files deleted once, by A's
confirmation, A's call ending with that result, A's session alive through every replica.

| attacker | what they hold | what they try | what they get direct | what they get through the gateway | test |
|---|---|---|---|---|---|
| B, no token | A's session id, the id of A's open prompt | answer A's prompt (confirm the deletion) | `401`; nothing reaches the server | the upstream's `401`, relayed: an answer with credentials the upstream has not accepted for the session goes upstream at once with the client's own headers, never a `202` from the gateway | `test_an_answer_from_another_client_is_refused_and_changes_nothing[no-token]` |
| B, own token | the same | the same | `403`; A's prompt stays open | the upstream's `403`, relayed; A's prompt stays open (the refusal is B's, not an answer to A's prompt) | `test_an_answer_from_another_client_is_refused_and_changes_nothing[own-token]` |
| B, no token | A's session id, a genuine event id of A's open call stream | resume A's call stream (one `GET`) | `401` | the upstream's `401`, relayed; A's stream is not taken over or ended | `test_an_unauthenticated_resume_is_refused_and_leaves_the_call_open` |
| B, own token, against a server that answers `404` for other principals' sessions | A's session id | one `ping` | `404` `Session not found`; A's session lives | the upstream's `404`, relayed; a `404` to credentials the upstream never accepted for the session does not end it, on any replica | `test_a_404_for_a_foreign_principal_does_not_end_the_session` |
| B, a token of A's principal (the upstream lets it in) | A's session id, the gateway's event id format | while A's stream is broken and its prompt waits upstream, resume A's stream with a forged `Last-Event-ID` | whatever the server answers a cursor it never issued (mcp 2.3.0: an empty stream); no prompt | `400`: event ids carry a MAC bound to the session; A's resume brings A its prompt | `test_a_forged_event_id_does_not_take_the_prompt_while_a_reconnects` |
| the same | the same | one `GET` with a forged `Last-Event-ID` of A's open call stream | the same | `400`; A's call goes on | `test_a_forged_event_id_does_not_end_an_open_call` |
| the same | the same | a forged `Last-Event-ID` far ahead, through a replica that never saw A's stream, while A's stream is broken | the same | `400`, nothing stored; A's resume on a third replica brings A its prompt | `test_a_forged_event_id_on_another_replica_stores_no_cursor` |
| B (anyone) | A's session id | a request whose `Authorization` or `Cookie` holds a byte >= 0x80 | the server takes the byte and refuses the token (`401`) or the session (`403`) | `400` at the edge, nothing stored or forwarded; the replica keeps serving A and new clients | `test_a_header_that_cannot_be_forwarded_leaves_the_replica_serving` |
| none: A refreshes its token | a new token of its own principal (`tok-a2`) | answer its prompt and go on with the new token | accepted | accepted: the upstream accepts the new credentials, which are then the session's | `test_a_refreshed_token_keeps_the_session` |

Every fault and step is driven by explicit command (the harness server's gate and log, the
fault proxy's cuts, holds and retargeting) and every wait is on an observed event, with a
safety timeout that only elapses when the event never comes (the comparison then shows
what happened instead).
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from auth_upstream import SESSION_NOT_FOUND_BODY, UNAUTHORIZED_BODY

from fsm.wire.proxy import Exchange
from tests.gateway import threat_bed as threat

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


# --------------------------------------------------------------------------- the rows' helpers


async def fresh_session(bed: threat.Bed, url: str, token: str) -> str:
    """``ok`` when a new client (``token``) opens a session through ``url`` and lists
    its tools."""
    try:
        status, headers, _ = await threat.post_rpc(
            bed.raw, url, threat.INITIALIZE, threat.rpc_headers(None, token)
        )
        sid = headers.get("mcp-session-id")
        if status != 200 or sid is None:
            return f"initialize: {status}"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await threat.post_rpc(bed.raw, url, initialized, threat.rpc_headers(sid, token))
    except httpx2.HTTPError as exc:
        return type(exc).__name__
    return await threat.session_alive(bed, url, threat.rpc_headers(sid, token))


def forged_status(via: threat.Via, b: threat.Reply) -> int:
    """The status B's forged event id must get: the gateway's ``400``; direct, whatever the
    server answers a cursor it never issued (it lets B in: a token of A's principal)."""
    return 400 if via == "gateway" else b.status


def forged_id(stream: str, position: int, upstream_id: str) -> str:
    """An event id in the gateway's format (``<tag>.<position>.<upstream id>``, the tag
    the URL-safe base64 of the stream's name) that no gateway issued."""
    tag = base64.urlsafe_b64encode(stream.encode()).decode().rstrip("=")
    return f"{tag}.{position}.{upstream_id}"


def call_stream(post: Exchange) -> str:
    """The gateway's name of a call's stream: ``post:<the call's JSON-RPC id>``."""
    return f"post:{json.dumps(post.json['id'])}"


def resumed_upstream(bed: threat.Bed) -> bool:
    """Whether a resume (a GET with ``Last-Event-ID``) reached the upstream's inner server."""
    return any(p.method == "GET" and p.last_event_id for p in bed.upstream.auth.passed)


# --------------------------------------------------------------------------- the rows


@pytest.mark.parametrize("via", threat.VIAS)
@threat.B_TOKENS
async def test_an_answer_from_another_client_is_refused_and_changes_nothing(
    via: threat.Via, token: str | None, refused: threat.Reply
) -> None:
    """Rows 1 and 2: B answers A's prompt with no token (401) or with its own, another
    principal's (403); the refusal is B's alone: A's prompt stays A's, the files wait
    for A."""
    async with threat.open_bed(via, mode="403") as bed, threat.alice(bed) as a:
        a.start()
        seen = await threat.b_answers(bed, a, token)
    assert seen == threat.Seen(refused, False, threat.fate_expected(bed))


@pytest.mark.parametrize("via", threat.VIAS)
async def test_an_unauthenticated_resume_is_refused_and_leaves_the_call_open(
    via: threat.Via,
) -> None:
    """Row 3: B, with no token, resumes A's open call stream from the newest event id A
    holds (a genuine one): 401, and A's call goes on."""
    async with threat.open_bed(via) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        post = await a.tools_call()
        newest = post.sse_event_ids[-1]
        b = await threat.b_get(
            bed,
            bed.target(0),
            threat.rpc_headers(a.sid, None, **{"last-event-id": newest}),
            read=False,
        )
        fate = await a.fate()  # first: whatever B set off has happened by then
        seen = threat.Seen(b, resumed_upstream(bed), fate)
    assert seen == threat.Seen(
        threat.Reply(401, UNAUTHORIZED_BODY), False, threat.fate_expected(bed)
    )


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_404_for_a_foreign_principal_does_not_end_the_session(via: threat.Via) -> None:
    """Row 4: against a server that hides other principals' sessions (404), B pings with
    its own token and A's session id: B gets the server's 404, and A's session lives on
    every replica."""
    async with threat.open_bed(via, mode="404") as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        b = await threat.b_post(
            bed, bed.target(0), threat.B_PING, threat.rpc_headers(a.sid, threat.B_TOKEN)
        )
        fate = await a.fate()  # first: whatever B set off has happened by then
        seen = threat.Seen(b, threat.reached(bed, "b-ping"), fate)
    assert seen == threat.Seen(
        threat.Reply(404, SESSION_NOT_FOUND_BODY), False, threat.fate_expected(bed)
    )


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_forged_event_id_does_not_take_the_prompt_while_a_reconnects(
    via: threat.Via,
) -> None:
    """Row 5a: A's call stream breaks before its prompt is sent; while A is away, B (a
    token of A's principal) resumes A's stream with a forged event id. Direct, the server
    knows no such id and sends nothing; the gateway answers 400. A's own resume brings A
    its prompt."""
    async with threat.open_bed(via) as bed, threat.alice(bed) as a:
        post, pending, hold = await a.away()
        await a.prompt_stored(pending)
        forged = forged_id(call_stream(post), 1, "ev1")
        headers = threat.rpc_headers(a.sid, threat.ALICE_OTHER, **{"last-event-id": forged})
        b = await threat.b_get(bed, bed.target(0), headers, read=True)
        hold.release()
        seen = threat.Seen((b.status, b.prompts), None, await a.fate())
    assert seen == threat.Seen((forged_status(via, b), ()), None, threat.fate_expected(bed))


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_forged_event_id_does_not_end_an_open_call(via: threat.Via) -> None:
    """Row 5b: A's prompt is open on A's call stream; B (a token of A's principal) sends
    one GET with a forged event id of that stream. A's call goes on."""
    async with threat.open_bed(via) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        post = await a.tools_call()
        forged = forged_id(call_stream(post), 1, "ev1")
        headers = threat.rpc_headers(a.sid, threat.ALICE_OTHER, **{"last-event-id": forged})
        b = await threat.b_get(bed, bed.target(0), headers, read=False)
        seen = threat.Seen((b.status, b.prompts), None, await a.fate())
    assert seen == threat.Seen((forged_status(via, b), ()), None, threat.fate_expected(bed))


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_forged_event_id_on_another_replica_stores_no_cursor(via: threat.Via) -> None:
    """Row 5c: A's call stream breaks before its prompt is sent; B (a token of A's
    principal) sends a forged event id far ahead for A's stream to a second replica; A's
    resume lands on a third one, which reads the shared store. A gets its prompt."""
    async with threat.open_bed(via, replicas=3) as bed, threat.alice(bed) as a:
        post, pending, hold = await a.away()
        far = 10**9
        forged = forged_id(call_stream(post), far, "ev999999")
        headers = threat.rpc_headers(a.sid, threat.ALICE_OTHER, **{"last-event-id": forged})
        b = await threat.b_get(bed, bed.target(1), headers, read=False)
        await a.prompt_stored(pending)
        bed.proxy.retarget(bed.target(2))
        hold.release()
        fate = await a.fate()
        cursor = await bed.store.cursor_of(a.sid, call_stream(post)) if bed.store else None
        stored = cursor is not None and cursor.position == far
        seen = threat.Seen((b.status, b.prompts, stored), None, fate)
    assert seen == threat.Seen((forged_status(via, b), (), False), None, threat.fate_expected(bed))


BAD_HEADERS: dict[str, dict[str, Any]] = {
    "authorization": {"authorization": b"Bearer tok-b\xe9"},
    "cookie": {"authorization": f"Bearer {threat.B_TOKEN}", "cookie": b"session=caf\xe9"},
}


@pytest.mark.parametrize("header", sorted(BAD_HEADERS))
@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_header_that_cannot_be_forwarded_leaves_the_replica_serving(
    via: threat.Via, header: str
) -> None:
    """Row 6: B sends a request of A's session whose ``Authorization`` or ``Cookie`` holds
    a byte >= 0x80. Direct, the server refuses it; the gateway answers 400 at its edge.
    Either way A's call completes, A's session lives, a new client is served."""
    async with threat.open_bed(via) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        headers = {**threat.rpc_headers(a.sid, None), **BAD_HEADERS[header]}
        b = await threat.b_post(bed, bed.target(0), threat.B_PING, headers)
        fate = await a.fate()
        others = tuple([await fresh_session(bed, url, threat.B_TOKEN) for url in bed.targets])
        seen = threat.Seen(b.status, threat.reached(bed, "b-ping"), fate, others)
    # direct, the server takes the byte and refuses the token (unknown: 401) or the
    # session (another principal's: 403); the gateway refuses the header at its edge
    status = 400 if via == "gateway" else {"authorization": 401, "cookie": 403}[header]
    ok = ("ok",) * len(bed.targets)
    assert seen == threat.Seen(status, False, threat.fate_expected(bed), ok)


@pytest.mark.parametrize("via", threat.VIAS)
async def test_a_refreshed_token_keeps_the_session(via: threat.Via) -> None:
    """Row 7: A's client switches to a new token of the same principal while its prompt
    is open; its answer, its call and its session go on with it."""
    async with threat.open_bed(via) as bed, threat.alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, threat.STEP)
        bed.http_a.headers["authorization"] = f"Bearer {threat.A_REFRESHED}"
        fate = await a.fate()
    answers = bed.upstream.auth.answers_for(a.sid)
    assert bed.a_token() == threat.A_REFRESHED
    assert answers and {p.principal for p in answers} == {"alice"}
    assert fate == threat.fate_expected(bed)
