"""``python -m fsm gateway`` as an operator runs it, a child process on 127.0.0.1: its one
line on stdout (the URL alone, once it serves; none from a start that fails), its
metrics on their own address, its JSON logs, and its stop on SIGTERM: no new
connection, the open streams drained within ``--drain-seconds``, exit 0.

The upstream is scripted in this process; what it sends next is set by the test. Each
wait is on an event (a line, an answer, the child's exit); the timeouts only stop a hang."""

from __future__ import annotations

import json
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway import cli  # noqa: E402
from fsm.gateway.ids import ENV_KEY  # noqa: E402
from fsm.wire.serving import serving  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"http://127\.0\.0\.1:\d+/mcp\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Child:
    """A gateway process: its stdout and stderr read line by line."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None and process.stderr is not None
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.stderr = BufferedByteReceiveStream(process.stderr)
        self.errors: list[str] = []

    async def line(self, stream: BufferedByteReceiveStream) -> str:
        with anyio.fail_after(scripted.GUARD):
            return (await stream.receive_until(b"\n", 1 << 16)).decode() + "\n"

    async def stderr_until(self, text: str) -> str:
        """Read stderr up to the line holding ``text`` (the lines kept in ``errors``)."""
        while True:
            got = await self.line(self.stderr)
            self.errors.append(got)
            if text in got:
                return got

    async def rest_of_stderr(self) -> list[str]:
        with anyio.fail_after(scripted.GUARD):
            rest = b""
            while True:
                try:
                    rest += await self.stderr.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    break
        return self.errors + rest.decode().splitlines(keepends=True)

    async def exit_code(self) -> int:
        with anyio.fail_after(scripted.GUARD):
            return await self.process.wait()


@asynccontextmanager
async def gateway_process(upstream: str, *options: str) -> AsyncIterator[Child]:
    """``python -m fsm gateway`` in front of ``upstream`` on a free port; killed at the
    end if it is still running."""
    argv = [sys.executable, "-m", "fsm", "gateway", "--upstream", upstream]
    argv += ["--listen", "127.0.0.1:0", *options]
    async with await anyio.open_process(argv, cwd=ROOT) as process:
        try:
            yield Child(process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def upstream_served(up: scripted.Upstream) -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        async with serving(up, sock, log_level="critical"):
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        sock.close()


def port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


async def refused(port: int) -> bool:
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return True
    await stream.aclose()
    return False


# --------------------------------------------------------------------------- stdout


async def test_the_line_is_the_url_alone_metrics_have_their_address_logs_are_json() -> None:
    """stdout is one line, the URL alone, printed once the gateway serves (a request
    right after it is answered); ``--metrics`` serves Prometheus text on its own address
    (``/metrics`` of the serving address is not it); ``--log-format json`` writes one JSON
    object a line on stderr. SIGTERM then stops it with status 0 and nothing more on
    stdout."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # never listens: the upstream refuses connections
    upstream = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
    metrics = free_port()
    try:
        options = ("--metrics", f"127.0.0.1:{metrics}", "--log-format", "json")
        async with (
            gateway_process(upstream, *options) as child,
            httpx2.AsyncClient(timeout=scripted.GUARD) as http,
        ):
            line = await child.line(child.stdout)
            assert URL_LINE.fullmatch(line), line
            url = line.strip()
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            r = await http.post(url, json=ping, headers=scripted.HEAD)
            assert r.status_code == 502 and r.json()["id"] == 3
            scraped = await http.get(f"http://127.0.0.1:{metrics}/metrics")
            assert scraped.status_code == 200
            assert 'fsm_gateway_upstream_errors_total{kind="connect"} 1.0' in scraped.text
            assert "fsm_gateway_sessions 0.0" in scraped.text
            assert (await http.get(url.replace("/mcp", "/metrics"))).status_code == 404
            child.process.send_signal(signal.SIGTERM)
            assert await child.exit_code() == 0
            lines = await child.rest_of_stderr()
            rest = b""
            with pytest.raises((anyio.EndOfStream, anyio.ClosedResourceError)):
                rest += await child.stdout.receive()
            assert rest == b""
    finally:
        closed.close()
    logged = [json.loads(text) for text in lines if text.strip()]
    assert logged and all({"time", "level", "logger", "message"} <= set(e) for e in logged)
    assert any("upstream request failed" in e["message"] for e in logged)


