"""The guarding gateway held under load for a minute, losing a replica, and carrying an event
of the size bound while other sessions ask it for round trips.

``python -m bench.gateway_soak`` runs four parts (``python -m bench.gateway_soak soak
latency`` only the named ones), prints a table per part and records its figures
(``gateway_soak_*``, ``gateway_failover_*``, ``gateway_latency_*``) in
``bench/results.json``. It is not a ``*_bench`` module: ``python -m bench`` does not run it
(the full sizes take some ten minutes). Every part runs its own processes, as
:mod:`bench.gateway_bench` does (the clients in this process; the server, each replica,
Redis in their own), and every load loop is bounded in count and in time.

* **soak**: ``GATEWAY_SOAK_SESSIONS`` (500) sessions of the unmodified mcp client at once
  through one replica (``--store memory``) for ``GATEWAY_SOAK_SECONDS`` (60). The sessions
  start evenly over ``GATEWAY_SOAK_RAMP`` seconds (a fifth of the run by default); each
  calls ``work(GATEWAY_SOAK_EVENTS)`` (10: one elicitation, answered at once by the
  client's callback, then that many progress events) again and again until the time is
  up, then closes (a ``DELETE``). Reported: sessions opened, calls completed, errors (a
  session that failed to open, a call that raised, timed out, lost an event or returned
  the wrong text, a close that failed; must be 0), double presentations (how many times
  each (session, elicitation request id) reached the client's callback; must be 1
  each), the replica's resident memory (``VmRSS``) sampled every few seconds, whether
  it is flat after the warm-up (until every session has made ``GATEWAY_SOAK_WARM_CALLS``
  calls, 16, as many as a session remembers of its past; the ``GATEWAY_SOAK_SECONDS``
  are measured from there: at most
  :data:`FLAT_GROWTH` growth from the first sample after it to the last), and the bytes
  the replica holds per open session (its RSS at the end of the warm-up less its RSS
  before the load, over the sessions). Then, in this process, one session through an
  in-process replica makes :data:`GROWTH_CALLS` calls: the bytes the replica holds for
  it at each checkpoint (:func:`held_growth`), which tell state bounded per session from
  state that grows with every call.
* **failover**: ``GATEWAY_SOAK_FAILOVER_SESSIONS`` (200) sessions on two replicas sharing
  a loopback ``redis-server`` (``--lease GATEWAY_SOAK_LEASE``, 3 s). Balancing is the
  client's: each client sends every request to its replica (half on each) and, once a
  connection to it is refused, to the other one for good (:class:`Sticky`; nothing is
  retried that reached a replica). Each session calls ``paced``: the server asks one
  elicitation, then sends :data:`PACED_EVENTS` progress events :data:`PACE_S` apart. Once
  every prompt has reached its client, half of the clients answer; once each of their
  calls has its first progress event (the server has the answer), one replica is killed
  (``SIGKILL``) and, once it is dead, the other half answer (an answer sent while the
  replica dies would fail in the mcp client, not in the gateway). Reported per replica
  (killed, survivor) and half (answered before or after the kill): calls completed,
  calls ended with an error (by ``data.reason``), calls with no outcome within the lease
  plus :data:`OUTCOME_GRACE_S` of the kill (must be 0), double presentations (must be
  0), completed calls that missed progress events, and the time from the kill to the
  last outcome.
* **cpu**: :func:`bench.gateway_bench.timed_run` as the gateway bench runs it,
  ``GATEWAY_SOAK_CPU_REPEATS`` (2) rounds in alternating order of ``direct``, one replica
  and two replicas on Redis, ``GATEWAY_SOAK_CPU_SESSIONS`` (200) sessions x 100 events: the
  median CPU of every process (clients, server, replicas, Redis) through the gateway over
  the direct one's (target <= 1.3).
* **latency**: a scripted upstream (:func:`scripted_app`, its own process: ``ping``
  answered on an SSE stream, ``tools/call big`` answered with one SSE event of the asked
  size, sent in three writes whose large middle one is made once per size, so the
  upstream spends no copy of it per call) behind one replica. :data:`PINGERS` raw HTTP sessions send
  ``ping`` requests one after another (``GATEWAY_SOAK_PINGS``, 400, round trips per
  phase, each a POST and its whole SSE response): while nothing else runs (idle), while
  another process's session receives, one after another, events just under the
  replica's ``max_event_bytes`` (the default, 8 MiB, less 1 KiB), and while it receives
  events over it (plus 64 KiB: each stream ends with one JSON-RPC error, ``data.reason``
  ``event-too-large``). The same phases direct to the upstream are the reference (on two
  cores the receiver and the upstream take CPU from everything else). Target: p99 loaded
  within 2x of p99 idle through the gateway.

Environment: the sizes above, each ``GATEWAY_SOAK_*``; ``GATEWAY_BENCH_REDIS=0`` skips the
Redis parts. The smoke test (tests/e2e/test_gateway_soak_smoke.py) runs each part at toy
size through the same functions.

Child processes (``python -m bench.gateway_soak <entry>``): ``serve`` (the harness server
with the ``paced`` tool and per-session event logs of at most
:data:`SERVER_EVENTS_PER_SESSION` events), ``scripted`` (the scripted upstream), ``receive
URL SIZE SECONDS`` (the session receiving large events). Both servers listen on a socket
made with ``IPPROTO_TCP`` (:func:`_listening_socket`); the ``cpu`` part uses the gateway
bench's own server as it is.

Only mcp 2.x (the server's tool and the balancer are written against ``httpx2``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from bench.e2e_bench import _plain
from bench.gateway_bench import (
    CONFIGS,
    METRICS,
    ROOT,
    TARGET_CPU_RATIO,
    WARMUP_SESSIONS,
    Child,
    Run,
    child,
    held_bytes,
    many_sessions,
    peak_rss,
    redis_parts,
    replica_process,
    timed_run,
)
from bench.results import alternating, env_float, env_int, record, run_quietly, table

SESSIONS = env_int("GATEWAY_SOAK_SESSIONS", 500)
SECONDS = env_float("GATEWAY_SOAK_SECONDS", 60.0)
WARM_CALLS = env_int("GATEWAY_SOAK_WARM_CALLS", 16)
"""Calls each session makes in the warm-up: as many as a replica's sessions remember of
their past (``GatewayLimits.remembered``, the gateway guard's finished requests), so the
measured minute runs on sessions whose state is full."""
WARM_LIMIT_S = 900.0
"""The warm-up's bound: a run whose sessions are not all warm by then measures nothing."""
RAMP_S = env_float("GATEWAY_SOAK_RAMP", -1.0)
"""Seconds over which the soak's sessions start (evenly); negative: a fifth of the run."""
EVENTS = env_int("GATEWAY_SOAK_EVENTS", 10)
FAILOVER_SESSIONS = env_int("GATEWAY_SOAK_FAILOVER_SESSIONS", 200)
LEASE_S = env_float("GATEWAY_SOAK_LEASE", 3.0)
CPU_SESSIONS = env_int("GATEWAY_SOAK_CPU_SESSIONS", 200)
CPU_EVENTS = env_int("GATEWAY_SOAK_CPU_EVENTS", 100)
CPU_REPEATS = env_int("GATEWAY_SOAK_CPU_REPEATS", 2)
PINGS = env_int("GATEWAY_SOAK_PINGS", 400)

FLAT_GROWTH = 0.05
"""The most the replica's RSS may grow from the end of the warm-up to the end of the soak
(a fraction of it) to be called flat."""
CALL_TIMEOUT_S = 60.0
"""Seconds one soak call (its result and every progress event) may take: past it, an
error."""
MAX_CALLS = 100_000
"""Calls one soak session makes at most (the time ends it first)."""
SERVER_EVENTS_PER_SESSION = 2_000
"""Events the server keeps per session for resumes (the oldest dropped first)."""
RETRY_MS = 500
"""The SSE ``retry:`` the server advertises (the mcp client's wait before a resume)."""
PACED_EVENTS = 20
PACE_S = 0.25
"""The failover's tool: progress events after the answer, and the seconds between them
(the calls answered before the kill are still streaming when it comes)."""
OUTCOME_GRACE_S = 30.0
"""Seconds past the lease within which every failover call must have ended (the guard's
resume budgets and the server's pacing fit in it many times)."""
BEFORE_KILL_S = 120.0
"""Seconds the failover waits for every prompt to be presented, and then for the first
half's answers to reach the server, before it kills a replica anyway."""
PINGERS = 4
MIN_TRANSFERS = 3
"""Large events a loaded latency phase receives at least (it runs until it has them and
its round trips)."""
PHASE_S = 120.0
"""Seconds a latency phase runs at most."""
PROTOCOL = "2025-11-25"


# --------------------------------------------------------------------------- shared helpers


def rss(pid: int) -> int:
    """Process ``pid``'s resident memory now, bytes (``VmRSS``; 0 when not reported)."""
    for line in open(f"/proc/{pid}/status", encoding="ascii"):  # noqa: SIM115
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; NaN for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc`` (itself, or those of its exception groups, flattened)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def reason_of(exc: BaseException) -> str:
    """How a call ended that raised ``exc``: the JSON-RPC error's ``data.reason`` (the
    gateway's and the guard's ending errors), else its code and message, else the
    exception's type."""
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code"):
        data = getattr(error, "data", None)
        if isinstance(data, dict) and isinstance(data.get("reason"), str):
            return str(data["reason"])
        return f"error {error.code}: {str(getattr(error, 'message', ''))[:60]}"
    return type(exc).__name__


async def _serve_forever(app: Any) -> None:
    """Serve ``app`` on a loopback socket of :func:`_listening_socket`, print ``serving
    <url>``, and serve until cancelled (``SIGTERM``)."""
    from fsm.wire.serving import serving

    sock = _listening_socket()
    port = sock.getsockname()[1]
    try:
        async with serving(app, sock):
            print(f"serving http://127.0.0.1:{port}/mcp", flush=True)
            await anyio.sleep_forever()
    finally:
        sock.close()


def _listening_socket() -> socket.socket:
    """A socket on a free port of 127.0.0.1 for uvicorn to listen on, made with
    ``IPPROTO_TCP``: asyncio sets ``TCP_NODELAY`` on the connections it accepts only
    when the listening socket's ``proto`` says TCP (``0`` does not), and without it a
    response written in pieces waits for the client's delayed ACK (some 40 ms)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    return sock


class _Go(BaseModel):
    """The answer the ``paced`` tool asks for."""

    proceed: bool


async def paced(ctx: Context, count: int = PACED_EVENTS, pace_s: float = PACE_S) -> str:
    """Ask the client once, then send ``count`` progress events ``pace_s`` apart (each
    stamped with the server's ``time.perf_counter()``), then return."""
    answer = await ctx.elicit("Proceed?", schema=_Go)
    for i in range(count):
        await anyio.sleep(pace_s)
        await ctx.report_progress(i + 1, count, repr(time.perf_counter()))
    return f"paced {count} ({answer.action})"


def serve() -> None:
    """``python -m bench.gateway_soak serve``: the harness server (its ``work`` tool among
    them) with :func:`paced`, per-session event logs of at most
    :data:`SERVER_EVENTS_PER_SESSION` events; prints ``serving <url>``, serves until
    ``SIGTERM``."""
    from fsm.wire.server import (
        ServerController,
        SessionScopedEventStore,
        build_server,
        install_scoped_views,
    )

    async def run() -> None:
        controller = ServerController(log_capacity=1_000)
        mcp = build_server(controller)
        mcp.tool()(paced)
        store = SessionScopedEventStore(capacity_per_session=SERVER_EVENTS_PER_SESSION)
        app = mcp.streamable_http_app(event_store=store, retry_interval=RETRY_MS)
        controller.manager, controller.store = mcp.session_manager, store
        install_scoped_views(mcp.session_manager, store)
        await _serve_forever(app)

    run_quietly(run)


def soak_server() -> contextlib.AbstractContextManager[Child]:
    """The server of the soak and the failover in its own process (:func:`serve`)."""
    return child("server", [sys.executable, "-m", "bench.gateway_soak", "serve"])


def _accept() -> Any:
    from mcp import types

    return types.ElicitResult(action="accept", content={"proceed": True})


def _client(transport: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(60.0, read=300.0))


# --------------------------------------------------------------------------- 1. soak


@dataclass
class Soak:
    """What the soak saw."""

    sessions: int
    seconds: float
    events: int
    opened: int = 0
    closed: int = 0
    calls: int = 0
    errors: list[str] = field(default_factory=list)
    presented: Counter[tuple[int, Any]] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)
    """``(seconds since the load began, the replica's VmRSS)``, every few seconds."""
    baseline_rss: int = 0
    """The replica's RSS after its warm-up, before the load."""
    closed_rss: int = 0
    """The replica's RSS after every session closed."""
    peak_rss: int = 0
    warmup_s: float = 0.0
    """Where the warm-up ends, in seconds since the load began (:attr:`warm_at`)."""
    warm_calls: int = 1
    """Calls every session makes before the measured ``seconds`` begin."""
    warm_at: float | None = None
    """Seconds since the load began when every session had made ``warm_calls`` calls."""
    warm_sessions: int = 0
    """Sessions that made ``warm_calls`` calls, or failed before."""
    began: float = 0.0
    deadline: float = math.inf
    ramp_s: float = 0.0
    wall: float = 0.0
    replica_cpu: float = 0.0
    server_rss: int = 0
    held: list[tuple[int, int, int, int]] = field(default_factory=list)
    """The in-process probe (:func:`held_growth`): ``(calls, bytes held, streams with an
    id table, final responses kept)`` at each checkpoint of one long session."""

    @property
    def per_call(self) -> float:
        """Bytes one session's state grows per call, between the probe's last two
        checkpoints (0: bounded)."""
        (c1, b1, _, _), (c2, b2, _, _) = self.held[-2:]
        return (b2 - b1) / (c2 - c1)

    @property
    def double_presented(self) -> int:
        """Elicitations that reached a client's callback more than once."""
        return sum(1 for n in self.presented.values() if n > 1)

    @property
    def after_warmup(self) -> list[tuple[float, int]]:
        """The RSS samples from the end of the warm-up on."""
        return [s for s in self.rss if s[0] >= self.warmup_s] or self.rss[-1:]

    @property
    def growth(self) -> float:
        """RSS growth from the first sample after the warm-up to the last (a fraction)."""
        later = self.after_warmup
        return (later[-1][1] - later[0][1]) / later[0][1] if later else math.nan

    @property
    def slope_mb_per_min(self) -> float:
        """Least-squares slope of the RSS samples after the warm-up, MB per minute."""
        later = self.after_warmup
        if len(later) < 2:
            return math.nan
        ts, bs = [t for t, _ in later], [b for _, b in later]
        mt, mb = statistics.fmean(ts), statistics.fmean(bs)
        den = sum((t - mt) ** 2 for t in ts)
        return sum((t - mt) * (b - mb) for t, b in zip(ts, bs, strict=True)) / den * 60 / 2**20

    @property
    def per_session(self) -> float:
        """Bytes of RSS the replica holds per open session (warm-up growth / sessions)."""
        later = self.after_warmup
        return (later[0][1] - self.baseline_rss) / max(1, self.opened) if later else math.nan


async def _soak_call(session: Any, got: Soak) -> tuple[str, int]:
    """One ``work`` call: its result's text and the progress events that arrived, once
    the result and every event are in."""
    arrived = 0
    all_in = anyio.Event()

    async def on_progress(progress: float, total: float | None, msg: str | None) -> None:
        nonlocal arrived
        got.latencies.append(time.perf_counter() - float(msg or "nan"))
        arrived += 1
        if arrived >= got.events:
            all_in.set()

    result = await session.call_tool("work", {"count": got.events}, progress_callback=on_progress)
    await all_in.wait()
    return "".join(getattr(c, "text", "") for c in result.content), arrived


def _settled(got: Soak) -> None:
    """One more session is warm or failed before it was: once every session is, the
    measured ``seconds`` begin."""
    got.warm_sessions += 1
    if got.warm_sessions == got.sessions:
        now = time.monotonic()
        got.warm_at = now - got.began
        got.deadline = now + got.seconds


async def _soak_session(url: str, index: int, start_in: float, got: Soak) -> None:
    """One soak session: open, call ``work`` until ``got.deadline``, close."""
    await anyio.sleep(start_in)

    async def on_elicit(context: Any, params: Any) -> Any:
        got.presented[(index, context.request_id)] += 1
        return _accept()

    calls, stage = 0, "opening"
    try:
        async with _client() as http, _plain(url, http, on_elicit) as session:
            got.opened += 1
            stage = "calling"
            while time.monotonic() < got.deadline and calls < MAX_CALLS:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    text, arrived = await _soak_call(session, got)
                if text != f"worked {got.events} (accept)" or arrived != got.events:
                    got.errors.append(f"session {index}: {text!r}, {arrived} events")
                    if calls < got.warm_calls:
                        _settled(got)
                    return
                calls += 1
                got.calls += 1
                if calls == got.warm_calls:
                    _settled(got)
            stage = "closing"
        got.closed += 1
    except Exception as exc:
        if calls < got.warm_calls:
            _settled(got)
        left = got.deadline - time.monotonic()
        what = "; ".join(repr(leaf)[:160] for leaf in leaves(exc))
        got.errors.append(
            f"session {index}, {stage} after {calls} calls ({left:.0f} s left): {what}"
        )


async def _soak(url: str, pid: int, got: Soak, every_s: float) -> None:
    spread = got.ramp_s
    began = got.began = time.monotonic()
    got.deadline = began + WARM_LIMIT_S + got.seconds  # until every session is warm

    async def sample() -> None:
        while True:
            got.rss.append((time.monotonic() - began, rss(pid)))
            if time.monotonic() >= got.deadline:
                return
            await anyio.sleep(min(every_s, max(0.0, got.deadline - time.monotonic())))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for i in range(got.sessions):
            tg.start_soon(_soak_session, url, i, spread * i / got.sessions, got)
    got.wall = time.monotonic() - began
    got.warmup_s = got.wall if got.warm_at is None else got.warm_at


GROWTH_CALLS = (100, 300, 600, 1000)
"""The checkpoints of :func:`held_growth` (calls made by its one session)."""


async def _held_growth(url: str, checkpoints: tuple[int, ...], got: Soak) -> None:
    import gc

    from fsm.gateway.app import Gateway
    from fsm.wire.serving import serving

    gateway = Gateway(url)
    sock = _listening_socket()
    port = sock.getsockname()[1]

    async def on_elicit(context: Any, params: Any) -> Any:
        return _accept()

    tally = Soak(1, 0.0, got.events)
    try:
        async with (
            serving(gateway, sock, shutdown_timeout=0.0),
            _client() as http,
            _plain(f"http://127.0.0.1:{port}{gateway.path}", http, on_elicit) as session,
        ):
            done = 0
            for target in checkpoints:
                while done < target:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        text, arrived = await _soak_call(session, tally)
                    assert text == f"worked {got.events} (accept)" and arrived == got.events
                    done += 1
                gc.collect()
                (held,) = gateway._sessions.values()  # read only
                kept = gateway._kept.count(held)
                got.held.append((done, held_bytes(gateway), len(held.ids), kept))
    finally:
        sock.close()


def held_growth(url: str, got: Soak, checkpoints: tuple[int, ...] = GROWTH_CALLS) -> None:
    """One session through a replica in this process, calling ``work`` again and again:
    the bytes of what the replica holds for it (:func:`bench.gateway_bench.held_bytes`)
    at each checkpoint, into ``got.held``. What the soak's RSS cannot tell apart: the
    state bounded per session (its kept observations fill up over the first calls)
    from state that grows with every call."""
    run_quietly(_held_growth, url, checkpoints, got)


def soak(
    sessions: int = SESSIONS,
    seconds: float = SECONDS,
    events: int = EVENTS,
    ramp_s: float = RAMP_S,
    probe_calls: tuple[int, ...] = GROWTH_CALLS,
    warm_calls: int = WARM_CALLS,
) -> Soak:
    """Run the soak (see the module docstring)."""
    ramp = ramp_s if ramp_s >= 0 else seconds / 5
    got = Soak(sessions, seconds, events, warm_calls=warm_calls, ramp_s=ramp)
    every = max(0.5, min(5.0, seconds / 12))
    with soak_server() as server, replica_process(server.url) as gw:
        run_quietly(many_sessions, [gw.url], WARMUP_SESSIONS, 10)
        got.baseline_rss = rss(gw.pid)
        cpu = gw.cpu()
        run_quietly(_soak, gw.url, gw.pid, got, every)
        got.replica_cpu = gw.cpu() - cpu
        time.sleep(min(2.0, seconds / 10))  # the closed sessions' last requests settle
        got.closed_rss, got.peak_rss, got.server_rss = (
            rss(gw.pid),
            peak_rss(gw.pid),
            rss(server.pid),
        )
        held_growth(server.url, got, probe_calls)
    return got


def render_soak(got: Soak) -> None:
    """Print the soak's tables."""
    mb = 2**20
    series = ", ".join(f"{t:.0f}s {b / mb:.0f}" for t, b in got.rss)
    later = got.after_warmup
    flat = "flat" if got.growth <= FLAT_GROWTH else "NOT flat"
    table(
        [
            ("sessions (opened / closed)", f"{got.sessions} ({got.opened} / {got.closed})"),
            ("seconds (wall)", f"{got.seconds:g} ({got.wall:.1f})"),
            ("calls completed", got.calls),
            ("calls per second", round(got.calls / got.wall, 1) if got.wall else 0.0),
            ("errors", len(got.errors)),
            ("double presentations", got.double_presented),
            ("elicitations presented", sum(got.presented.values())),
            ("event latency p50 / p99 ms", f"{pct(got.latencies, .5) * 1e3:.1f} / "
                                            f"{pct(got.latencies, .99) * 1e3:.1f}"),
            ("replica CPU s (share of wall)", f"{got.replica_cpu:.1f} "
                                               f"({got.replica_cpu / max(got.wall, 1e-9):.2f})"),
            ("replica RSS MB before the load", round(got.baseline_rss / mb, 1)),
            ("replica RSS MB first / after warm-up / last",
             f"{got.rss[0][1] / mb:.1f} / {later[0][1] / mb:.1f} / {got.rss[-1][1] / mb:.1f}"),
            (f"after warm-up ({got.warmup_s:.0f} s)", f"{flat}: {100 * got.growth:+.1f}%, "
                                                      f"{got.slope_mb_per_min:+.2f} MB/min"),
            ("bytes held per open session", round(got.per_session)),
            ("replica RSS MB after close / peak", f"{got.closed_rss / mb:.1f} / "
                                                  f"{got.peak_rss / mb:.1f}"),
            ("server RSS MB at the end", round(got.server_rss / mb, 1)),
        ],
        header=(f"soak: {got.sessions} sessions x {got.seconds:g} s, work({got.events})", ""),
    )  # fmt: skip
    print(f"replica RSS series (s MB): {series}")
    print(
        "one session's state in a replica (in-process, held_bytes) after N calls: "
        + ", ".join(
            f"{c}: {b:,} B ({ids} id tables, {kept} kept results)" for c, b, ids, kept in got.held
        )
        + f"; {got.per_call:,.0f} B per call between the last two"
    )
    for error in got.errors[:5]:
        print(f"error: {error}")


def record_soak(got: Soak) -> None:
    mb = 2**20
    record("gateway_soak_sessions", got.opened, "sessions")
    record("gateway_soak_calls", got.calls, "calls")
    record("gateway_soak_errors", len(got.errors), "errors")
    record("gateway_soak_double_presented", got.double_presented, "elicitations")
    record("gateway_soak_rss_first_mb", round(got.rss[0][1] / mb, 1), "MB")
    record("gateway_soak_rss_after_warmup_mb", round(got.after_warmup[0][1] / mb, 1), "MB")
    record("gateway_soak_rss_last_mb", round(got.rss[-1][1] / mb, 1), "MB")
    record("gateway_soak_rss_growth_after_warmup", round(got.growth, 4), "fraction")
    record("gateway_soak_bytes_per_session", round(got.per_session), "bytes")
    record("gateway_soak_session_bytes_per_call", round(got.per_call), "bytes")


# --------------------------------------------------------------------------- 2. failover


class Sticky(httpx2.AsyncBaseTransport):
    """A client's balancer: every request to ``targets[first]`` (host, port); once a
    connection to it is refused (nothing was sent), to the next target, for good. A
    request that reached a replica is never sent again (whatever happened to it)."""

    def __init__(self, targets: list[tuple[str, int]], first: int) -> None:
        self.targets, self.current, self.failovers = targets, first, 0
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for _ in range(len(self.targets)):
            host, port = self.targets[self.current]
            request.url = request.url.copy_with(host=host, port=port)
            request.headers["host"] = f"{host}:{port}"
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.ConnectError:
                self.current = (self.current + 1) % len(self.targets)
                self.failovers += 1
        raise httpx2.ConnectError("no replica accepts connections", request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Call:
    """One failover call: its client's replica, whether it answered before the kill, how
    it ended and when (seconds after the kill; negative: before it)."""

    replica: str
    early: bool
    outcome: str = "no outcome"
    at: float = math.nan
    events: int = 0
    progress: list[float] = field(default_factory=list)
    """The progress values that arrived, in order (1 to :data:`PACED_EVENTS`)."""


@dataclass
class Failover:
    """What the failover saw."""

    sessions: int
    lease_s: float
    events: int = PACED_EVENTS
    """Progress events each call's tool sends after the answer."""
    pace_s: float = PACE_S
    calls: list[Call] = field(default_factory=list)
    presented: Counter[tuple[int, Any]] = field(default_factory=Counter)
    open_at_kill: int = 0
    """Prompts presented and not yet answered when the replica was killed."""
    streaming_at_kill: int = 0
    """Calls answered, with progress arriving and no result yet, when it was killed."""
    done_before_kill: int = 0
    failovers: int = 0
    """Requests the clients' balancers sent to the other replica after a refusal."""
    close_errors: list[str] = field(default_factory=list)
    """Sessions whose close failed after their call's outcome."""
    redis: str = "on"

    @property
    def double_presented(self) -> int:
        return sum(1 for n in self.presented.values() if n > 1)

    @property
    def outcomes(self) -> Counter[str]:
        return Counter(c.outcome for c in self.calls)

    @property
    def short(self) -> list[Call]:
        """Completed calls that missed progress events."""
        return [c for c in self.calls if c.outcome == "result" and c.events < self.events]

    @property
    def last_after_kill(self) -> float:
        """Seconds from the kill to the last call's outcome."""
        return max((c.at for c in self.calls if not math.isnan(c.at)), default=math.nan)


def _hostport(url: str) -> tuple[str, int]:
    parsed = httpx2.URL(url)
    return parsed.host, int(parsed.port or 80)


async def _failover(urls: list[str], kill: Callable[[], None], got: Failover) -> None:
    targets = [_hostport(u) for u in urls]
    n = got.sessions
    all_presented, answer_now, killed, early_streaming = (anyio.Event() for _ in range(4))
    first_seen: set[int] = set()
    streaming: set[int] = set()
    early_total = sum(1 for i in range(n) if (i // 2) % 2 == 0)
    scopes: list[anyio.CancelScope] = []
    killed_at = [math.inf]
    balancers: list[Sticky] = []

    async def one(i: int, call: Call, scope: anyio.CancelScope) -> None:
        async def on_elicit(context: Any, params: Any) -> Any:
            got.presented[(i, context.request_id)] += 1
            first_seen.add(i)
            if len(first_seen) == n:
                all_presented.set()
            await (answer_now if call.early else killed).wait()
            return _accept()

        async def on_progress(progress: float, total: float | None, msg: str | None) -> None:
            call.events += 1
            call.progress.append(progress)
            if call.early and not killed.is_set():
                streaming.add(i)
                if len(streaming) == early_total:
                    early_streaming.set()

        balancer = Sticky(targets, i % 2)
        balancers.append(balancer)
        with scope:
            try:
                async with _client(balancer) as http, _plain(urls[i % 2], http, on_elicit) as s:
                    try:
                        result = await s.call_tool(
                            "paced", {"count": got.events, "pace_s": got.pace_s},
                            progress_callback=on_progress,
                        )  # fmt: skip
                        text = "".join(getattr(c, "text", "") for c in result.content)
                        ok = text == f"paced {got.events} (accept)" and not result.is_error
                        call.outcome = "result" if ok else f"wrong result: {text[:60]}"
                    except Exception as exc:
                        call.outcome = reason_of(exc)
                    call.at = time.monotonic() - killed_at[0]
            except Exception as exc:  # the session could not open, or not close
                what = "; ".join(reason_of(leaf) for leaf in leaves(exc))
                if call.outcome == "no outcome":
                    call.outcome = f"session: {what}"
                    call.at = time.monotonic() - killed_at[0]
                else:
                    got.close_errors.append(f"session {i}: {what}")

    async with anyio.create_task_group() as tg:
        for i in range(n):
            call = Call("killed" if i % 2 == 0 else "survivor", (i // 2) % 2 == 0)
            got.calls.append(call)
            scope = anyio.CancelScope(deadline=anyio.current_time() + 2 * BEFORE_KILL_S)
            scopes.append(scope)
            tg.start_soon(one, i, call, scope)
        with anyio.move_on_after(BEFORE_KILL_S):
            await all_presented.wait()
        answer_now.set()
        with anyio.move_on_after(BEFORE_KILL_S):
            await early_streaming.wait()
        got.done_before_kill = sum(1 for c in got.calls if c.outcome != "no outcome")
        got.streaming_at_kill = sum(1 for i in streaming if got.calls[i].outcome == "no outcome")
        got.open_at_kill = sum(1 for i in first_seen if not got.calls[i].early)
        kill()
        killed_at[0] = time.monotonic()
        killed.set()
        bound = anyio.current_time() + got.lease_s + OUTCOME_GRACE_S
        for scope in scopes:
            scope.deadline = min(scope.deadline, bound)
    got.failovers = sum(b.failovers for b in balancers)


def failover(
    sessions: int = FAILOVER_SESSIONS,
    lease_s: float = LEASE_S,
    events: int = PACED_EVENTS,
    pace_s: float = PACE_S,
) -> Failover:
    """Run the failover (see the module docstring); ``redis`` says why not when Redis is
    not available (then no call is made)."""
    got = Failover(sessions, lease_s, events, pace_s)
    parts = redis_parts()
    if isinstance(parts, str):
        got.redis = parts
        return got
    _, redis_server = parts
    options = ["--lease", f"{lease_s:g}"]
    with contextlib.ExitStack() as stack:
        redis = stack.enter_context(redis_server())
        server = stack.enter_context(soak_server())
        replicas = [
            stack.enter_context(replica_process(server.url, str(redis.url), options=options))
            for _ in range(2)
        ]
        urls = [r.url for r in replicas]
        run_quietly(many_sessions, urls, 2 * WARMUP_SESSIONS, 10)

        def kill() -> None:  # returns once it is dead (its sockets closed by the kernel)
            replicas[0].process.send_signal(signal.SIGKILL)
            replicas[0].process.wait()

        run_quietly(_failover, urls, kill, got)
    return got


def render_failover(got: Failover) -> None:
    """Print the failover's table."""
    if got.redis != "on":
        print(f"failover: not run: {got.redis}")
        return
    reasons = sorted({c.outcome for c in got.calls})
    rows = []
    for replica in ("killed", "survivor"):
        for early in (True, False):
            calls = [c for c in got.calls if c.replica == replica and c.early is early]
            counts = Counter(c.outcome for c in calls)
            when = "before" if early else "after"
            rows.append((f"{replica}, answered {when} the kill", len(calls),
                         *(counts[r] for r in reasons)))  # fmt: skip
    totals = got.outcomes
    rows.append(("all", len(got.calls), *(totals[r] for r in reasons)))
    table(rows, header=(f"failover: {got.sessions} calls, lease {got.lease_s:g} s", "calls",
                        *reasons))  # fmt: skip
    errors = {r: k for r, k in totals.items() if r not in ("result", "no outcome")}
    short = got.short
    print(
        f"at the kill: {got.open_at_kill} prompts open (not answered), {got.streaming_at_kill} "
        f"calls answered and streaming, {got.done_before_kill} done; completed "
        f"{totals['result']}, ended with one error {sum(errors.values())} {errors or ''}, no "
        f"outcome {totals['no outcome']}, double presentations {got.double_presented}; last "
        f"outcome {got.last_after_kill:.2f} s after the kill (bound: lease + "
        f"{OUTCOME_GRACE_S:g} s); requests sent to the other replica after a refusal: "
        f"{got.failovers}; completed calls that missed progress events: {len(short)} "
        f"({sum(got.events - c.events for c in short)} events of {got.events} each); "
        f"sessions whose close failed: {len(got.close_errors)}"
    )


def record_failover(got: Failover) -> None:
    if got.redis != "on":
        return
    totals = got.outcomes
    record("gateway_failover_calls", len(got.calls), "calls")
    record("gateway_failover_completed", totals["result"], "calls")
    errors = sum(k for r, k in totals.items() if r not in ("result", "no outcome"))
    record("gateway_failover_errors", errors, "calls")
    for reason, k in totals.items():
        if reason not in ("result", "no outcome"):
            record(f"gateway_failover_error_{reason}", k, "calls")
    record("gateway_failover_no_outcome", totals["no outcome"], "calls")
    record("gateway_failover_double_presented", got.double_presented, "elicitations")
    record("gateway_failover_results_missing_events", len(got.short), "calls")
    record("gateway_failover_last_outcome_s", round(got.last_after_kill, 2), "s")


# --------------------------------------------------------------------------- 3. CPU ratio


@dataclass
class Cpu:
    """The CPU part's runs (:func:`bench.gateway_bench.timed_run`)."""

    sessions: int
    events: int
    repeats: int
    runs: list[Run]
    redis: str

    def median(self, config: str, part: str | None = None) -> float:
        """Median CPU seconds of ``config``'s runs (all processes, or ``part``'s)."""
        runs = [r for r in self.runs if r.config == config]
        if part is None:
            return statistics.median(r.cpu for r in runs)
        return statistics.median(r.cpu_parts.get(part, 0.0) for r in runs)

    @property
    def configs(self) -> list[str]:
        return [c for c in CONFIGS if any(r.config == c for r in self.runs)]

    def ratio(self, config: str) -> float:
        return self.median(config) / self.median("direct")


def cpu(sessions: int = CPU_SESSIONS, events: int = CPU_EVENTS, repeats: int = CPU_REPEATS) -> Cpu:
    """``repeats`` rounds of the gateway bench's timed runs, alternating order; every
    elicitation presented once and every event arrived (asserted)."""
    runs: list[Run] = []
    parts = redis_parts()
    with contextlib.ExitStack() as stack:
        redis = None if isinstance(parts, str) else stack.enter_context(parts[1]())
        configs = [c for c in CONFIGS if c != "redis" or redis is not None]
        for config in alternating(configs, repeats):
            runs.append(timed_run(config, sessions, events, redis))
    for run in runs:
        assert run.presented == [1] * sessions, (run.config, Counter(run.presented))
        assert len(run.latencies) == sessions * events, run.config
    return Cpu(sessions, events, repeats, runs, parts if isinstance(parts, str) else "on")


def render_cpu(got: Cpu) -> None:
    parts = ("clients", "server", "gateway", "redis")
    rows = [
        (config, *(round(got.median(config, p), 2) for p in parts), round(got.median(config), 2),
         round(got.ratio(config), 3))
        for config in got.configs
    ]  # fmt: skip
    metrics = "on" if METRICS else "off"
    table(rows, header=(f"cpu: {got.sessions} sessions x {got.events} events, "
                        f"{got.repeats} rounds (medians), metrics {metrics}",
                        *(f"{p} s" for p in parts),
                        "total s", "/ direct"))  # fmt: skip
    for config in got.configs[1:]:
        verdict = "meets" if got.ratio(config) <= TARGET_CPU_RATIO else "MISSES"
        print(f"{config}: {got.ratio(config):.3f}x direct ({verdict} the target <= "
              f"{TARGET_CPU_RATIO}); per round: "
              + ", ".join(f"{r.cpu:.1f}" for r in got.runs if r.config == config)
              + " s; direct: " + ", ".join(f"{r.cpu:.1f}" for r in got.runs
                                          if r.config == "direct") + " s")  # fmt: skip
    if got.redis != "on":
        print(f"redis rows: {got.redis}")


def record_cpu(got: Cpu) -> None:
    for config in got.configs[1:]:
        record(f"gateway_soak_cpu_{config}_over_direct", round(got.ratio(config), 3), "ratio")


# --------------------------------------------------------------------------- 4. latency


_RAW_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": PROTOCOL,
}


def _big_tail() -> bytes:
    return b'"}],"isError":false}}'


_FILLER: dict[int, bytes] = {}


def _big_event_parts(rid: Any, n: int, size: int) -> tuple[bytes, bytes, bytes]:
    """:func:`_big_event` in three parts (its head, its filler, its tail): the filler is
    made once per size, so sending an event in three writes costs the upstream no copy
    of it."""
    head = (
        f'id: big-{n}\nevent: message\ndata: {{"jsonrpc":"2.0","id":{json.dumps(rid)},'
        f'"result":{{"content":[{{"type":"text","text":"'
    ).encode()
    fill = max(0, size - len(head) - len(_big_tail()))
    filler = _FILLER.get(fill)
    if filler is None:
        _FILLER.clear()
        filler = _FILLER[fill] = b"x" * fill
    return head, filler, _big_tail() + b"\n\n"


def _big_event(rid: Any, n: int, size: int) -> bytes:
    """An SSE event (the ``id:``, ``event:`` and ``data:`` lines) of ``size`` characters
    holding a ``tools/call`` result for ``rid`` (its text ``x`` repeated), and the blank
    line that ends it."""
    return b"".join(_big_event_parts(rid, n, size))


async def scripted_app(scope: Mapping[str, Any], receive: Any, send: Any) -> None:
    """The latency part's upstream (ASGI): ``initialize`` answered as JSON with a session
    id; ``tools/call`` of ``big`` answered on an SSE stream with a priming event and one
    event of ``arguments.size`` characters (:func:`_big_event_parts`, three writes); any
    other request (``ping``) with an empty result on an SSE stream; notifications and
    answers ``202``; ``GET`` ``405``; ``DELETE`` ``200``."""
    from fsm.wire.serving import lifespan, whole_body

    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    body = await whole_body(receive)

    async def reply(status: int, content: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    msg = json.loads(body) if body else None
    if scope["method"] != "POST":
        await reply(405 if scope["method"] == "GET" else 200, b"", [])
        return
    if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
        await reply(202, b"", [])
        return
    rid = msg["id"]
    if msg["method"] == "initialize":
        result = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "0"},
        }
        out = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
        sid = os.urandom(8).hex().encode()
        await reply(200, out, [(b"content-type", b"application/json"), (b"mcp-session-id", sid)])
        return
    n = next(_COUNTER)
    params = msg.get("params") or {}
    sse = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    if msg["method"] == "tools/call" and params.get("name") == "big":
        size = int((params.get("arguments") or {}).get("size", 0))
        await send({"type": "http.response.start", "status": 200, "headers": sse})
        prime = f"id: prime-{n}\nretry: {RETRY_MS}\ndata: \n\n".encode()
        await send({"type": "http.response.body", "body": prime, "more_body": True})
        head, filler, tail = _big_event_parts(rid, n, size)
        await send({"type": "http.response.body", "body": head, "more_body": True})
        await send({"type": "http.response.body", "body": filler, "more_body": True})
        await send({"type": "http.response.body", "body": tail})
        return
    pong = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}, separators=(",", ":"))
    await reply(200, f"id: r-{n}\nevent: message\ndata: {pong}\n\n".encode(), sse)


_COUNTER = iter(range(1, sys.maxsize))


def scripted() -> None:
    """``python -m bench.gateway_soak scripted``: :func:`scripted_app` on 127.0.0.1;
    prints ``serving <url>``, serves until ``SIGTERM``."""

    run_quietly(_serve_forever, scripted_app)


async def open_raw(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Open a session with raw requests (``initialize``, ``notifications/initialized``);
    the headers its requests carry."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "soak", "version": "0"},
        },
    }
    resp = await http.post(url, content=json.dumps(init), headers=_RAW_HEADERS)
    resp.raise_for_status()
    headers = {**_RAW_HEADERS, "mcp-session-id": resp.headers["mcp-session-id"]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    resp = await http.post(url, content=json.dumps(note), headers=headers)
    resp.raise_for_status()
    return headers


def transfer_outcome(tail: bytes, total: int, size: int) -> str:
    """How a large-event call ended, from its response's last bytes: ``result`` when the
    event arrived whole, else the ending error's ``data.reason``, else ``incomplete``."""
    if tail.endswith(_big_tail() + b"\n\n") and total >= size:
        return "result"
    for block in reversed(tail.split(b"\n\n")):
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                with contextlib.suppress(ValueError, AttributeError):
                    data = json.loads(line[5:]).get("error", {}).get("data") or {}
                    return str(data.get("reason", "error"))
    return "incomplete"


def receive(url: str, size: int, seconds: float) -> None:
    """``python -m bench.gateway_soak receive URL SIZE SECONDS``: one session calling
    ``big`` (an event of ``SIZE`` characters) one call after another for ``SECONDS`` at
    most (or until ``SIGTERM``); prints ``ready`` once the session is open, then a line
    ``transfer <outcome> <seconds> <bytes>`` per call."""

    async def run() -> None:
        async with _client() as http:
            headers = await open_raw(http, url)
            print("ready", flush=True)
            deadline = time.monotonic() + seconds
            n = 0
            while time.monotonic() < deadline:
                n += 1
                call = {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "tools/call",
                    "params": {"name": "big", "arguments": {"size": size}},
                }
                started, total, tail = time.perf_counter(), 0, b""
                async with http.stream(
                    "POST", url, content=json.dumps(call), headers=headers
                ) as resp:
                    async for chunk in resp.aiter_raw():
                        total += len(chunk)
                        tail = (tail + chunk)[-65536:]
                outcome = transfer_outcome(tail, total, size)
                print(f"transfer {outcome} {time.perf_counter() - started:.4f} {total}", flush=True)

    run_quietly(run)


@dataclass
class Phase:
    """One latency phase: round-trip times, and the large events received meanwhile."""

    target: str
    load: str
    samples: list[float] = field(default_factory=list)
    transfers: list[tuple[str, float]] = field(default_factory=list)
    """``(outcome, seconds)`` per large-event call."""
    failures: list[str] = field(default_factory=list)

    def p(self, q: float) -> float:
        return pct(self.samples, q) * 1e3


async def _lines(stream: Any) -> AsyncIterator[str]:
    buf = b""
    async for chunk in stream:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode()


async def _phase(url: str, size: int | None, pings: int, got: Phase) -> None:
    """Round trips of :data:`PINGERS` sessions at once until ``pings`` are in (and, when
    ``size`` is given, a receiver process has received :data:`MIN_TRANSFERS` events of
    ``size``), :data:`PHASE_S` at most."""
    enough = anyio.Event()
    received = anyio.Event()
    if size is None:
        received.set()
    deadline = time.monotonic() + PHASE_S

    async def pinger(k: int) -> None:
        async with _client() as http:
            headers = await open_raw(http, url)
            for _ in range(3):  # its connection made, its first requests out of the way
                await http.post(url, content=b'{"jsonrpc":"2.0","id":0,"method":"ping"}',
                                headers=headers)  # fmt: skip
            ready.append(k)
            await go.wait()
            rid = 0
            while not (enough.is_set() and received.is_set()) and time.monotonic() < deadline:
                rid += 1
                body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"})
                started = time.perf_counter()
                resp = await http.post(url, content=body, headers=headers)
                took = time.perf_counter() - started
                if resp.status_code != 200 or f'"id":{rid},' not in resp.text:
                    got.failures.append(f"{resp.status_code} {resp.text[:80]}")
                    continue
                got.samples.append(took)
                if len(got.samples) >= pings:
                    enough.set()

    ready: list[int] = []
    go = anyio.Event()
    async with anyio.create_task_group() as tg:
        for k in range(PINGERS):
            tg.start_soon(pinger, k)
        with anyio.fail_after(60):
            while len(ready) < PINGERS:
                await anyio.sleep(0.01)
        if size is None:
            go.set()
            return
        args = [sys.executable, "-m", "bench.gateway_soak", "receive", url, str(size),
                str(PHASE_S)]  # fmt: skip
        async with await anyio.open_process(args, cwd=ROOT, stderr=None) as proc:
            try:
                lines = _lines(proc.stdout)
                with anyio.fail_after(60):
                    first = await lines.__anext__()
                assert first == "ready", first
                go.set()
                async for line in lines:
                    _, outcome, seconds, _ = line.split()
                    got.transfers.append((outcome, float(seconds)))
                    if len(got.transfers) >= MIN_TRANSFERS:
                        received.set()
                        if enough.is_set():
                            break
                    if time.monotonic() > deadline:
                        break
            finally:
                received.set()
                enough.set()
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                with anyio.CancelScope(shield=True):
                    await proc.wait()


@dataclass
class Latency:
    """The latency part's phases and the replica's figures."""

    cap: int
    phases: list[Phase]
    replica_peak_rss: int = 0
    replica_cpu: float = 0.0

    def of(self, target: str, load: str) -> Phase:
        return next(p for p in self.phases if p.target == target and p.load == load)

    def ratio(self, load: str, target: str = "gateway") -> float:
        """p99 of ``load`` over p99 idle."""
        return self.of(target, load).p(0.99) / self.of(target, "idle").p(0.99)


LOADS = ("idle", "under the cap", "over the cap")


def latency(cap: int | None = None, pings: int = PINGS) -> Latency:
    """The latency part (see the module docstring). ``cap``: the replica's
    ``--max-event-bytes`` (``None``: its default)."""
    from fsm.gateway.app import GatewayLimits

    bound = cap if cap is not None else GatewayLimits().max_event_bytes
    sizes: dict[str, int | None] = {
        "idle": None,
        "under the cap": bound - 1024,
        "over the cap": bound + 65536,
    }
    options = ["--max-event-bytes", str(cap)] if cap is not None else []
    got = Latency(bound, [])
    with (
        child("scripted", [sys.executable, "-m", "bench.gateway_soak", "scripted"]) as up,
        replica_process(up.url, options=options) as gw,
    ):
        cpu = gw.cpu()
        for target, url in (("gateway", gw.url), ("direct", up.url)):
            for load, size in sizes.items():
                phase = Phase(target, load)
                run_quietly(_phase, url, size, pings, phase)
                got.phases.append(phase)
        got.replica_cpu = gw.cpu() - cpu
        got.replica_peak_rss = peak_rss(gw.pid)
    return got


def render_latency(got: Latency) -> None:
    rows = []
    for phase in got.phases:
        outcomes = Counter(o for o, _ in phase.transfers)
        took = [s for _, s in phase.transfers]
        rows.append((
            phase.target, phase.load, len(phase.samples), round(phase.p(0.5), 2),
            round(phase.p(0.99), 2), round(phase.p(0.99) / got.of(phase.target, "idle").p(0.99), 2),
            ", ".join(f"{o} {k}" for o, k in sorted(outcomes.items())) or "-",
            f"{statistics.median(took):.3f}" if took else "-", len(phase.failures),
        ))  # fmt: skip
    table(rows, header=(f"latency: ping round trips, events of {got.cap:,} +/-", "load",
                        "round trips", "p50 ms", "p99 ms", "p99 / idle", "large events",
                        "s per event", "failed"))  # fmt: skip
    for load in LOADS[1:]:
        ratio = got.ratio(load)
        verdict = "meets" if ratio <= 2 else "MISSES"
        print(f"gateway, {load}: p99 {ratio:.2f}x idle ({verdict} the target <= 2); direct "
              f"{got.ratio(load, 'direct'):.2f}x")  # fmt: skip
    print(f"the replica: {got.replica_cpu:.1f} s CPU over the phases, peak RSS "
          f"{got.replica_peak_rss / 2**20:.0f} MB")  # fmt: skip


def record_latency(got: Latency) -> None:
    for phase in got.phases:
        if phase.target != "gateway":
            continue
        tag = phase.load.split()[0]
        record(f"gateway_latency_{tag}_p50_ms", round(phase.p(0.5), 3), "ms")
        record(f"gateway_latency_{tag}_p99_ms", round(phase.p(0.99), 3), "ms")
        if phase.load != "idle":
            record(f"gateway_latency_{tag}_p99_over_idle", round(got.ratio(phase.load), 3),
                   "ratio")  # fmt: skip
    record("gateway_latency_replica_peak_rss_mb", round(got.replica_peak_rss / 2**20, 1), "MB")


# --------------------------------------------------------------------------- main


PARTS: dict[str, tuple[Callable[[], Any], Callable[[Any], None], Callable[[Any], None]]] = {
    "soak": (soak, render_soak, record_soak),
    "failover": (failover, render_failover, record_failover),
    "cpu": (cpu, render_cpu, record_cpu),
    "latency": (latency, render_latency, record_latency),
}
"""Each part: what it measures, how it prints it, how it records it."""


def _run_part(name: str) -> None:
    measure, render, keep = PARTS[name]
    got = measure()
    render(got)
    keep(got)


@contextlib.contextmanager
def _stamped(name: str) -> Iterator[None]:
    started = time.monotonic()
    print(f"== {name} ({time.strftime('%Y-%m-%d %H:%M:%S')}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})", flush=True)  # fmt: skip
    yield
    print(f"({name}: {time.monotonic() - started:.0f} s)\n", flush=True)


def main(names: list[str] | None = None) -> None:
    """Run the named parts (default all), print their tables, record their figures."""
    for name in names or list(PARTS):
        with _stamped(name):
            _run_part(name)


if __name__ == "__main__":
    command = sys.argv[1:2]
    if command == ["serve"]:
        serve()
    elif command == ["scripted"]:
        scripted()
    elif command == ["receive"]:
        receive(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        unknown = [n for n in sys.argv[1:] if n not in PARTS]
        if unknown:
            raise SystemExit(f"unknown part(s) {unknown}: choose from {list(PARTS)}")
        main(sys.argv[1:])
