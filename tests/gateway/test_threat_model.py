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
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from anyio.abc import TaskGroup
from auth_upstream import (
    FORBIDDEN_BODY,
    SESSION_NOT_FOUND_BODY,
    UNAUTHORIZED_BODY,
    AuthServer,
    Mode,
    running_auth_server,
)

from fsm.gateway.ids import EventIdKeys
from fsm.wire.proxy import Exchange, FaultProxy, is_resume_get
from support.scenarios import (
    BackgroundCall,
    ClientEnv,
    ElicitAnswer,
    ScenarioClient,
    User,
    plain_client,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

Via = Literal["direct", "gateway"]
VIAS = ("direct", "gateway")

A_TOKEN = "tok-a"
A_REFRESHED = "tok-a2"
"""A's token after a refresh: the same principal, so the upstream accepts it for A's session."""
ALICE_OTHER = "tok-a3"
"""Another token of A's principal (another of alice's clients, or one that leaked): the
upstream accepts it for A's session."""
B_TOKEN = "tok-b"
TOKENS = {A_TOKEN: "alice", A_REFRESHED: "alice", ALICE_OTHER: "alice", B_TOKEN: "bob"}

PROTOCOL = "2025-11-25"
DELETED = "Deleted 3 files: a.txt, b.txt, c.txt"
A_ANSWER = ElicitAnswer("accept", {"confirm": True})
B_CONTENT = {"confirm": True, "by": "bob"}
"""What B answers A's prompt with (marked, so the tool's log tells it from A's answer)."""
STEP = 10.0
"""Safety timeout of one step (seconds): it only elapses when the step's event never
comes, which the assertions then report; no step waits for it."""


# --------------------------------------------------------------------------- the bed


def _shared_keys() -> dict[str, Any]:
    """Keywords that let replicas read each other's event ids: one key for all of them,
    as replicas behind one balancer share it."""
    return {"id_keys": EventIdKeys.generate()}


@dataclass
class Bed:
    """The authenticating upstream, the way to it (``targets``: the upstream itself, or
    each gateway replica, all on one shared store), a proxy in front of the first target
    that A's client goes through (``retarget`` moves it: a balancer), A's HTTP client
    (its bearer token a default header), a client for B's requests and the checks' (it
    sends exactly the headers given), A's user."""

    via: Via
    upstream: AuthServer
    targets: list[str]
    proxy: FaultProxy
    http_a: httpx2.AsyncClient
    raw: httpx2.AsyncClient
    store: Any = None
    """The replicas' shared state store (``None`` when direct)."""
    user: User = field(default_factory=User)

    def target(self, index: int) -> str:
        """Replica ``index`` (the upstream itself when direct)."""
        return self.targets[min(index, len(self.targets) - 1)]

    def a_token(self) -> str:
        """A's bearer token now (it may have been refreshed)."""
        return self.http_a.headers["authorization"].removeprefix("Bearer ")


@contextlib.asynccontextmanager
async def open_bed(
    via: Via, *, mode: Mode = "403", replicas: int = 2, cors: bool = False
) -> AsyncIterator[Bed]:
    """A :class:`Bed`; ``replicas`` gateway replicas sharing one ``MemoryStore``; the
    upstream behind a CORS layer with ``cors`` (:func:`running_auth_server`)."""
    async with contextlib.AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(
            running_auth_server(TOKENS, mode=mode, cors=cors)
        )
        targets, store = [upstream.url], None
        if via == "gateway":
            from fsm.gateway.store import MemoryStore
            from fsm.sse.guard import GuardConfig
            from support.gateway import running_gateway

            # short backoffs: the server advertises retry: 50
            config = GuardConfig(backoff_initial_s=0.05, backoff_max_s=0.5)
            store = MemoryStore()
            shared = {"store": store, "config": config, **_shared_keys()}
            targets = [
                (await stack.enter_async_context(running_gateway(upstream.url, **shared))).url
                for _ in range(replicas)
            ]
        proxy = await stack.enter_async_context(FaultProxy(targets[0]))
        timeout = httpx2.Timeout(STEP, read=300.0)
        http_a = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"authorization": f"Bearer {A_TOKEN}"}, timeout=timeout)
        )
        raw = await stack.enter_async_context(httpx2.AsyncClient(timeout=timeout))
        yield Bed(via, upstream, targets, proxy, http_a, raw, store)


# --------------------------------------------------------------------------- A


