"""The guarding gateway under the load it was built for: many concurrent sessions, each with
one elicitation and a stream of progress events, direct and through the gateway, side by side.

Each session is the unmodified mcp client (``ClientSession`` over ``streamable_http_client``,
its own HTTP client): it opens a session, calls the harness tool ``work(count)`` (the server
asks one ``elicitation/create``, which the client's callback answers at once, then streams
``count`` ``notifications/progress``), waits for every event and closes the session (a
``DELETE``). ``SESSIONS`` sessions run at once. Each part runs in its own process, as it
would be deployed: the clients in this one, the harness server in another
(``python -m bench.gateway_bench serve``), each gateway replica in its own (the command
users run, ``python -m fsm gateway``). The configurations:

* ``direct``: clients -> server;
* ``gateway``: clients -> one replica (``--store memory``) -> server;
* ``redis``: clients -> one of two replicas sharing a Redis store (``--store redis://``,
  a loopback ``redis-server``; half of the clients on each replica, each client's
  requests all to its replica, as a sticky balancer sends them) -> server. Only when the
  Redis store and runner are importable and ``redis-server`` is installed;
  ``GATEWAY_BENCH_REDIS=0`` switches it off.

Every run starts its own server and replicas (off the clock), warms them with
``WARMUP_SESSIONS`` short sessions, then the clock runs over the load. ``REPEATS`` rounds in
alternating order (forward, then reversed) so that drift hits all alike; before each run
the clients' garbage of earlier runs is collected and their surviving heap frozen.

Measured per run: wall time from the first session's start until the last closed; CPU
time (user + system) of every process over the same span: the clients
(``time.process_time``), the server, each replica and, in the ``redis`` configuration, the
Redis server (``/proc/<pid>/stat``: Linux only, 10 ms resolution); the total is what the
configuration costs, and its ratio over ``direct`` is the gateway's overhead (target
<= 1.3). Also: each event's latency (the server stamps ``time.perf_counter()`` into the
progress ``message`` when it sends it, the client subtracts it from its clock when the
callback runs: ``CLOCK_MONOTONIC``, one clock for every process of the machine); how many
times each session's elicitation was presented (must be exactly 1: asserted); a replica's
peak resident memory (``VmHWM``); for Redis, the commands the Redis server processed per
session (its ``INFO stats``). Under this load an event's latency is mostly its wait behind
the other sessions' events in the clients' one event loop, so the latency the gateway
adds per hop is measured apart, one session at a time (below).

Then four probes, off the clock:

* **round trips** (Redis if available, else the memory store's operation count), in this
  process with an in-process harness server and replicas whose stores are counted:
  ``PROBE_SESSIONS`` sessions with 0 events and again with ``EVENTS`` events, the store's
  calls serialised so each call's round trips are exact. Per plain notification: the
  difference of the two runs' round trips over the notifications added (target 0); per
  request decision: the round trips of the ``claim`` calls (the gateway's decision to
  present a server request) over the requests (target 1).
* **memory**, in this process too: one replica with ``max_sessions = SESSIONS // WAVES``,
  ``SESSIONS`` sessions in ``WAVES`` waves of that many at once: the bytes of every
  object reachable from the replica's held sessions (:func:`held_bytes`: guards, event
  logs, id tables, what the sessions own; not what the replica shares) while a wave's
  sessions are all open, and after each wave (closed sessions stay held until pushed
  out), with the replica's held sessions sampled throughout (must never exceed
  ``max_sessions``: asserted). ``tracemalloc`` attributes allocations to the gateway only
  with deep tracebacks, which slowed a 3-session run from under a second to minutes: not
  used.
* **cost split**: one server process and one replica process, ``SPLIT_ROUNDS`` rounds of
  ``SPLIT_SESSIONS`` concurrent sessions with no event and with ``2 * EVENTS`` events,
  alternating: each part's CPU per session (the first) and per event (the difference).
  The replica's share of a load of any shape follows from the two; the figures are
  medians, and one run's noise moves them less than it moves one ratio of totals.
* **one session at a time**: one server process and one replica process,
  ``LIGHT_REPEATS`` single sessions of ``EVENTS`` events per configuration, alternating,
  direct and through the replica: each event's latency without queueing, p50/p99, and
  the difference.

Environment: ``GATEWAY_BENCH_SESSIONS`` (default 40), ``GATEWAY_BENCH_EVENTS`` (100),
``GATEWAY_BENCH_REPEATS`` (3), ``GATEWAY_BENCH_REDIS`` (``0`` to skip Redis). The
promised load, 200 sessions x 100 events (``GATEWAY_BENCH_SESSIONS=200``), takes some 5
minutes on the shared 2-core machine with two rounds, so it is not the default; the
default finishes in about two.

``python -m bench.gateway_bench profile`` runs one replica process under ``cProfile``
(switched on after a warm-up, off before its stop) and prints its own time per package,
and how much of its CPU went to garbage collection.

Found by this benchmark and fixed in the gateway: an upstream pool capped at httpx2's
100 connections (each streaming session holds two: past some 50 sessions requests failed
with ``PoolTimeout``); idle connections kept as long as the server keeps them (one
reused as the server closed it: ``ReadError``); one upstream pool for all sessions,
whose every request scanned every connection (the gateway's CPU grew with the square of
its sessions; the upstream connections are now aiohttp's, whose pool does not scan);
``upstream_connections`` and ``upstream_idle_s`` say the first two. And in the Redis
store: redis-py's default pool failed the operations past its 100 connections at once,
so that one replica with 200 sessions beginning together lost some sessions' records
(they failed closed): the store's pool now makes them wait.

Recorded (``gateway_*``): wall and CPU medians per configuration, CPU ratios over direct
(target <= 1.3), the replicas' share of the CPU, latency p50/p99 per configuration and
added by the gateway, round trips per notification and per decision, gateway bytes per
held session, a replica's peak RSS, latency added one session at a time.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import math
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.e2e_bench import _plain
from bench.results import alternating, env_int, record, run_quietly, table

BENCH_ID_KEY = "bench-only key: signs the replicas' event ids"
"""The event-id key the benchmark's replicas share (replicas on one store must)."""


