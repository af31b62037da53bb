"""The official MCP TypeScript SDK clients, driven from Python (needs ``node`` and ``npm``).

``tests/ts_client/`` is a small Node project pinning both SDK lines (:data:`SDK_PACKAGES`):
``@modelcontextprotocol/sdk`` (v1) and ``@modelcontextprotocol/client`` (v2; different
names, so one project and one lock hold both). Its ``client.mjs`` connects the
chosen line's ``Client`` + ``StreamableHTTPClientTransport`` to a URL (``sdk="v1"`` or
``"v2"`` on every function here; v1 by default), declares
the form elicitation capability and speaks JSON Lines on stdin/stdout: it prints one object
per event (``presented`` for *every* elicitation the SDK hands its handler, ``result`` /
``error`` per call, ``http`` per HTTP exchange, ``resumption`` per SSE event id of a call's
stream, ``diagnostic`` for the SDK's ``onerror``) and reads commands (answer presentation
``n``, start a call, close). The script's header comment is the protocol's reference.

- :func:`open_ts_client` starts the script (``anyio.open_process``) and yields a
  :class:`TsClient`: every printed line is kept in :attr:`TsClient.lines`; waits take a
  safety timeout; the process is closed (then killed) on exit.
- :func:`ts_scenario_client` is a :data:`~fsm.wire.rig.ClientFactory`: the
  scenarios of :mod:`support.scenarios` run the TypeScript client unchanged (each
  ``presented`` line goes to ``env.on_present``, a ``withdrawn`` one cancels it).
- :func:`ts_seed_run` runs the seed incident with it against any URL (the rig's proxy by
  default, or something in front of it) and returns a :class:`TsSeedRun`.

Install: ``make ts-client`` (``npm ci --prefix tests/ts_client``; ``make test`` does it when
``node_modules`` is missing or older than the lock). Missing ``node`` or a missing install
raise :class:`TsClientUnavailable` saying so. Both live in the checkout's
``tests/``, not in the wheel. The client never uses
``env.http_client``: it is another process with its own HTTP stack. asyncio or trio alike;
the scenarios need asyncio (uvicorn and the proxy).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from fsm.wire.rig import (
    ClientEnv,
    ClientFactory,
    Outcome,
    PresentationRequest,
    Rig,
    ScenarioClient,
    ScenarioResult,
    open_rig,
    run_scenario,
)
from fsm.wire.scenarios import seed
from support.changes import Changes

__all__ = [
    "SDK_LINES",
    "SDK_PACKAGES",
    "TS_CLIENT_DIR",
    "SdkLine",
    "TsCallError",
    "TsClient",
    "TsClientUnavailable",
    "TsSeedRun",
    "TsToolResult",
    "open_ts_client",
    "ts_scenario_client",
    "ts_seed_run",
]

TS_CLIENT_DIR = Path(__file__).resolve().parents[1] / "ts_client"
"""The Node project (``package.json``, ``package-lock.json``, ``client.mjs``) in a checkout."""

SdkLine = Literal["v1", "v2"]
"""A line of the TypeScript SDK: ``client.mjs --sdk v1|v2``."""

SDK_PACKAGES: Mapping[SdkLine, str] = {
    "v1": "@modelcontextprotocol/sdk",
    "v2": "@modelcontextprotocol/client",
}
"""The npm package of each line's client, as pinned in ``package.json``."""

SDK_LINES: tuple[SdkLine, ...] = ("v1", "v2")
INSTALL_HINT = "run `make ts-client` (npm ci --prefix tests/ts_client)"
MAX_LINE = 4 * 1024 * 1024

Event = dict[str, Any]


class TsClientUnavailable(RuntimeError):
    """``node`` is not on ``PATH``, or the Node project is not installed (the message says
    what to run)."""


