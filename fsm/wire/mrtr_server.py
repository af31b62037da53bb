"""A real mcp 2.3.0 server in protocol 2026-07-28 mode, for MRTR end-to-end tests and
the demo's second scene.

``MCPServer`` served over streamable HTTP on 127.0.0.1 (ephemeral port, uvicorn, this
event loop). A 2026-era client (``Client(url)``, ``mode="auto"``) talks to it without
``initialize`` or session ids; its tools ask through ``InputRequiredResult`` rounds and
the SDK's own middleware seals every ``requestState`` (AES-GCM, TTL per round) and
rejects what it cannot verify with JSON-RPC -32602 ``"Invalid or expired requestState"``,
``data.reason: "invalid_request_state"``. Faults are explicit commands, never sleeps:

* :meth:`MrtrServer.expire_states`: every state minted so far is past its TTL from now
  on (the codec refuses it as the SDK's own TTL check would; the configured wall-clock
  TTL, ``ttl``, stays in force as well);
* :meth:`MrtrServer.restart`: uvicorn stops and a fresh ``MCPServer`` with a fresh
  process-local key starts on the same port (what a redeploy does to
  ``RequestStateSecurity.ephemeral()``: state minted before is unverifiable).

Tools (each records what it was asked and told in :class:`MrtrLog`):

* ``delete_files(count)``: asks "Delete <count> files?" once; with the answer in
  ``inputResponses`` it completes (``Deleted <count> files`` or ``Kept <count> files``);
* ``reasking_delete(count, reasks)``: asks the same question again ``reasks`` times
  although answered (a re-asking tool: its answers do not stick), then completes;
* ``slow_job(polls)``: answers with state only ``polls`` times, then completes;
* ``survey(questions)``: asks ``questions`` distinct questions, one per round.

Limits: a test server. The state it seals is the tool's own small string (answers are
not carried across rounds: a re-ask starts the question afresh, as the SEP allows).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp import types
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from fsm.wire.serving import serving

__all__ = ["ExpiringCodec", "MrtrLog", "MrtrServer", "build_mrtr_server", "running_mrtr_server"]


class ExpiringCodec:
    """The SDK's AES-GCM codec under a fresh key, plus an explicit expiry switch.

    Tokens carry the generation they were minted in; :meth:`expire` makes every token
    minted so far fail to unseal (``InvalidRequestState("expired")``), exactly the
    rejection a lapsed TTL gets, without waiting for the wall clock.
    """

    def __init__(self) -> None:
        self._inner = AESGCMRequestStateCodec([os.urandom(32)])
        self._generation = 0
        self._oldest_valid = 0

    def expire(self) -> None:
        """Every token minted so far is expired from now on."""
        self._generation += 1
        self._oldest_valid = self._generation

    def seal(self, payload: bytes) -> str:
        return f"g{self._generation}.{self._inner.seal(payload)}"

    def unseal(self, token: str) -> bytes:
        generation, _, inner = token.partition(".")
        if not generation.startswith("g") or not generation[1:].isdigit():
            raise InvalidRequestState("malformed")
        if int(generation[1:]) < self._oldest_valid:
            raise InvalidRequestState("expired")
        return self._inner.unseal(inner)


@dataclass
class MrtrLog:
    """What the server saw: per tool, the rounds it asked and the answers it got."""

    asked: dict[str, int] = field(default_factory=dict)
    answers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)

    def ask(self, tool: str) -> None:
        self.asked[tool] = self.asked.get(tool, 0) + 1


def _confirm(count: int, message: str = "") -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=message or f"Delete {count} files?",
            requested_schema={"type": "object", "properties": {}},
        )
    )


def _answer(ctx: Context) -> dict[str, Any] | None:
    answer = (ctx.input_responses or {}).get("confirm")
    if answer is None:
        return None
    dumped: dict[str, Any] = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def build_mrtr_server(log: MrtrLog, codec: ExpiringCodec, *, ttl: float) -> MCPServer:
    """The test server's tools, sealing with ``codec`` under a ``ttl``-second TTL."""
    server = MCPServer(
        "mrtr-harness", request_state_security=RequestStateSecurity(codec=codec, ttl=ttl)
    )

    @server.tool()
    async def delete_files(count: int, ctx: Context) -> str | types.InputRequiredResult:
        answer = _answer(ctx)
        if answer is None:
            log.ask("delete_files")
            return types.InputRequiredResult(
                input_requests={"confirm": _confirm(count)}, request_state="asked"
            )
        log.answers.append(("delete_files", answer))
        verdict = "Deleted" if answer.get("action") == "accept" else "Kept"
        log.completed.append("delete_files")
        return f"{verdict} {count} files"

    @server.tool()
    async def reasking_delete(
        count: int, reasks: int, ctx: Context
    ) -> str | types.InputRequiredResult:
        answer = _answer(ctx)
        seen = int((ctx.request_state or "0").removeprefix("answers:") or 0)
        if answer is not None:
            log.answers.append(("reasking_delete", answer))
            seen += 1
            if seen > reasks:
                log.completed.append("reasking_delete")
                return f"Deleted {count} files after {seen} answers"
        log.ask("reasking_delete")
        return types.InputRequiredResult(
            input_requests={"confirm": _confirm(count)}, request_state=f"answers:{seen}"
        )

    @server.tool()
    async def survey(questions: int, ctx: Context) -> str | types.InputRequiredResult:
        answered = int(ctx.request_state or 0) + (_answer(ctx) is not None)
        if answered >= questions:
            log.completed.append("survey")
            return f"survey done: {answered} answers"
        log.ask("survey")
        message = f"Question {answered + 1} of {questions}?"
        return types.InputRequiredResult(
            input_requests={"confirm": _confirm(0, message)}, request_state=str(answered)
        )

    @server.tool()
    async def slow_job(polls: int, ctx: Context) -> str | types.InputRequiredResult:
        done = int((ctx.request_state or "poll:0").removeprefix("poll:"))
        if done < polls:
            log.ask("slow_job")
            return types.InputRequiredResult(request_state=f"poll:{done + 1}")
        log.completed.append("slow_job")
        return f"job done after {done} polls"

    return server