SESSIONS = env_int("GATEWAY_BENCH_SESSIONS", 40)
EVENTS = env_int("GATEWAY_BENCH_EVENTS", 100)
REPEATS = env_int("GATEWAY_BENCH_REPEATS", 3)
METRICS = os.environ.get("GATEWAY_BENCH_METRICS", "1").strip() != "0"
"""Replicas serve their Prometheus metrics (``--metrics 127.0.0.1:0``) as deployed ones
would, unless ``GATEWAY_BENCH_METRICS=0``: the counters are part of what is measured."""
PROBE_SESSIONS = 10
SPLIT_SESSIONS = 100
SPLIT_ROUNDS = 3
LIGHT_REPEATS = 5
WAVES = 4
TARGET_CPU_RATIO = 1.3
CONFIGS = ("direct", "gateway", "redis")

Hook = Callable[[], Awaitable[None]]


# --------------------------------------------------------------------------- the store, counted


class CountingStore:
    """A :class:`~fsm.gateway.store.StateStore` passing every call to ``inner`` (whatever
    the interface's signatures), counting calls by operation (:attr:`ops`) and, when
    ``inner`` counts ``round_trips`` (the Redis store), the round trips each operation cost
    (:attr:`trips`). Exact per operation only with ``serial=True`` (one call at a time);
    otherwise calls overlap and only the total (:attr:`round_trips`) is exact."""

    def __init__(self, inner: Any, *, serial: bool = False) -> None:
        import anyio

        self.inner = inner
        self.ops: Counter[str] = Counter()
        self.trips: Counter[str] = Counter()
        self._lock = anyio.Lock() if serial else None

    @property
    def round_trips(self) -> int | None:
        """The inner store's round trips so far (``None`` for a store without IO)."""
        value = getattr(self.inner, "round_trips", None)
        return int(value) if value is not None else None

    async def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        self.ops[op] += 1
        async with self._lock or contextlib.nullcontext():
            before = self.round_trips
            try:
                return await getattr(self.inner, op)(*args, **kwargs)
            finally:
                if before is not None:
                    self.trips[op] += (self.round_trips or 0) - before

    def __getattr__(self, op: str) -> Any:
        """The inner store's attribute; its state operations counted."""
        attr = getattr(self.inner, op)
        if op not in _STORE_OPS:
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            return await self._call(op, *args, **kwargs)

        return counted


def _store_ops() -> frozenset[str]:
    from fsm.gateway.store import StateStore

    return frozenset(
        name for name in vars(StateStore) if not name.startswith("_") and name != "aclose"
    )


_STORE_OPS = _store_ops()
"""The operations of the state-store interface that :class:`CountingStore` counts."""


def redis_parts() -> tuple[Any, Any] | str:
    """``(RedisStore, redis_server)`` when the Redis rows can run, else why not."""
    if os.environ.get("GATEWAY_BENCH_REDIS", "").strip() == "0":
        return "switched off (GATEWAY_BENCH_REDIS=0)"
    try:
        store = importlib.import_module("fsm.gateway.redis_store")
        runner = importlib.import_module("support.redis_server")
    except ImportError as exc:
        return f"not available ({exc})"
    if shutil.which("redis-server") is None:
        return "no redis-server installed"
    return store.RedisStore, runner.redis_server


# --------------------------------------------------------------------------- one session


@dataclass
class SessionResult:
    """What one client saw: how often its elicitation was presented, each event's latency."""

    presented: int = 0
    latencies: list[float] = field(default_factory=list)


async def one_session(url: str, events: int, before_close: Hook | None = None) -> SessionResult:
    """One client session: open, call ``work(events)`` answering its elicitation at once,
    wait for every progress event, run ``before_close``, close."""
    import anyio
    from mcp import types

    from fsm.wire.sdk import hx

    got = SessionResult()
    done = anyio.Event()
    if events == 0:
        done.set()

    async def on_elicit(context: Any, params: Any) -> Any:
        got.presented += 1
        return types.ElicitResult(action="accept", content={"proceed": True})

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.latencies.append(time.perf_counter() - float(message or "nan"))
        if len(got.latencies) >= events:
            done.set()

    async with (
        hx.AsyncClient(timeout=hx.Timeout(60.0, read=300.0)) as http,
        _plain(url, http, on_elicit) as session,
    ):
        result = await session.call_tool("work", {"count": events}, progress_callback=on_progress)
        with anyio.fail_after(120):
            await done.wait()
        text = "".join(getattr(c, "text", "") for c in result.content)
        assert text == f"worked {events} (accept)", text
        if before_close is not None:
            await before_close()
    assert len(got.latencies) == events, (len(got.latencies), events)
    return got


async def many_sessions(
    urls: list[str], sessions: int, events: int, before_close: Hook | None = None
) -> list[SessionResult]:
    """``sessions`` concurrent sessions, client ``i`` on ``urls[i % len(urls)]``."""
    import anyio

    out: list[SessionResult] = []

    async def one(i: int) -> None:
        out.append(await one_session(urls[i % len(urls)], events, before_close))

    async with anyio.create_task_group() as tg:
        for i in range(sessions):
            tg.start_soon(one, i)
    return out


# ---------------------------------------------------------------- in-process replicas (the probes)


@dataclass
class Endpoints:
    """Where a probe's clients connect, and its in-process replicas' counted stores."""

    urls: list[str]
    stores: list[CountingStore] = field(default_factory=list)
    gateways: list[Any] = field(default_factory=list)