class TsCallError(Exception):
    """A call the TypeScript client reported as failed (its ``error`` line): ``code`` is the
    JSON-RPC error code when the SDK gave one (``None`` for transport errors)."""

    def __init__(self, code: int | None, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass(frozen=True)
class TsText:
    """One content block of a tool result (``text`` empty for non-text blocks)."""

    text: str


@dataclass(frozen=True)
class TsToolResult:
    """A tool result as the TypeScript client printed it; shaped like ``CallToolResult``
    where :class:`~fsm.wire.rig.Outcome` reads it (``content[].text``,
    ``is_error``)."""

    content: list[TsText]
    is_error: bool
    raw: Mapping[str, Any]

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> TsToolResult:
        blocks = result.get("content") or []
        texts = [TsText(str(b.get("text", ""))) for b in blocks if isinstance(b, dict)]
        return cls(texts, bool(result.get("isError", False)), result)


def _check_installed(project: Path, sdk: SdkLine) -> str:
    node = shutil.which("node")
    if node is None:
        raise TsClientUnavailable(f"`node` is not on PATH (Node.js 20+); then {INSTALL_HINT}")
    package = SDK_PACKAGES[sdk]
    if not (project / "client.mjs").is_file():
        raise TsClientUnavailable(f"no TypeScript client at {project} (a checkout is needed)")
    if not (project / "node_modules" / package / "package.json").is_file():
        raise TsClientUnavailable(f"{package} is not installed in {project}: {INSTALL_HINT}")
    return node


class TsClient:
    """A running ``client.mjs`` (see the module docstring); use :func:`open_ts_client`.

    :attr:`lines` holds every line it printed, parsed, in order (a line that is not a JSON
    object is kept as ``{"event": "unparsed", "text": ...}``); :attr:`stderr` its standard
    error. Every ``wait_*`` raises ``TimeoutError`` after ``timeout`` seconds, or
    :class:`EOFError` once the process ended without the awaited line.
    """

    def __init__(self, process: Process) -> None:
        self.process = process
        self.lines: list[Event] = []
        self.stderr = bytearray()
        self.ended = False
        self._changes = Changes()
        self._calls = itertools.count(1)

    def events(self, kind: str) -> list[Event]:
        """The printed lines whose ``event`` is ``kind``, in order."""
        return [e for e in self.lines if e.get("event") == kind]

    @property
    def presented(self) -> list[Event]:
        """Every ``presented`` line (one per elicitation handed to the handler)."""
        return self.events("presented")

    async def wait_line(
        self, predicate: Callable[[Event], bool], timeout: float | None = 10.0, after: int = 0
    ) -> tuple[int, Event]:
        """The first line at index ``>= after`` matching ``predicate`` (past or future), with
        its index in :attr:`lines`."""
        with anyio.fail_after(timeout):
            while True:
                for i in range(after, len(self.lines)):
                    if predicate(self.lines[i]):
                        return i, self.lines[i]
                if self.ended:
                    raise EOFError(f"client.mjs exited; stderr: {self.stderr.decode()[-2000:]}")
                await self._changes.next()

    async def wait_count(
        self, predicate: Callable[[Event], bool], count: int, timeout: float = 10.0
    ) -> list[Event]:
        """Wait until ``count`` lines match ``predicate``; returns the first ``count``."""
        found: list[Event] = []
        index = 0
        while len(found) < count:
            index, line = await self.wait_line(predicate, timeout, index)
            found.append(line)
            index += 1
        return found

    async def wait_presented(self, count: int, timeout: float = 10.0) -> Event:
        """Wait until ``count`` presentations were printed; returns the ``count``-th."""
        return (await self.wait_count(lambda e: e.get("event") == "presented", count, timeout))[-1]

    async def wait_outcome(self, call_id: str, timeout: float = 10.0) -> Event:
        """The ``result`` or ``error`` line of call ``call_id``."""
        _, line = await self.wait_line(
            lambda e: e.get("event") in ("result", "error") and e.get("id") == call_id, timeout
        )
        return line

    # -- commands
    async def send(self, command: Mapping[str, Any]) -> None:
        """Write one command line (see the script's header for the commands)."""
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(command).encode() + b"\n")

    async def answer(
        self,
        n: int | None,
        action: Literal["accept", "decline", "cancel"],
        content: Mapping[str, Any] | None = None,
    ) -> None:
        """Answer presentation ``n`` (``None``: the oldest one still open)."""
        command: dict[str, Any] = {"answer": action}
        if n is not None:
            command["n"] = n
        if content is not None:
            command["content"] = dict(content)
        await self.send(command)

    async def start_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Start a tool call; returns its id (for :meth:`wait_outcome`)."""
        call_id = f"c{next(self._calls)}"
        await self.send({"call": name, "arguments": dict(arguments), "id": call_id})
        return call_id

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], timeout: float = 60.0
    ) -> TsToolResult:
        """Call a tool and wait for its outcome: the result, or :class:`TsCallError`."""
        line = await self.wait_outcome(await self.start_call(name, arguments), timeout)
        if line["event"] == "error":
            raise TsCallError(line.get("code"), str(line.get("message")), line.get("data"))
        return TsToolResult.of(line["result"])

    # -- plumbing
    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        stream = BufferedByteReceiveStream(self.process.stdout)
        try:
            while True:
                raw = await stream.receive_until(b"\n", MAX_LINE)
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    parsed = {"event": "unparsed", "text": raw.decode(errors="replace")}
                self.lines.append(parsed)
                self._changes.note()
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            pass
        finally:
            self.ended = True
            self._changes.note()

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            async for chunk in self.process.stderr:
                if len(self.stderr) < MAX_LINE:
                    self.stderr += chunk


@contextlib.asynccontextmanager
async def open_ts_client(
    url: str,
    tool: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    *,
    request_timeout_ms: int = 60_000,
    max_retries: int = 2,
    reconnection_delay_ms: tuple[int, int] = (50, 500),
    sdk: SdkLine = "v1",
    project: Path = TS_CLIENT_DIR,
    close_timeout: float = 5.0,
) -> AsyncIterator[TsClient]:
    """Run ``client.mjs`` against ``url`` (loopback only; the script refuses others).

    With ``tool`` it calls it at once (call id ``"0"``) and exits after that call ended.
    ``max_retries`` and ``reconnection_delay_ms`` (initial, maximum) are the transport's
    ``reconnectionOptions`` (a server's SSE ``retry:`` overrides the delay, as the SDK does);
    ``request_timeout_ms`` is the SDK's per-request timeout; ``sdk`` the line
    (:data:`SDK_PACKAGES`). On exit the client is told to
    close; after ``close_timeout`` seconds it is killed. Raises :class:`TsClientUnavailable`
    when ``node`` or the installed project is missing.
    """
    node = _check_installed(project, sdk)
    argv = [node, str(project / "client.mjs"), url, "--sdk", sdk]
    if tool is not None:
        argv += [tool, json.dumps(dict(arguments or {}))]
    initial, maximum = reconnection_delay_ms
    argv += [
        "--request-timeout-ms", str(request_timeout_ms),
        "--max-retries", str(max_retries),
        "--initial-reconnection-delay-ms", str(initial),
        "--max-reconnection-delay-ms", str(maximum),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTTP_PROXY", "HTTPS_PROXY"))}
    async with await anyio.open_process(argv, cwd=project, env=env) as process:
        client = TsClient(process)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client._read_stdout)
                tg.start_soon(client._read_stderr)
                try:
                    yield client
                finally:
                    with anyio.CancelScope(shield=True):
                        await _close(client, close_timeout)
        finally:
            if process.returncode is None:
                process.kill()


async def _close(client: TsClient, timeout: float) -> None:
    with contextlib.suppress(Exception):
        await client.send({"close": True})
    with anyio.move_on_after(timeout):
        await client.process.wait()
        return
    client.process.kill()
    await client.process.wait()


# --------------------------------------------------------------------------- scenarios


class _TsScenarioClient:
    """A :class:`~fsm.wire.rig.ScenarioClient` backed by a :class:`TsClient`."""

    def __init__(self, ts: TsClient) -> None:
        self.ts = ts

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> TsToolResult:
        return await self.ts.call_tool(name, arguments)


async def _present_all(ts: TsClient, env: ClientEnv, tg: TaskGroup) -> None:
    """Hand every ``presented`` line to ``env.on_present`` (each in its own task) and send
    back its answer; a ``withdrawn`` line cancels that presentation's task."""
    scopes: dict[int, anyio.CancelScope] = {}
    withdrawn: set[int] = set()

    async def present(line: Event) -> None:
        n = int(line["n"])
        with anyio.CancelScope() as scope:
            scopes[n] = scope
            if n in withdrawn:
                scope.cancel()
            request = PresentationRequest(
                line.get("sessionId") or env.session_id(),
                line["requestId"],
                str(line.get("message", "")),
                line.get("requestedSchema"),
            )
            answer = await env.on_present(request)
            await ts.answer(n, answer.action, answer.content)

    index = 0
    while True:
        try:
            index, line = await ts.wait_line(
                lambda e: e.get("event") in ("presented", "withdrawn"), None, index
            )
        except EOFError:
            return
        index += 1
        n = int(line["n"])
        if line["event"] == "presented":
            tg.start_soon(present, line)
        elif n in scopes:
            scopes[n].cancel()
        else:
            withdrawn.add(n)


def ts_scenario_client(
    url: str | None = None, *, sink: list[TsClient] | None = None, **options: Any
) -> ClientFactory:
    """A client factory running the TypeScript client (see :mod:`fsm.wire.rig`).

    ``url`` replaces ``env.url`` (e.g. a gateway in front of the rig's proxy); ``options``
    go to :func:`open_ts_client`; each started :class:`TsClient` is appended to ``sink``
    (to read its printed lines afterwards). ``list_tools`` is not offered, so the
    ``session_expired`` scenario's probe records an ``AttributeError``.
    """

    @contextlib.asynccontextmanager
    async def factory(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
        async with open_ts_client(url or env.url, **options) as ts:
            if sink is not None:
                sink.append(ts)
            await ts.wait_line(lambda e: e.get("event") in ("connected", "error"))
            if ts.events("error"):
                raise TsCallError(None, f"connect failed: {ts.events('error')[0]}")
            async with anyio.create_task_group() as tg:
                tg.start_soon(_present_all, ts, env, tg)
                yield _TsScenarioClient(ts)
                tg.cancel_scope.cancel()

    return factory


@dataclass(frozen=True)
class TsSeedRun:
    """The seed incident run with the TypeScript client.

    ``presentations``: elicitations the client presented (every one counts);
    ``resume_gets``: GETs with ``Last-Event-ID`` the rig's proxy saw; ``outcome``: how the
    ``delete_files`` call ended; ``result``: the whole scenario record; ``lines``: what the
    client printed.
    """

    presentations: int
    resume_gets: int
    outcome: Outcome
    result: ScenarioResult
    lines: list[Event] = field(default_factory=list)


async def ts_seed_run(
    rig: Rig | None = None, *, url: str | None = None, timeout: float = 30.0, **options: Any
) -> TsSeedRun:
    """Run the ``seed`` scenario (:mod:`fsm.wire.scenarios`) with the TypeScript client.

    ``rig``: the server and fault proxy to drive (a fresh :func:`open_rig` by default;
    :func:`support.scenarios.open_rig` with ``gateway=...`` puts a gateway between the
    proxy and the server); ``url``:
    where the client connects (default the rig's proxy; e.g. a gateway in front of it).
    ``options`` go to :func:`open_ts_client`.
    """
    sink: list[TsClient] = []
    factory = ts_scenario_client(url, sink=sink, **options)
    async with contextlib.AsyncExitStack() as stack:
        if rig is None:
            rig = await stack.enter_async_context(open_rig())
        result = await run_scenario(seed, factory, rig=rig, timeout=timeout)
    lines = [line for ts in sink for line in ts.lines]
    return TsSeedRun(len(result.presentations), len(result.resumes), result.outcome, result, lines)