@dataclass(frozen=True)
class Fate:
    """What happened to A."""

    presented: int
    """Times A's user was shown a prompt."""
    answered_open_prompt: bool
    """A's prompt was still open when A answered it."""
    outcome: str
    """How A's call ended: the tool's result, ``error: ...``, or ``pending``."""
    tool_answers: tuple[Any, ...]
    """The answers the tool received, in order (their contents)."""
    tool_results: tuple[str, ...]
    """What the tool returned (``Deleted ...``: the files were deleted)."""
    client_alive: bool
    """A's client's next ``list_tools`` works."""
    alive: tuple[str, ...]
    """A's session, asked with A's token through each target: ``ok`` or what came back."""


@dataclass(frozen=True)
class Seen:
    """One run, compared whole with what the row expects (a failure shows every
    difference): what B got, whether B's request reached the upstream's server, A's fate,
    and (row 6) whether a new client is served through each target."""

    b: Any
    b_reached: bool | None
    a: Fate
    others: tuple[str, ...] = ()


def fate_expected(bed: Bed) -> Fate:
    """Nothing happened to A: its prompt was its own to answer, the files were deleted
    once, by its confirmation, and its session lives on every target."""
    return Fate(1, True, DELETED, (A_ANSWER.content,), (DELETED,), True, ("ok",) * len(bed.targets))


@dataclass
class Alice:
    """A: the unmodified mcp client in a session of its own, its call in ``tg``."""

    bed: Bed
    client: ScenarioClient
    sid: str
    tg: TaskGroup
    call: BackgroundCall = field(default_factory=BackgroundCall)

    def start(self, **arguments: Any) -> None:
        """Call ``delete_files`` (in the background)."""
        self.tg.start_soon(self.call.run, self.client, "delete_files", arguments)

    async def tools_call(self) -> Exchange:
        """The call's POST exchange at the proxy, once its priming event was relayed."""
        proxy = self.bed.proxy
        req = await proxy.wait_for(
            lambda e: (
                e.kind == "request"
                and isinstance(e.json, dict)
                and e.json.get("method") == "tools/call"
            ),
            STEP,
        )
        await proxy.wait_for(
            lambda e: e.kind == "sse_event" and e.exchange == req.exchange and e.data == "",
            STEP,
        )
        return proxy.exchanges[req.exchange]

    async def away(self) -> tuple[Exchange, Any, Any]:
        """A's call started (the server holds it, gated), then its stream cut abruptly
        before its prompt is sent, A's resume held at the proxy: the call's POST, the
        server's pending call and the hold."""
        self.start(gated=True)
        post = await self.tools_call()
        pending = await self.bed.upstream.controller.wait_pending(state="gated", timeout=STEP)
        hold = self.bed.proxy.hold_next(is_resume_get)
        await self.bed.proxy.cut(post, "abrupt")
        await hold.wait_arrived(STEP)
        return post, pending, hold

    async def prompt_stored(self, pending: Any) -> None:
        """The server lets the ``pending`` call go on; wait until it stored the prompt
        (A is away: it is not sent)."""
        controller = self.bed.upstream.controller
        mark = controller.log[-1].seq
        controller.release(pending)
        await controller.wait_for(
            lambda e: e.kind == "stored" and e.detail.get("what") == "elicitation/create",
            STEP,
            after=mark,
        )

    async def fate(self) -> Fate:
        """A answers its prompt (when it has one, open), its call ends, it lists its tools
        through its client and through every target."""
        bed, user = self.bed, self.bed.user
        presented = await _within(user.wait_presented(1, STEP))
        was_open = presented and user.presentations[0].open
        if was_open:
            user.answer(0, A_ANSWER)
            await _within(self.call.wait(STEP))
        outcome = self.call.outcome
        text = outcome.text if outcome.kind == "result" else f"{outcome.kind}: {outcome.text}"
        client_alive = await _within(self.client.list_tools())  # type: ignore[attr-defined]
        alive = [await session_alive(bed, url, self.a_headers()) for url in bed.targets]
        log = bed.upstream.controller.log
        mine = [e for e in log if e.session_id == self.sid]
        return Fate(
            len(user.presentations),
            was_open,
            text,
            tuple(e.detail["content"] for e in mine if e.kind == "elicit_answered"),
            tuple(e.detail["text"] for e in mine if e.kind == "tool_finished"),
            client_alive,
            tuple(alive),
        )

    def a_headers(self) -> dict[str, str]:
        return rpc_headers(self.sid, self.bed.a_token())


@contextlib.asynccontextmanager
async def alice(bed: Bed) -> AsyncIterator[Alice]:
    """A's session (through the proxy); on exit a call still running is abandoned."""
    env = ClientEnv(bed.proxy.url, bed.http_a, bed.user.present, lambda: None)
    async with plain_client(env) as client, anyio.create_task_group() as tg:
        sid = next(
            ex.response_headers["mcp-session-id"]
            for ex in bed.proxy.exchanges.values()
            if "mcp-session-id" in ex.response_headers
        )
        try:
            yield Alice(bed, client, sid, tg)
        finally:
            tg.cancel_scope.cancel()