@contextlib.asynccontextmanager
async def endpoints(
    config: str,
    upstream: str,
    redis_url: str | None = None,
    *,
    serial: bool = False,
    **gateway_kw: Any,
) -> AsyncIterator[Endpoints]:
    """The endpoints of ``config`` (``direct``, ``gateway``, ``redis``) in front of
    ``upstream``, for the probes: replicas in this process, their stores counted (fresh
    replicas and stores each time)."""
    from fsm.gateway.ids import EventIdKeys
    from fsm.gateway.store import MemoryStore
    from support.gateway import running_gateway

    if config == "direct":
        yield Endpoints([upstream])
        return
    if config == "gateway":
        inners: list[Any] = [MemoryStore()]
    elif config == "redis":
        parts = redis_parts()
        assert not isinstance(parts, str) and redis_url is not None, parts
        inners = [parts[0].from_url(redis_url), parts[0].from_url(redis_url)]
    else:
        raise ValueError(f"unknown configuration {config!r}")
    stores = [CountingStore(inner, serial=serial) for inner in inners]
    shared = {"id_keys": EventIdKeys.generate(), **gateway_kw}  # one key for the replicas
    async with contextlib.AsyncExitStack() as stack:
        running = [
            await stack.enter_async_context(running_gateway(upstream, store=s, **shared))
            for s in stores
        ]
        yield Endpoints([r.url for r in running], stores, [r.gateway for r in running])


@contextlib.asynccontextmanager
async def sampling(probe: Callable[[], int], every_s: float = 0.01) -> AsyncIterator[list[int]]:
    """Sample ``probe()`` every ``every_s`` while the block runs; yields a one-item list
    holding the largest value seen (updated as it runs)."""
    import anyio

    peak = [probe()]

    async def loop() -> None:
        while True:
            peak[0] = max(peak[0], probe())
            await anyio.sleep(every_s)

    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        try:
            yield peak
        finally:
            peak[0] = max(peak[0], probe())
            tg.cancel_scope.cancel()


# --------------------------------------------------------------------------- processes

