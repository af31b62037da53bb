"""What one gateway replica adds to the time a request takes to reach the upstream, and
whether a session's standalone ``GET`` is attached before the client's next request.

``python -m bench.gateway_forwarding`` prints two tables and records their figures
(``gateway_forwarding_*``) in ``bench/results.json``. It is not a ``*_bench`` module:
``python -m bench`` does not run it. Every process is its own, as in
:mod:`bench.gateway_bench`: the upstream (:func:`upstream_app`), a replica (``python -m
fsm gateway``, memory store), a second replica with ``--standalone-hold 0``, and the
clients in this process.

* **delay**: ``GATEWAY_FORWARDING_SAMPLES`` (300) requests one after another per kind and
  target, on one session each, over a kept-alive connection: a ``ping`` ``POST`` and a
  fresh standalone ``GET``. The delay of one is the upstream's clock when its request
  arrived (``time.monotonic_ns``, sent back in the ``x-arrived-ns`` header; one clock for
  every process of the machine) less this process's clock just before the request was
  written. Reported: p50 and p99 direct and through the replica, and the difference (what
  the replica adds). The ``GET`` through the replica is one it forwards: each session's
  first ``GET`` takes the one the replica opened ahead, so it is not sampled.
* **race**: ``GATEWAY_FORWARDING_RACES`` (100) sessions per target. After its
  ``notifications/initialized`` is answered, a client writes a fresh ``GET`` and then a
  ``POST`` on two connections it opened before (the order of the TypeScript SDK's
  client: the ``GET`` first). The upstream answers the ``POST`` with whether a ``GET`` of
  its session had arrived by then (``x-get-attached``); a server that drops what it
  sends while no ``GET`` is attached loses a request in each round counted ``POST
  first``. Targets: direct, the replica, the replica with ``--standalone-hold 0`` (no
  ``GET`` opened ahead).

Environment: ``GATEWAY_FORWARDING_SAMPLES``, ``GATEWAY_FORWARDING_RACES``. The smoke test
(tests/e2e/test_gateway_forwarding_smoke.py) runs it at toy size. Child process: ``python
-m bench.gateway_forwarding upstream``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from bench.gateway_bench import child, replica_process
from bench.gateway_soak import _serve_forever, pct
from bench.results import env_int, record, run_quietly, table

SAMPLES = env_int("GATEWAY_FORWARDING_SAMPLES", 300)
RACES = env_int("GATEWAY_FORWARDING_RACES", 100)
PROTOCOL = "2025-11-25"
KINDS = ("POST", "GET")
TARGETS = ("direct", "gateway", "gateway, no GET ahead")
_HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

_attached: set[str] = set()
"""Sessions a ``GET`` arrived for (the upstream process's own)."""


async def upstream_app(scope: Mapping[str, Any], receive: Any, send: Any) -> None:
    """The upstream (ASGI): every response carries ``x-arrived-ns`` (when its request
    arrived); ``initialize`` answered as JSON with a new session id; a request ``POST``
    answered with an empty result on an SSE stream, with ``x-get-attached`` (``1`` if a
    ``GET`` of its session arrived before it); a ``GET`` with ``200``, an SSE comment, and
    the stream held until the client leaves; anything else ``202``."""
    from fsm.wire.serving import lifespan, whole_body

    arrived = str(time.monotonic_ns()).encode()
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    headers = dict(scope["headers"])
    sid = headers.get(b"mcp-session-id", b"").decode()
    sse = [(b"content-type", b"text/event-stream"), (b"x-arrived-ns", arrived)]
    if scope["method"] == "GET":
        _attached.add(sid)
        await send({"type": "http.response.start", "status": 200, "headers": sse})
        await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        return
    body = await whole_body(receive)
    msg = json.loads(body) if body else None
    if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
        await _reply(send, 202, b"", [(b"x-arrived-ns", arrived)])
        return
    if msg["method"] == "initialize":
        result = {"protocolVersion": PROTOCOL, "capabilities": {}, "serverInfo": {"name": "f"}}
        out = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        head = [(b"content-type", b"application/json"), (b"x-arrived-ns", arrived)]
        await _reply(send, 200, out, [*head, (b"mcp-session-id", os.urandom(8).hex().encode())])
        return
    flag = b"1" if sid in _attached else b"0"
    pong = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
    event = f"id: r{msg['id']}\ndata: {pong}\n\n".encode()
    await _reply(send, 200, event, [*sse, (b"x-get-attached", flag)])


async def _reply(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def upstream() -> None:
    """``python -m bench.gateway_forwarding upstream``: :func:`upstream_app` on 127.0.0.1;
    prints ``serving <url>``, serves until ``SIGTERM``."""
    run_quietly(_serve_forever, upstream_app)


# --------------------------------------------------------------------------- measuring


@dataclass
class Forwarding:
    """What the two parts measured."""

    delays: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """Milliseconds per (kind, target)."""
    races: dict[str, list[bool]] = field(default_factory=dict)
    """Per target, one per round: whether the ``POST`` reached the upstream first."""
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def p(self, kind: str, target: str, q: float) -> float:
        return pct(self.delays[(kind, target)], q)


async def _session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A new session (``initialize``, ``notifications/initialized``): its headers."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    resp = await http.post(url, content=json.dumps(init), headers=_HEAD)
    resp.raise_for_status()
    headers = {**_HEAD, "mcp-session-id": resp.headers["mcp-session-id"]}
    headers["mcp-protocol-version"] = PROTOCOL
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await http.post(url, content=json.dumps(note), headers=headers)).raise_for_status()
    return headers


async def _delays(url: str, kind: str, samples: int, skip_first_get: bool) -> list[float]:
    """``samples`` requests of ``kind``, one after another: each one's delay (ms)."""
    out = []
    async with httpx2.AsyncClient(timeout=30) as http:
        headers = await _session(http, url)
        get = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        if kind == "GET" and skip_first_get:  # takes the GET the replica opened ahead
            async with http.stream("GET", url, headers=get):
                pass
        for n in range(samples):
            ping = json.dumps({"jsonrpc": "2.0", "id": n + 1, "method": "ping"})
            started = time.monotonic_ns()
            if kind == "POST":
                resp = await http.post(url, content=ping, headers=headers)
                arrived = resp.headers["x-arrived-ns"]
            else:
                async with http.stream("GET", url, headers=get) as resp:
                    arrived = resp.headers["x-arrived-ns"]
            out.append((int(arrived) - started) / 1e6)
    return out


async def _race(url: str) -> bool:
    """One round of the race part: whether the ``POST`` reached the upstream first."""
    async with httpx2.AsyncClient(timeout=30) as http:
        headers = await _session(http, url)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    (ga, gw), (pa, pw) = [await asyncio.open_connection(host, port) for _ in range(2)]
    try:
        common = f"Host: {host}:{port}\r\nmcp-session-id: {headers['mcp-session-id']}\r\n"
        common += f"mcp-protocol-version: {PROTOCOL}\r\n"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})
        gw.write(f"GET {parts.path} HTTP/1.1\r\n{common}accept: text/event-stream\r\n\r\n".encode())
        pw.write(
            f"POST {parts.path} HTTP/1.1\r\n{common}accept: application/json, text/event-stream"
            f"\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}"
            .encode()
        )  # fmt: skip
        head = await asyncio.wait_for(pa.readuntil(b"\r\n\r\n"), 30)
        await asyncio.wait_for(ga.readuntil(b"\r\n\r\n"), 30)
    finally:
        for writer in (gw, pw):
            writer.close()
    return b"x-get-attached: 0" in head.lower()


