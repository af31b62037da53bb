"""The bed of the gateway's threat-model tests (``test_threat_model.py``,
``test_threat_model_proof.py``): an
authenticating upstream (``auth_upstream.py``) reached directly or through gateway
replicas on one shared store (:func:`open_bed`), A (the unmodified mcp client, token
``tok-a``) in the middle of its ``delete_files`` call (:func:`alice`), and B, who knows
A's session id and sends raw HTTP (:func:`b_post`, :func:`b_get`, :func:`b_answers`).

A run's outcome is one :class:`Seen`, compared whole with what its row expects: what B got
(a :class:`Reply`), whether B's request reached the upstream's inner server
(:func:`reached`), and A's :class:`Fate` (:func:`fate_expected`: nothing happened to A).

Every wait is on an observed event, guarded by :data:`STEP`, which only elapses when the
event never comes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
import pytest
from anyio.abc import TaskGroup
from auth_upstream import (
    FORBIDDEN_BODY,
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
B_PING: dict[str, Any] = {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"}
"""B's ``ping`` (its id marked, so :func:`reached` tells whether it got through)."""
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


@dataclass(frozen=True)
class Reply:
    """What B got: the status, a JSON body, and the prompts an event stream carried."""

    status: int
    body: Any = None
    prompts: tuple[str, ...] = ()


B_TOKENS = pytest.mark.parametrize(
    ("token", "refused"),
    [(None, Reply(401, UNAUTHORIZED_BODY)), (B_TOKEN, Reply(403, FORBIDDEN_BODY))],
    ids=["no-token", "own-token"],
)
"""B's two ways to come, for a test taking ``token`` and ``refused``: with no token (the
upstream refuses with ``401``) or with its own, another principal's (``403``)."""


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


def answer_of(request_id: Any, content: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": content}}


def reached(bed: Bed, marker: str) -> bool:
    """Whether a message that reached the upstream's inner server holds ``marker``."""
    return any(marker in json.dumps(p.message) for p in bed.upstream.auth.passed)