async def _within(step: Awaitable[Any]) -> bool:
    """Whether ``step`` completed (within :data:`STEP`; an exception is ``False``)."""
    with anyio.move_on_after(STEP):
        try:
            await step
        except Exception:
            return False
        return True
    return False


# --------------------------------------------------------------------------- the wire


def rpc_headers(sid: str | None, token: str | None, **extra: str | bytes) -> dict[str, Any]:
    """The headers of a streamable-HTTP request of session ``sid`` with ``token``."""
    headers: dict[str, Any] = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
    }
    if sid is not None:
        headers["mcp-session-id"] = sid
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    headers.update(extra)
    return headers


def _sse_messages(text: str) -> list[Any]:
    """The JSON messages of a whole event-stream body."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if lines and any(lines):
            with contextlib.suppress(ValueError):
                out.append(json.loads("\n".join(lines)))
    return out


async def post_rpc(
    http: httpx2.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, Any]
) -> tuple[int, dict[str, str], Any]:
    """POST ``message``; the status, headers and the JSON-RPC reply (the event stream's
    message answering ``message``, or the JSON body)."""
    resp = await http.post(url, json=message, headers=headers)
    ctype = resp.headers.get("content-type", "")
    reply: Any = None
    if ctype.startswith("text/event-stream"):
        answers = [
            m
            for m in _sse_messages(resp.text)
            if isinstance(m, dict) and m.get("id") == message.get("id")
        ]
        reply = answers[0] if answers else None
    elif resp.content:
        with contextlib.suppress(ValueError):
            reply = resp.json()
    return resp.status_code, dict(resp.headers), reply


async def session_alive(bed: Bed, url: str, headers: dict[str, Any]) -> str:
    """``ok`` when ``tools/list`` of the session in ``headers`` works through ``url``."""
    message = {"jsonrpc": "2.0", "id": "alive", "method": "tools/list"}
    try:
        status, _, reply = await post_rpc(bed.raw, url, message, headers)
    except httpx2.HTTPError as exc:
        return type(exc).__name__
    tools = reply.get("result", {}).get("tools") if isinstance(reply, dict) else None
    return "ok" if status == 200 and tools else f"{status} {reply}"


INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    },
}
"""A raw client's ``initialize``."""


async def fresh_session(bed: Bed, url: str, token: str) -> str:
    """``ok`` when a new client (``token``) opens a session through ``url`` and lists
    its tools."""
    try:
        status, headers, _ = await post_rpc(bed.raw, url, INITIALIZE, rpc_headers(None, token))
        sid = headers.get("mcp-session-id")
        if status != 200 or sid is None:
            return f"initialize: {status}"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await post_rpc(bed.raw, url, initialized, rpc_headers(sid, token))
    except httpx2.HTTPError as exc:
        return type(exc).__name__
    return await session_alive(bed, url, rpc_headers(sid, token))


@dataclass(frozen=True)
class Reply:
    """What B got: the status, a JSON body, and the prompts an event stream carried."""

    status: int
    body: Any = None
    prompts: tuple[str, ...] = ()


async def b_post(bed: Bed, url: str, message: dict[str, Any], headers: dict[str, Any]) -> Reply:
    status, _, reply = await post_rpc(bed.raw, url, message, headers)
    return Reply(status, reply)


async def b_get(bed: Bed, url: str, headers: dict[str, Any], *, read: bool) -> Reply:
    """B's GET; an event stream is read (``read``) until it carries a prompt or ends,
    or left at once."""
    headers = {**headers, "accept": "text/event-stream"}
    headers.pop("content-type", None)
    async with bed.raw.stream("GET", url, headers=headers) as resp:
        if not resp.headers.get("content-type", "").startswith("text/event-stream"):
            await resp.aread()
            body = None
            with contextlib.suppress(ValueError):
                body = resp.json()
            return Reply(resp.status_code, body)
        prompts: list[str] = []
        if read:
            with anyio.move_on_after(STEP):
                text = ""
                async for piece in resp.aiter_text():
                    text += piece
                    prompts = [
                        m["params"]["message"]
                        for m in _sse_messages(text)
                        if isinstance(m, dict) and m.get("method") == "elicitation/create"
                    ]
                    if prompts:
                        break
        return Reply(resp.status_code, None, tuple(prompts))