async def _races(url: str, rounds: int) -> list[bool]:
    return [await _race(url) for _ in range(rounds)]


@contextlib.contextmanager
def _deployment() -> Iterator[dict[str, str]]:
    with (
        child("upstream", [sys.executable, "-m", "bench.gateway_forwarding", "upstream"]) as up,
        replica_process(up.url) as gw,
        replica_process(up.url, options=["--standalone-hold", "0"]) as plain,
    ):
        yield dict(zip(TARGETS, (up.url, gw.url, plain.url), strict=True))


def forwarding(samples: int = SAMPLES, races: int = RACES) -> Forwarding:
    """Both parts (see the module docstring)."""
    got = Forwarding(load=os.getloadavg())
    with _deployment() as urls:
        for kind in KINDS:
            for target in TARGETS[:2]:
                ahead = target == "gateway"
                got.delays[(kind, target)] = run_quietly(
                    _delays, urls[target], kind, samples, ahead
                )
        for target, url in urls.items():
            got.races[target] = run_quietly(_races, url, races)
    return got


def render(got: Forwarding) -> None:
    rows = []
    for kind in KINDS:
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            direct, via = got.p(kind, "direct", q), got.p(kind, "gateway", q)
            rows.append((kind, name, round(direct, 3), round(via, 3), round(via - direct, 3)))
    table(rows, header=("to the upstream", "", "direct ms", "gateway ms", "added ms"))
    table(
        [(t, len(r), sum(r)) for t, r in got.races.items()],
        header=("GET then POST after initialized", "rounds", "POST first"),
    )
    print("load average at the start: " + " ".join(f"{x:.2f}" for x in got.load))


def keep(got: Forwarding) -> None:
    for kind in KINDS:
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            direct, via = got.p(kind, "direct", q), got.p(kind, "gateway", q)
            tag = f"gateway_forwarding_{kind.lower()}_{name}"
            record(f"{tag}_direct_ms", round(direct, 3), "ms")
            record(f"{tag}_gateway_ms", round(via, 3), "ms")
            record(f"{tag}_added_ms", round(via - direct, 3), "ms")
    for target, rounds in got.races.items():
        tag = target.replace(",", "").replace(" ", "_").lower()
        record(f"gateway_forwarding_race_post_first_{tag}", sum(rounds), "rounds")
    record("gateway_forwarding_race_rounds", len(next(iter(got.races.values()))), "rounds")


def main() -> None:
    got = forwarding()
    render(got)
    keep(got)


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        upstream()
    else:
        main()