ROOT = Path(__file__).resolve().parents[1]
"""The repository: where the child processes start (``bench`` is not installed)."""
WARMUP_SESSIONS = 5
"""Short sessions (10 events) each run sends through its fresh processes before the clock
runs: imports, first connections and code paths."""
_START_TIMEOUT_S = 60.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (``/proc/<pid>/stat``:
    Linux only; clock-tick resolution, 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid: int) -> int:
    """Process ``pid``'s peak resident memory so far, bytes (``VmHWM`` of
    ``/proc/<pid>/status``; 0 when not reported)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class Child:
    """A process of the benchmark serving HTTP: the harness server or a gateway replica."""

    name: str
    process: subprocess.Popen[str]
    url: str
    """Its MCP endpoint, as the first line it printed says (its last word)."""

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def cpu(self) -> float:
        """CPU seconds it has used so far (:func:`cpu_seconds`)."""
        return cpu_seconds(self.pid)


def cpu_of(children: Mapping[str, Child]) -> dict[str, float]:
    """CPU seconds so far of each named child process."""
    return {name: c.cpu() for name, c in children.items()}


@contextlib.contextmanager
def child(name: str, args: list[str], env: Mapping[str, str] | None = None) -> Iterator[Child]:
    """Start ``args`` in :data:`ROOT` (``env`` added to this process's environment), wait
    for the first line on its stdout (where it serves), yield it; on exit ``SIGTERM``
    (the gateway's clean stop), ``SIGKILL`` if it has not ended 10 s later.
    ``RuntimeError`` with its stderr when it exits first."""
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
            text=True, env={**os.environ, **(env or {})},
        )  # fmt: skip
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], _START_TIMEOUT_S)
            line = process.stdout.readline() if ready else ""
            if not line.strip():
                errors.seek(0)
                raise RuntimeError(f"{name} did not start: {' '.join(args)}\n{errors.read()}")
            yield Child(name, process, line.split()[-1])
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def server_process() -> contextlib.AbstractContextManager[Child]:
    """The harness server in its own process (:func:`serve`)."""
    return child("server", [sys.executable, "-m", "bench.gateway_bench", "serve"])


def replica_process(
    upstream: str,
    store: str = "memory",
    *,
    python: list[str] | None = None,
    options: list[str] | None = None,
) -> contextlib.AbstractContextManager[Child]:
    """One gateway replica in its own process: ``python -m fsm gateway`` in front of
    ``upstream``; ``python`` replaces the interpreter's part of the command (a profiler),
    ``options`` are more of the command's options (``--loop asyncio``); metrics are
    served as :data:`METRICS` says."""
    command = python or [sys.executable, "-m", "fsm"]
    args = ["gateway", "--upstream", upstream, "--listen", "127.0.0.1:0", "--store", store]
    if METRICS:
        args += ["--metrics", "127.0.0.1:0"]
    key = {"FSM_GATEWAY_ID_KEY": BENCH_ID_KEY}
    return child("gateway", command + args + (options or []), env=key)


@dataclass
class Deployment:
    """One configuration's processes: where clients connect, and what each part costs."""

    urls: list[str]
    server: Child
    replicas: list[Child]
    redis_pid: int | None = None
    """The Redis server's process when the replicas share it (its CPU is counted)."""

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far per part other than the clients: ``server``, ``gateway``
        (the replicas summed) and, with Redis, ``redis``."""
        parts = {"server": self.server.cpu(), "gateway": sum(r.cpu() for r in self.replicas)}
        if self.redis_pid is not None:
            parts["redis"] = cpu_seconds(self.redis_pid)
        return parts


@contextlib.contextmanager
def deployment(config: str, redis: Any = None) -> Iterator[Deployment]:
    """The processes of ``config`` (``direct``, ``gateway``, ``redis``: see the module
    docstring), each started fresh; ``redis`` is the running
    :class:`~support.redis_server.RedisServer` the ``redis`` configuration shares."""
    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}")
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(server_process())
        if config == "direct":
            yield Deployment([server.url], server, [])
            return
        store, count = ("memory", 1) if config == "gateway" else (str(redis.url), 2)
        replicas = [stack.enter_context(replica_process(server.url, store)) for _ in range(count)]
        pid = redis.pid if config == "redis" else None
        yield Deployment([r.url for r in replicas], server, replicas, pid)


@contextlib.contextmanager
def redis_counter(redis: Any) -> Iterator[Callable[[], int]]:
    """A reader of the commands the Redis server ``redis`` has processed so far (``INFO
    stats``), over one connection held open for the block: a reading's own ``INFO`` is
    counted by the next one (subtract 1 per reading in between)."""
    import redis as redis_py

    with redis_py.Redis.from_url(str(redis.url)) as client:
        yield lambda: int(client.info("stats")["total_commands_processed"])


@dataclass
class Spent:
    """What one load cost: its sessions' results, wall seconds, CPU seconds per process."""

    results: list[SessionResult]
    wall: float
    cpu: dict[str, float]
    """``clients`` (this process) and every process ``others`` named."""


def spent_on(
    urls: list[str], sessions: int, events: int, others: Callable[[], dict[str, float]]
) -> Spent:
    """Run ``sessions`` sessions of ``events`` events on ``urls``; the CPU this process
    (``clients``) and the processes ``others()`` reads (CPU seconds so far, by name)
    spent over it, and its wall time."""
    before, cpu, started = others(), time.process_time(), time.perf_counter()
    results = run_quietly(many_sessions, urls, sessions, events)
    wall, cpu, after = time.perf_counter() - started, time.process_time() - cpu, others()
    return Spent(results, wall, {"clients": cpu} | {k: after[k] - before[k] for k in after})


@dataclass
class Run:
    """One timed run of one configuration."""

    config: str
    wall: float
    cpu_parts: dict[str, float]
    """CPU seconds per process kind: ``clients``, ``server``, ``gateway`` (replicas
    summed), ``redis`` (the Redis server, in the ``redis`` configuration)."""
    latencies: list[float]
    presented: list[int]
    replica_rss: int = 0
    """The largest peak resident memory of the run's replicas, bytes (0: none)."""
    redis_commands: int | None = None
    """Commands the Redis server processed during the run (``redis`` only)."""

    @property
    def cpu(self) -> float:
        """CPU seconds of every process of the configuration."""
        return sum(self.cpu_parts.values())


def timed_run(config: str, sessions: int, events: int, redis: Any = None) -> Run:
    """One run of ``config``: fresh processes started and warmed up, then the clock runs
    over ``sessions`` concurrent sessions of ``events`` events."""
    with contextlib.ExitStack() as stack:
        d = stack.enter_context(deployment(config, redis))
        count = stack.enter_context(redis_counter(redis)) if d.redis_pid is not None else None
        run_quietly(many_sessions, d.urls, WARMUP_SESSIONS, 10)
        commands = count() if count is not None else None
        gc.collect()
        gc.freeze()
        try:
            spent = spent_on(d.urls, sessions, events, d.cpu)
        finally:
            gc.unfreeze()
        if count is not None and commands is not None:  # (both or neither)
            commands = count() - commands - 1
        return Run(
            config,
            spent.wall,
            spent.cpu,
            [lat for r in spent.results for lat in r.latencies],
            [r.presented for r in spent.results],
            max((peak_rss(r.pid) for r in d.replicas), default=0),
            commands,
        )


# --------------------------------------------------------------------------- probes


@dataclass
class Trips:
    """The round-trip probe's figures (operations, if the store has no round trips)."""

    unit: str
    sessions: int
    per_notification: float
    per_decision: float
    per_session: float
    by_op: dict[str, float]


async def trips_probe(upstream: str, redis_url: str | None, sessions: int, events: int) -> Trips:
    """Store round trips (Redis) or operations (memory) with 0 and ``events`` events."""
    config = "redis" if redis_url is not None else "gateway"
    counts: list[Counter[str]] = []
    for n_events in (0, events):
        async with endpoints(config, upstream, redis_url, serial=True) as ep:
            results = await many_sessions(ep.urls, sessions, n_events)
            assert all(r.presented == 1 for r in results)
        # the replicas stopped: their spawned store writes ran or were cancelled
        counts.append(Counter())
        for s in ep.stores:
            counts[-1].update(s.trips if redis_url is not None else s.ops)
    none, full = (sum(c.values()) for c in counts)
    trips = counts[-1]
    return Trips(
        "round trips" if redis_url is not None else "store calls",
        sessions,
        (full - none) / (sessions * events) if events else 0.0,
        trips["claim"] / sessions,  # one server request (the elicitation) per session
        full / sessions,
        {op: n / sessions for op, n in sorted(trips.items())},
    )


@dataclass
class Split:
    """The split probe's figures: CPU seconds per session and per event of each part,
    medians over the rounds."""

    sessions: int
    events: int
    rounds: int
    per_session: dict[str, float]
    """``clients``, ``server``, ``gateway``: CPU seconds per session with no event."""
    per_event: dict[str, float]
    """The same parts: CPU seconds per progress event (the runs' difference)."""

    def share(self, what: str) -> float:
        """The replica's CPU over the clients' and server's together, per ``session`` or
        per ``event``."""
        f = self.per_session if what == "session" else self.per_event
        return f["gateway"] / (f["clients"] + f["server"])


def split_probe(sessions: int, events: int, rounds: int) -> Split:
    """Per-session and per-event CPU of each part: one server process and one replica
    process, ``rounds`` rounds of ``sessions`` sessions with no event and with
    ``events`` events, alternating; per session from the first, per event from the
    difference. What a replica adds to a load of any shape follows from the two."""
    runs: dict[int, list[dict[str, float]]] = {0: [], events: []}
    with deployment("gateway") as d:
        run_quietly(many_sessions, d.urls, WARMUP_SESSIONS, 10)
        for n in alternating((0, events), rounds):
            gc.collect()
            runs[n].append(spent_on(d.urls, sessions, n, d.cpu).cpu)
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
    per_session = {k: v / sessions for k, v in med[0].items()}
    per_event = {k: (med[events][k] - med[0][k]) / (sessions * events) for k in med[0]}
    return Split(sessions, events, rounds, per_session, per_event)


def light_latency(events: int, repeats: int) -> dict[str, list[float]]:
    """Each event's latency with one session at a time (no queueing behind other
    sessions): what one hop through the gateway adds. One server process and one replica
    process; ``repeats`` sessions per configuration, alternating, after a warm-up."""
    out: dict[str, list[float]] = {"direct": [], "gateway": []}
    with deployment("gateway") as d:
        urls = {"direct": d.server.url, "gateway": d.urls[0]}
        run_quietly(many_sessions, list(urls.values()), 2, 10)
        for config in alternating(("direct", "gateway"), repeats):
            (result,) = run_quietly(many_sessions, [urls[config]], 1, events)
            out[config].extend(result.latencies)
    return out


@dataclass
class Memory:
    """The memory probe's figures."""

    max_sessions: int
    waves: int
    peak_held: int
    held_after: list[int]
    bytes_open: list[int]
    bytes_after: list[int]

    @property
    def per_open(self) -> float:
        """Median bytes per session while a wave's sessions are all open."""
        return statistics.median(b / self.max_sessions for b in self.bytes_open)

    @property
    def per_held(self) -> float:
        """Median bytes per held session after a wave (closed, not yet pushed out)."""
        pairs = zip(self.bytes_after, self.held_after, strict=True)
        return statistics.median(b / max(1, h) for b, h in pairs)


def held_bytes(gateway: Any) -> int:
    """Bytes of every object reachable from the replica's held sessions (its guards,
    event logs, stream and id tables, connections they own) and of the results the
    replica keeps for them (:mod:`fsm.gateway.kept`), each object counted once;
    the traversal stops at what the replica shares (the gateway itself, its upstream HTTP
    client, task group, store), at modules, classes and module globals, and at the event
    loop."""
    import asyncio
    import sys
    import types

    sessions = gateway._sessions  # read only: the held sessions
    kept = gateway._kept  # shared: each session's own results are counted below
    stop = {id(x) for x in (gateway, sessions, kept, gateway._tg, gateway.store, gateway._http)}
    stop.add(id(asyncio.get_running_loop()))
    stop.update(id(vars(m)) for m in list(sys.modules.values()) if m is not None)
    opaque = (type, types.ModuleType, types.FrameType)
    seen: set[int] = set()
    todo: list[Any] = list(sessions.values())
    todo += [piece for session in sessions.values() for piece in kept.of(session).values()]
    total = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or id(obj) in stop or isinstance(obj, opaque):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


class _Barrier:
    """``wait()`` returns once ``parties`` callers are in it; the last runs ``last`` first."""

    def __init__(self, parties: int, last: Callable[[], object]) -> None:
        import anyio

        self.parties, self.last, self.arrived = parties, last, 0
        self.open = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.parties:
            self.last()
            self.open.set()
        await self.open.wait()


async def memory_probe(upstream: str, sessions: int, events: int, waves: int) -> Memory:
    """One replica holding at most ``sessions // waves`` sessions, ``waves`` waves of that
    many sessions at once (see the module docstring)."""
    from fsm.gateway.app import GatewayLimits

    per_wave = max(1, sessions // waves)
    got = Memory(per_wave, waves, 0, [], [], [])
    async with endpoints("gateway", upstream, limits=GatewayLimits(max_sessions=per_wave)) as ep:
        gateway = ep.gateways[0]
        async with sampling(lambda: int(gateway.sessions), 0.005) as held:
            for _ in range(waves):
                barrier = _Barrier(per_wave, lambda: got.bytes_open.append(held_bytes(gateway)))
                await many_sessions(ep.urls, per_wave, events, barrier.wait)
                got.bytes_after.append(held_bytes(gateway))
                got.held_after.append(int(gateway.sessions))
        got.peak_held = held[0]
    return got


# --------------------------------------------------------------------------- the whole run


@dataclass
class Report:
    """Everything one invocation measured."""

    sessions: int
    events: int
    repeats: int
    runs: list[Run]
    trips: Trips
    memory: Memory
    light: dict[str, list[float]]
    """Per configuration, every event's latency of :func:`light_latency`."""
    split: Split
    redis: str
    """``"on"``, or why the Redis rows are missing."""
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def of(self, config: str) -> list[Run]:
        """The timed runs of ``config``."""
        return [r for r in self.runs if r.config == config]

    @property
    def configs(self) -> list[str]:
        """The configurations measured, in table order."""
        return [c for c in CONFIGS if self.of(c)]


@contextlib.contextmanager
def _redis() -> Iterator[tuple[Any, str]]:
    """The running Redis server for the ``redis`` rows, or ``None`` and why not."""
    parts = redis_parts()
    if isinstance(parts, str):
        yield None, parts
        return
    with parts[1]() as server:
        yield server, "on"


async def _probes(redis_url: str | None, sessions: int, events: int) -> tuple[Trips, Memory]:
    from fsm.wire.server import running_server

    async with running_server() as server:
        trips = await trips_probe(server.url, redis_url, min(sessions, PROBE_SESSIONS), events)
        memory = await memory_probe(server.url, sessions, events, WAVES)
    return trips, memory


def measure(
    sessions: int = SESSIONS,
    events: int = EVENTS,
    repeats: int = REPEATS,
    *,
    light_repeats: int = LIGHT_REPEATS,
    split_rounds: int = SPLIT_ROUNDS,
) -> Report:
    """Run every configuration (``repeats`` times) and the probes (the one-session
    latency ``light_repeats`` times, the cost split ``split_rounds`` rounds); check the
    correctness figures (every elicitation presented exactly once, every event arrived,
    held sessions within ``max_sessions``) and return the figures."""
    runs: list[Run] = []
    with _redis() as (redis, why):
        configs = [c for c in CONFIGS if c != "redis" or redis is not None]
        for config in alternating(configs, repeats):
            runs.append(timed_run(config, sessions, events, redis))
        url = str(redis.url) if redis is not None else None
        trips, memory = run_quietly(_probes, url, sessions, events)
    light = light_latency(events, light_repeats)
    split = split_probe(min(sessions, SPLIT_SESSIONS), 2 * events, split_rounds)
    report = Report(
        sessions, events, repeats, runs, trips, memory, light, split, why, os.getloadavg()
    )
    for run in report.runs:
        assert run.presented == [1] * sessions, (run.config, Counter(run.presented))
        assert len(run.latencies) == sessions * events, run.config
    assert report.memory.peak_held <= report.memory.max_sessions, report.memory
    return report


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


PARTS = ("clients", "server", "gateway", "redis")
"""The processes whose CPU a run adds up, in table order."""


def summary(report: Report) -> dict[str, dict[str, float]]:
    """Per configuration: medians of wall seconds, of CPU seconds (in all and per part:
    ``cpu_clients``, ``cpu_server``, ...), the CPU ratio over direct and the replicas'
    share of the configuration's CPU (Redis server included), latency p50 and p99 (ms,
    pooled over the runs), the most presentations of one elicitation, a replica's peak
    RSS (the largest), Redis commands per session (median; NaN without Redis), and
    ``own_ratio``: 1 + the replicas' and Redis's CPU over direct's (the clients and server
    counted as in the direct runs)."""
    out: dict[str, dict[str, float]] = {}
    for config in report.configs:
        runs = report.of(config)
        lat = [x for r in runs for x in r.latencies]
        commands = [r.redis_commands for r in runs if r.redis_commands is not None]
        figures = {
            "wall": statistics.median(r.wall for r in runs),
            "cpu": statistics.median(r.cpu for r in runs),
            "p50": _pct(lat, 0.50) * 1e3,
            "p99": _pct(lat, 0.99) * 1e3,
            "presented": max(max(r.presented) for r in runs),
            "rss": max(r.replica_rss for r in runs),
            "commands": statistics.median(commands) / report.sessions if commands else math.nan,
            "gateway_share": statistics.median(
                (r.cpu_parts.get("gateway", 0.0) + r.cpu_parts.get("redis", 0.0)) / r.cpu
                for r in runs
            ),
        }
        for part in PARTS:
            figures[f"cpu_{part}"] = statistics.median(r.cpu_parts.get(part, 0.0) for r in runs)
        figures["own"] = figures["cpu_gateway"] + figures["cpu_redis"]
        out[config] = figures
    for figures in out.values():
        figures["cpu_ratio"] = figures["cpu"] / out["direct"]["cpu"]
        figures["own_ratio"] = 1 + figures["own"] / out["direct"]["cpu"]
    return out


def light_summary(report: Report) -> tuple[tuple[float, float], tuple[float, float]]:
    """``((p50, p99) direct, (p50, p99) gateway)`` of :func:`light_latency`, ms."""
    d, g = report.light["direct"], report.light["gateway"]
    return (_pct(d, 0.5) * 1e3, _pct(d, 0.99) * 1e3), (_pct(g, 0.5) * 1e3, _pct(g, 0.99) * 1e3)


def render(report: Report) -> str:
    """The table and its footer lines (printed), as text."""
    figures = summary(report)
    n = report.sessions * report.events
    rows = [
        (
            config,
            f["wall"],
            f["cpu"],
            *(f[f"cpu_{part}"] for part in PARTS),
            f["cpu_ratio"],
            n / f["wall"],
            f["p50"],
            f["p99"],
            int(f["presented"]),
        )
        for config, f in figures.items()
    ]
    text = table(
        rows,
        header=(
            f"{report.sessions} sessions x {report.events} events + 1 elicitation",
            "wall s",
            "CPU s",
            *(f"{part} CPU s" for part in PARTS),
            "CPU / direct",
            "events/s",
            "p50 ms",
            "p99 ms",
            "max presented",
        ),
    )
    lines: list[str] = []
    for config in ("gateway", "redis"):
        if config in figures:
            f, d = figures[config], figures["direct"]
            verdict = "meets" if f["cpu_ratio"] <= TARGET_CPU_RATIO else "misses"
            lines.append(
                f"{config}: CPU {f['cpu_ratio']:.2f}x direct ({verdict} the target <= "
                f"{TARGET_CPU_RATIO}; the replicas{' and Redis' if config == 'redis' else ''}"
                f" {100 * f['gateway_share']:.0f}% of it; direct's CPU plus theirs "
                f"{f['own_ratio']:.2f}x direct); latency added p50 "
                f"{f['p50'] - d['p50']:+.2f} ms, p99 {f['p99'] - d['p99']:+.2f} ms; a "
                f"replica's peak RSS {f['rss'] / 2**20:,.0f} MB"
            )
    sp = report.split
    lines.append(
        f"cost split (one replica, {sp.sessions} sessions with 0 and {sp.events} events, "
        f"{sp.rounds} rounds): per session clients {sp.per_session['clients'] * 1e3:.1f} ms, "
        f"server {sp.per_session['server'] * 1e3:.1f} ms, replica "
        f"{sp.per_session['gateway'] * 1e3:.1f} ms ({100 * sp.share('session'):.0f}% of the "
        f"two); per event clients {sp.per_event['clients'] * 1e6:.0f} us, server "
        f"{sp.per_event['server'] * 1e6:.0f} us, replica {sp.per_event['gateway'] * 1e6:.0f} "
        f"us ({100 * sp.share('event'):.0f}%)"
    )
    (d50, d99), (g50, g99) = light_summary(report)
    lines.append(
        f"one session at a time ({len(report.light['direct']) // report.events} each, "
        f"{report.events} events): latency "
        f"p50/p99 direct {d50:.2f}/{d99:.2f} ms, gateway {g50:.2f}/{g99:.2f} ms, added "
        f"{g50 - d50:+.2f}/{g99 - d99:+.2f} ms"
    )
    lines.append(
        f"presentations per elicitation: exactly 1 in all {len(report.runs)} runs x "
        f"{report.sessions} sessions (none presented twice, none lost)"
    )
    t = report.trips
    lines.append(
        f"{t.unit} ({t.sessions} sessions, serialised): per plain notification "
        f"{t.per_notification:.3f} (target 0), per request decision {t.per_decision:.2f} "
        f"(target 1), per session {t.per_session:.2f}: "
        + ", ".join(f"{op} {v:.2f}" for op, v in t.by_op.items())
    )
    if "redis" in figures:
        lines.append(
            f"Redis commands per session under load (the Redis server's count): "
            f"{figures['redis']['commands']:.2f}"
        )
    else:
        lines.append(f"redis rows: {report.redis}")
    m = report.memory
    lines.append(
        f"gateway memory (objects reachable from its held sessions), max_sessions "
        f"{m.max_sessions}, {m.waves} waves: {m.per_open:,.0f} B per open "
        f"session, {m.per_held:,.0f} B per held closed session; held after "
        f"each wave {m.held_after}, peak held {m.peak_held} <= {m.max_sessions}; bytes after "
        f"first/last wave {m.bytes_after[0]:,} / {m.bytes_after[-1]:,}"
    )
    one, five, fifteen = report.loadavg
    lines.append(
        f"load average during the run: {one:.2f} {five:.2f} {fifteen:.2f} (2 cores shared); "
        f"{report.repeats} rounds, alternating order, each run on fresh processes"
    )
    for line in lines:
        print(line)
    return text + "\n" + "\n".join(lines)


# --------------------------------------------------------------------------- child entries


def serve() -> None:
    """``python -m bench.gateway_bench serve``: the harness server in this process; prints
    ``serving <url>`` once it accepts connections, serves until ``SIGTERM``."""
    import anyio

    from fsm.wire.server import running_server

    async def run() -> None:
        async with running_server() as server:
            print(f"serving {server.url}", flush=True)
            await anyio.sleep_forever()

    run_quietly(run)


def profiled(out: str, argv: list[str]) -> int:
    """``python -m bench.gateway_bench profiled OUT gateway ARGS...``: ``python -m fsm
    gateway ARGS...`` with a profiler switched on by ``SIGUSR1`` and off by ``SIGUSR2``,
    which writes its statistics to ``OUT`` and the seconds of CPU spent in garbage
    collection meanwhile to ``OUT.gc`` (written last: its presence says both are done)."""
    import cProfile

    from fsm.__main__ import main as fsm_main

    profiler = cProfile.Profile(time.process_time)  # CPU, not the idle waits in epoll
    collecting = [False, 0.0, 0.0]  # on, CPU at this collection's start, CPU in collections

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if collecting[0] and phase == "start":
            collecting[1] = time.process_time()
        elif collecting[0] and phase == "stop":
            collecting[2] = float(collecting[2]) + time.process_time() - float(collecting[1])

    def on(signum: int, frame: object) -> None:
        collecting[0] = True
        profiler.enable()

    def off(signum: int, frame: object) -> None:
        profiler.disable()
        collecting[0] = False
        profiler.dump_stats(out)
        Path(out + ".gc").write_text(str(collecting[2]))

    gc.callbacks.append(on_gc)
    signal.signal(signal.SIGUSR1, on)
    signal.signal(signal.SIGUSR2, off)
    return fsm_main(argv)


# --------------------------------------------------------------------------- profile


PROFILE_SESSIONS = 40


def _package(path: str) -> str:
    if "site-packages/" in path:
        return path.split("site-packages/")[-1].split("/")[0]
    if "/fsm/" in path:
        return "fsm (guard, core, gateway)"
    if "asyncio" in path:
        return "asyncio"
    return "builtins and stdlib"


def profile() -> None:
    """Where a replica's CPU goes (``python -m bench.gateway_bench profile``): one replica
    process under ``cProfile`` (on only while :data:`PROFILE_SESSIONS` sessions of
    ``EVENTS`` events run through it, after a warm-up), own time per package, and its CPU
    spent in garbage collection. Profiling slows the Python code, not the collections: the
    collections' share is smaller than it is unprofiled."""
    import pstats

    with tempfile.TemporaryDirectory(prefix="gateway-profile-") as tmp:
        out = str(Path(tmp) / "gateway.prof")
        command = [sys.executable, "-m", "bench.gateway_bench", "profiled", out]
        with server_process() as server, replica_process(server.url, python=command) as gw:
            run_quietly(many_sessions, [gw.url], WARMUP_SESSIONS, 10)
            gw.process.send_signal(signal.SIGUSR1)
            cpu = gw.cpu()
            run_quietly(many_sessions, [gw.url], PROFILE_SESSIONS, EVENTS)
            cpu = gw.cpu() - cpu
            gw.process.send_signal(signal.SIGUSR2)
            done = Path(out + ".gc")
            deadline = time.monotonic() + 30
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)  # the replica writes its statistics from its signal handler
            collections = float(done.read_text())
        stats: Any = getattr(pstats.Stats(out), "stats")  # noqa: B009 (untyped in typeshed)
    spent: Counter[str] = Counter()
    for (path, _, _), (_, _, own, _, _) in stats.items():
        spent[_package(path)] += own
    total = sum(spent.values())
    table(
        [(k, round(v, 2), f"{100 * v / total:.0f}%") for k, v in spent.most_common()],
        header=(f"replica, {PROFILE_SESSIONS} sessions (own time, s)", "profiled", "share"),
    )
    print(
        f"the replica's CPU while profiled: {cpu:.2f} s, of which garbage collection "
        f"{collections:.2f} s ({100 * collections / cpu:.0f}%)"
    )


PAIRED_ROUNDS = 6
PLAIN_STACK = ["--loop", "asyncio", "--http", "h11"]
"""The replica options of the stack comparison's baseline: uvicorn's pure-Python stack."""


@dataclass(frozen=True)
class Kind:
    """A kind of replica: its name, ``fsm gateway`` options, and store (``"redis"``: the
    loopback Redis server's URL)."""

    name: str
    options: tuple[str, ...] = ()
    store: str = "memory"


PAIRS = {
    "stack": (
        Kind("defaults"),
        Kind("asyncio + h11", tuple(PLAIN_STACK)),
        "gateway_replica_defaults_over_plain_stack",
    ),
    "store": (
        Kind("Redis store", store="redis"),
        Kind("memory store"),
        "gateway_replica_redis_store_over_memory_store",
    ),
    "same": (Kind("one"), Kind("another"), "gateway_replica_same_kind"),
}
"""What ``python -m bench.gateway_bench paired [NAME]`` compares, and the figure it records
(``stack`` by default; ``same``: two replicas of one kind, the method's own noise)."""


def measure_paired(
    name: str = "stack", rounds: int = PAIRED_ROUNDS, sessions: int = SPLIT_SESSIONS
) -> list[tuple[float, float]]:
    """Two replicas of the kinds of ``PAIRS[name]`` in front of one server at the same
    time, half of ``sessions`` sessions of ``EVENTS`` events through each, ``rounds``
    times: each round's CPU seconds of the first and of the second. Both run in the same
    seconds, so the machine's drift, which moves one configuration's CPU by a fifth
    between runs, hits both alike; which one starts first alternates by round."""
    kinds = PAIRS[name][:2]
    spent: list[tuple[float, float]] = []
    with _redis() as (redis, why):
        if any(k.store == "redis" for k in kinds) and redis is None:
            raise RuntimeError(f"paired {name} needs Redis: {why}")
        stores = [str(redis.url) if k.store == "redis" else k.store for k in kinds]
        with server_process() as server:
            for i in range(rounds):
                # which kind starts first, and so where the kernel places it, alternates:
                # in a run by hand the first-started of two like replicas took 0.92x
                order = (0, 1) if i % 2 == 0 else (1, 0)
                with contextlib.ExitStack() as stack:
                    started = {
                        k: stack.enter_context(
                            replica_process(server.url, stores[k], options=list(kinds[k].options))
                        )
                        for k in order
                    }
                    urls = [started[k].url for k in order]
                    run_quietly(many_sessions, urls, 2 * WARMUP_SESSIONS, 10)
                    named = {"first": started[0], "second": started[1]}
                    cpu = spent_on(urls, sessions, EVENTS, functools.partial(cpu_of, named)).cpu
                spent.append((cpu["first"], cpu["second"]))
    return spent


def paired(name: str = "stack") -> list[float]:
    """``python -m bench.gateway_bench paired [NAME]``: :func:`measure_paired`, a table of
    its rounds and the first replica's CPU over the second's; records their median."""
    first, second, figure = PAIRS[name]
    spent = measure_paired(name)
    ratios = [a / b for a, b in spent]
    table(
        [(i + 1, round(a, 2), round(b, 2), round(a / b, 3)) for i, (a, b) in enumerate(spent)],
        header=("round", f"{first.name} CPU s", f"{second.name} CPU s", "ratio"),
    )
    print(
        f"a replica with the {first.name} over one with the {second.name} "
        f"({SPLIT_SESSIONS // 2} sessions x {EVENTS} events each, at once): median "
        f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"
    )
    record(figure, round(statistics.median(ratios), 3), "ratio")
    return ratios


def main() -> Report:
    """Measure, print the table, record the figures."""
    report = measure()
    render(report)
    figures = summary(report)
    tag = f"{report.sessions}x{report.events}"
    for config, f in figures.items():
        record(f"gateway_{tag}_{config}_wall_s", round(f["wall"], 3), "s")
        record(f"gateway_{tag}_{config}_cpu_s", round(f["cpu"], 3), "s")
        record(f"gateway_{tag}_{config}_p50_ms", round(f["p50"], 3), "ms")
        record(f"gateway_{tag}_{config}_p99_ms", round(f["p99"], 3), "ms")
        if config != "direct":
            record(f"gateway_{tag}_{config}_cpu_over_direct", round(f["cpu_ratio"], 3), "ratio")
            record(f"gateway_{tag}_{config}_cpu_share", round(f["gateway_share"], 3), "share")
            record(f"gateway_{tag}_{config}_own_over_direct", round(f["own_ratio"], 3), "ratio")
            record(f"gateway_{tag}_{config}_replica_rss_mb", round(f["rss"] / 2**20, 1), "MB")
    t = report.trips
    unit = "round trips" if t.unit == "round trips" else "store calls"
    record("gateway_store_per_notification", round(t.per_notification, 4), unit)
    record("gateway_store_per_decision", round(t.per_decision, 3), unit)
    m = report.memory
    record("gateway_bytes_per_held_session", round(m.per_held), "bytes")
    (d50, d99), (g50, g99) = light_summary(report)
    record("gateway_one_session_added_p50_ms", round(g50 - d50, 3), "ms")
    record("gateway_one_session_added_p99_ms", round(g99 - d99, 3), "ms")
    sp = report.split
    for part, value in sp.per_session.items():
        record(f"gateway_split_{part}_per_session_ms", round(value * 1e3, 2), "ms")
    for part, value in sp.per_event.items():
        record(f"gateway_split_{part}_per_event_us", round(value * 1e6, 1), "us")
    record("gateway_bench_loadavg_1min", round(report.loadavg[0], 2), "load")
    return report


if __name__ == "__main__":
    command = sys.argv[1:2]
    if command == ["serve"]:
        serve()
    elif command == ["profiled"]:
        raise SystemExit(profiled(sys.argv[2], sys.argv[3:]))
    elif command == ["profile"]:
        profile()
    elif command == ["paired"]:
        paired(sys.argv[2] if len(sys.argv) > 2 else "stack")
    else:
        main()