@dataclass
class MrtrServer:
    """A running MRTR test server: its URL, its log, and the two explicit faults."""

    url: str
    port: int
    log: MrtrLog
    ttl: float
    codec: ExpiringCodec
    restarts: int = 0
    _restart: anyio.Event = field(default_factory=anyio.Event)
    _ready: anyio.Event = field(default_factory=anyio.Event)

    def expire_states(self) -> None:
        """Every ``requestState`` minted so far is now past its TTL."""
        self.codec.expire()

    async def restart(self) -> None:
        """Stop the server and start a fresh one (fresh key) on the same port; returns
        once the new one accepts connections. Callable from any task."""
        self._ready = anyio.Event()
        self._restart.set()
        await self._ready.wait()

    async def _supervise(self, stop: anyio.Event) -> None:
        """Serve until ``stop``; on each restart request, a fresh server and key."""
        while not stop.is_set():
            async with _serving(build_mrtr_server(self.log, self.codec, ttl=self.ttl), self.port):
                self._ready.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_first, tg, stop.wait)
                    tg.start_soon(_first, tg, self._restart.wait)
            if self._restart.is_set():
                self._restart = anyio.Event()
                self.codec = ExpiringCodec()
                self.restarts += 1


async def _first(tg: anyio.abc.TaskGroup, wait: Callable[[], Awaitable[Any]]) -> None:
    await wait()
    tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _serving(server: MCPServer, port: int) -> AsyncIterator[None]:
    """Serve ``server`` on 127.0.0.1:``port`` until the block exits."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    try:
        async with serving(server.streamable_http_app(), sock, shutdown_timeout=1):
            yield
    finally:
        sock.close()


@contextlib.asynccontextmanager
async def running_mrtr_server(*, ttl: float = 5.0) -> AsyncIterator[MrtrServer]:
    """Run the MRTR test server on an ephemeral port; yields a :class:`MrtrServer`."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    handle = MrtrServer(f"http://127.0.0.1:{port}/mcp", port, MrtrLog(), ttl, ExpiringCodec())
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(handle._supervise, stop)
        await handle._ready.wait()
        try:
            yield handle
        finally:
            stop.set()