async def b_answers(bed: Bed, a: Alice, token: str | None, replica: int = 0) -> Seen:
    """B answers A's open prompt (confirming the deletion) with ``token`` through
    ``replica``: what B got, whether B's answer reached the upstream's server, and A's
    fate."""
    prompt = await bed.user.wait_presented(1, STEP)
    b = await b_post(
        bed,
        bed.target(replica),
        answer_of(prompt.request.request_id, B_CONTENT),
        rpc_headers(a.sid, token),
    )
    fate = await a.fate()  # first: whatever B set off has happened by then
    return Seen(b, reached(bed, "bob"), fate)


def forged_status(via: Via, b: Reply) -> int:
    """The status B's forged event id must get: the gateway's ``400``; direct, whatever the
    server answers a cursor it never issued (it lets B in: a token of A's principal)."""
    return 400 if via == "gateway" else b.status


def answer_of(request_id: Any, content: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": content}}


def forged_id(stream: str, position: int, upstream_id: str) -> str:
    """An event id in the gateway's format (``<tag>.<position>.<upstream id>``, the tag
    the URL-safe base64 of the stream's name) that no gateway issued."""
    tag = base64.urlsafe_b64encode(stream.encode()).decode().rstrip("=")
    return f"{tag}.{position}.{upstream_id}"


def call_stream(post: Exchange) -> str:
    """The gateway's name of a call's stream: ``post:<the call's JSON-RPC id>``."""
    return f"post:{json.dumps(post.json['id'])}"


def reached(bed: Bed, marker: str) -> bool:
    """Whether a message that reached the upstream's inner server holds ``marker``."""
    return any(marker in json.dumps(p.message) for p in bed.upstream.auth.passed)


def resumed_upstream(bed: Bed) -> bool:
    """Whether a resume (a GET with ``Last-Event-ID``) reached the upstream's inner server."""
    return any(p.method == "GET" and p.last_event_id for p in bed.upstream.auth.passed)


# --------------------------------------------------------------------------- the rows


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    ("token", "refused"),
    [(None, Reply(401, UNAUTHORIZED_BODY)), (B_TOKEN, Reply(403, FORBIDDEN_BODY))],
    ids=["no-token", "own-token"],
)
async def test_an_answer_from_another_client_is_refused_and_changes_nothing(
    via: Via, token: str | None, refused: Reply
) -> None:
    """Rows 1 and 2: B answers A's prompt with no token (401) or with its own, another
    principal's (403); the refusal is B's alone: A's prompt stays A's, the files wait
    for A."""
    async with open_bed(via, mode="403") as bed, alice(bed) as a:
        a.start()
        seen = await b_answers(bed, a, token)
    assert seen == Seen(refused, False, fate_expected(bed))


@pytest.mark.parametrize("via", VIAS)
async def test_an_unauthenticated_resume_is_refused_and_leaves_the_call_open(via: Via) -> None:
    """Row 3: B, with no token, resumes A's open call stream from the newest event id A
    holds (a genuine one): 401, and A's call goes on."""
    async with open_bed(via) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        post = await a.tools_call()
        newest = post.sse_event_ids[-1]
        b = await b_get(
            bed, bed.target(0), rpc_headers(a.sid, None, **{"last-event-id": newest}), read=False
        )
        fate = await a.fate()  # first: whatever B set off has happened by then
        seen = Seen(b, resumed_upstream(bed), fate)
    assert seen == Seen(Reply(401, UNAUTHORIZED_BODY), False, fate_expected(bed))