def test_a_start_that_fails_prints_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Redis down at start: exit 1, and no line on stdout (a reader waiting for the URL
    must not be told the gateway serves)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    try:
        redis = f"redis://127.0.0.1:{closed.getsockname()[1]}/0"
        argv = ["--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0"]
        assert cli.main([*argv, "--store", redis], {ENV_KEY: "k" * 40}) == 1
    finally:
        closed.close()
    assert capsys.readouterr().out == ""


def test_a_metrics_address_in_use_exits_1_before_the_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        argv = ["--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0"]
        assert cli.main([*argv, "--metrics", f"127.0.0.1:{port}"]) == 1
    finally:
        taken.close()
    out, err = capsys.readouterr()
    assert out == "" and "cannot serve metrics" in err


# --------------------------------------------------------------------------- SIGTERM


@asynccontextmanager
async def _draining_gateway(
    up: scripted.Upstream, seconds: str
) -> AsyncIterator[tuple[Any, httpx2.AsyncClient]]:
    """A gateway process with ``--drain-seconds seconds`` in front of ``up``, and an HTTP
    client for it."""
    async with (
        upstream_served(up) as upstream,
        gateway_process(upstream, "--drain-seconds", seconds) as child,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        yield child, http


@asynccontextmanager
async def _a_call_under_way(
    child: Any, http: httpx2.AsyncClient
) -> AsyncIterator[tuple[str, AsyncIterator[bytes], list[tuple[str | None, str]]]]:
    """A session opened through ``child``'s URL and a call streaming in it: the URL, the
    rest of the call's body, and the events of its first piece."""
    url = (await child.line(child.stdout)).strip()
    await scripted.initialize(http, url)
    h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
    async with http.stream("POST", url, json=scripted.CALL, headers=h) as stream:
        pieces = stream.aiter_raw()
        with anyio.fail_after(scripted.GUARD):
            got = scripted.parse(await pieces.__anext__())
        yield url, pieces, got


async def test_sigterm_lets_a_stream_finish_within_the_drain() -> None:
    """SIGTERM with a call's stream open: no new connection is taken, the stream goes on
    (its result arrives when the upstream sends it), then the process exits 0."""
    finish = anyio.Event()
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), finish, scripted.sse("e2", scripted.result(7))]
    )
    async with _draining_gateway(up, "60") as (child, http):
        async with _a_call_under_way(child, http) as (url, pieces, got):
            child.process.send_signal(signal.SIGTERM)
            await child.stderr_until("draining")
            assert await refused(port_of(url))
            finish.set()
            with anyio.fail_after(scripted.GUARD):
                got += scripted.parse(b"".join([piece async for piece in pieces]))
        assert [json.loads(d) for _, d in got] == [scripted.PROGRESS, scripted.result(7)]
        assert await child.exit_code() == 0


async def test_sigterm_ends_a_stream_that_outlasts_the_drain_and_exits_0() -> None:
    """SIGTERM with a call's stream the upstream never ends, ``--drain-seconds 1``: once
    the bound passes the stream is ended after its last whole event (a clean end: the
    client resumes elsewhere from there), and the process exits 0."""
    hold = anyio.Event()  # never set
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.PROGRESS)], hold=hold)
    async with _draining_gateway(up, "1") as (child, http):
        async with _a_call_under_way(child, http) as (_url, pieces, got):
            child.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(scripted.GUARD):
                got += scripted.parse(
                    b"".join([piece async for piece in pieces])
                )  # no error: clean
        assert [json.loads(d) for _, d in got] == [scripted.PROGRESS]
        assert await child.exit_code() == 0
        assert any("1 requests ended by the bound" in e for e in await child.rest_of_stderr())