@pytest.mark.parametrize("via", VIAS)
async def test_a_404_for_a_foreign_principal_does_not_end_the_session(via: Via) -> None:
    """Row 4: against a server that hides other principals' sessions (404), B pings with
    its own token and A's session id: B gets the server's 404, and A's session lives on
    every replica."""
    async with open_bed(via, mode="404") as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        ping = {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"}
        b = await b_post(bed, bed.target(0), ping, rpc_headers(a.sid, B_TOKEN))
        fate = await a.fate()  # first: whatever B set off has happened by then
        seen = Seen(b, reached(bed, "b-ping"), fate)
    assert seen == Seen(Reply(404, SESSION_NOT_FOUND_BODY), False, fate_expected(bed))


@pytest.mark.parametrize("via", VIAS)
async def test_a_forged_event_id_does_not_take_the_prompt_while_a_reconnects(via: Via) -> None:
    """Row 5a: A's call stream breaks before its prompt is sent; while A is away, B (a
    token of A's principal) resumes A's stream with a forged event id. Direct, the server
    knows no such id and sends nothing; the gateway answers 400. A's own resume brings A
    its prompt."""
    async with open_bed(via) as bed, alice(bed) as a:
        post, pending, hold = await a.away()
        await a.prompt_stored(pending)
        forged = forged_id(call_stream(post), 1, "ev1")
        headers = rpc_headers(a.sid, ALICE_OTHER, **{"last-event-id": forged})
        b = await b_get(bed, bed.target(0), headers, read=True)
        hold.release()
        seen = Seen((b.status, b.prompts), None, await a.fate())
    assert seen == Seen((forged_status(via, b), ()), None, fate_expected(bed))


@pytest.mark.parametrize("via", VIAS)
async def test_a_forged_event_id_does_not_end_an_open_call(via: Via) -> None:
    """Row 5b: A's prompt is open on A's call stream; B (a token of A's principal) sends
    one GET with a forged event id of that stream. A's call goes on."""
    async with open_bed(via) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        post = await a.tools_call()
        forged = forged_id(call_stream(post), 1, "ev1")
        headers = rpc_headers(a.sid, ALICE_OTHER, **{"last-event-id": forged})
        b = await b_get(bed, bed.target(0), headers, read=False)
        seen = Seen((b.status, b.prompts), None, await a.fate())
    assert seen == Seen((forged_status(via, b), ()), None, fate_expected(bed))


@pytest.mark.parametrize("via", VIAS)
async def test_a_forged_event_id_on_another_replica_stores_no_cursor(via: Via) -> None:
    """Row 5c: A's call stream breaks before its prompt is sent; B (a token of A's
    principal) sends a forged event id far ahead for A's stream to a second replica; A's
    resume lands on a third one, which reads the shared store. A gets its prompt."""
    async with open_bed(via, replicas=3) as bed, alice(bed) as a:
        post, pending, hold = await a.away()
        far = 10**9
        forged = forged_id(call_stream(post), far, "ev999999")
        headers = rpc_headers(a.sid, ALICE_OTHER, **{"last-event-id": forged})
        b = await b_get(bed, bed.target(1), headers, read=False)
        await a.prompt_stored(pending)
        bed.proxy.retarget(bed.target(2))
        hold.release()
        fate = await a.fate()
        cursor = await bed.store.cursor_of(a.sid, call_stream(post)) if bed.store else None
        stored = cursor is not None and cursor.position == far
        seen = Seen((b.status, b.prompts, stored), None, fate)
    assert seen == Seen((forged_status(via, b), (), False), None, fate_expected(bed))


BAD_HEADERS: dict[str, dict[str, Any]] = {
    "authorization": {"authorization": b"Bearer tok-b\xe9"},
    "cookie": {"authorization": f"Bearer {B_TOKEN}", "cookie": b"session=caf\xe9"},
}


@pytest.mark.parametrize("header", sorted(BAD_HEADERS))
@pytest.mark.parametrize("via", VIAS)
async def test_a_header_that_cannot_be_forwarded_leaves_the_replica_serving(
    via: Via, header: str
) -> None:
    """Row 6: B sends a request of A's session whose ``Authorization`` or ``Cookie`` holds
    a byte >= 0x80. Direct, the server refuses it; the gateway answers 400 at its edge.
    Either way A's call completes, A's session lives, a new client is served."""
    async with open_bed(via) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        ping = {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"}
        headers = {**rpc_headers(a.sid, None), **BAD_HEADERS[header]}
        b = await b_post(bed, bed.target(0), ping, headers)
        fate = await a.fate()
        others = tuple([await fresh_session(bed, url, B_TOKEN) for url in bed.targets])
        seen = Seen(b.status, reached(bed, "b-ping"), fate, others)
    # direct, the server takes the byte and refuses the token (unknown: 401) or the
    # session (another principal's: 403); the gateway refuses the header at its edge
    status = 400 if via == "gateway" else {"authorization": 401, "cookie": 403}[header]
    ok = ("ok",) * len(bed.targets)
    assert seen == Seen(status, False, fate_expected(bed), ok)


@pytest.mark.parametrize("via", VIAS)
async def test_a_refreshed_token_keeps_the_session(via: Via) -> None:
    """Row 7: A's client switches to a new token of the same principal while its prompt
    is open; its answer, its call and its session go on with it."""
    async with open_bed(via) as bed, alice(bed) as a:
        a.start()
        await bed.user.wait_presented(1, STEP)
        bed.http_a.headers["authorization"] = f"Bearer {A_REFRESHED}"
        fate = await a.fate()
    answers = bed.upstream.auth.answers_for(a.sid)
    assert bed.a_token() == A_REFRESHED
    assert answers and {p.principal for p in answers} == {"alice"}
    assert fate == fate_expected(bed)
