"""The guarding gateway under the load it was built for: many concurrent sessions, each with
one elicitation and a stream of progress events, direct and through the gateway, side by side.

Each session is the unmodified mcp client (``ClientSession`` over ``streamable_http_client``,
its own HTTP client): it opens a session, calls the harness tool ``work(count)`` (the server
asks one ``elicitation/create``, which the client's callback answers at once, then streams
``count`` ``notifications/progress``), waits for every event and closes the session (a
``DELETE``). ``SESSIONS`` sessions run at once. The configurations, in one process, on one
harness server:

* ``direct``: client -> server;
* ``gateway``: client -> one gateway replica (:class:`~fsm.gateway.store.MemoryStore`) ->
  server;
* ``redis``: client -> one of two replicas sharing a Redis store (a loopback
  ``redis-server``; half of the clients on each replica, each client's requests all to
  its replica, as a sticky balancer sends them) -> server. Only when the Redis store and
  runner are importable and ``redis-server`` is installed; ``GATEWAY_BENCH_REDIS=0``
  switches it off.

Every configuration gets a fresh gateway per run (started before the clock runs); one
warm-up run each, then ``REPEATS`` rounds in alternating order (forward, then reversed)
so that drift hits all alike; before each run the garbage of earlier runs is collected
and the surviving heap frozen (the server's event store grows with every session).

Measured per run: wall time from the first session's start until the last closed;
process CPU time (``time.process_time``: the whole in-process system, clients, server and
gateway; the Redis server is another process and not in it); each event's latency (the
server stamps ``time.perf_counter()`` into the progress ``message`` when it sends it,
the client subtracts it from its clock when the callback runs: same process, same clock);
how many times each session's elicitation was presented (must be exactly 1: asserted);
the state store's operations by kind and, for Redis, ``round_trips``. Under this load an
event's latency is mostly its wait behind the other sessions' events in the one event
loop (seconds at 200 sessions), so the latency the gateway adds per hop is measured
apart, one session at a time (below).

Then three probes, off the clock:

* **round trips** (Redis if available, else the memory store's operation count):
  ``PROBE_SESSIONS`` sessions with 0 events and again with ``EVENTS`` events, the store's
  calls serialised so each call's round trips are exact. Per plain notification: the
  difference of the two runs' round trips over the notifications added (target 0); per
  request decision: the round trips of the ``claim`` calls (the gateway's decision to
  present a server request) over the requests (target 1).
* **memory**: one replica with ``max_sessions = SESSIONS // WAVES``, ``SESSIONS``
  sessions in ``WAVES`` waves of that many at once: the bytes of every object reachable
  from the replica's held sessions (:func:`held_bytes`: guards, event logs, id tables,
  what the sessions own; not what the replica shares) while a wave's sessions are all
  open, and after each wave (closed sessions stay held until pushed out), with the
  replica's held sessions sampled throughout (must never exceed ``max_sessions``:
  asserted). ``tracemalloc`` attributes allocations to the gateway only with deep
  tracebacks, which slowed a 3-session run from under a second to minutes: not used.
  The process's peak RSS is reported too; it holds everything (clients, server, every run).
* **one session at a time**: ``LIGHT_REPEATS`` single sessions of ``EVENTS`` events per
  configuration, alternating, direct and through one replica: each event's latency
  without queueing, p50/p99, and the difference.

Environment: ``GATEWAY_BENCH_SESSIONS`` (default 40), ``GATEWAY_BENCH_EVENTS`` (100),
``GATEWAY_BENCH_REPEATS`` (3), ``GATEWAY_BENCH_REDIS`` (``0`` to skip Redis). The
promised load, 200 sessions x 100 events
(``GATEWAY_BENCH_SESSIONS=200``), takes some 10 minutes on the shared 2-core machine with
two rounds (a run of one configuration is 1-2 minutes there), so it is not the default;
the default finishes in a few minutes.

Found by this benchmark and fixed in the gateway: an upstream pool capped at httpx2's
100 connections (each streaming session holds two: past some 50 sessions requests failed
with ``PoolTimeout``) and idle connections kept as long as the server keeps them (one
reused as the server closed it: ``ReadError``); ``GatewayLimits.upstream_connections``
and ``upstream_idle_s`` now say both.

Recorded (``gateway_*``): wall and CPU medians per configuration, CPU ratios over direct
(target <= 1.3), latency p50/p99 per configuration and added by the gateway, round trips
per notification and per decision, gateway bytes per held session, latency added one
session at a time.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import shutil
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.e2e_bench import _plain
from bench.results import record, run_quietly, table


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


SESSIONS = _env_int("GATEWAY_BENCH_SESSIONS", 40)
EVENTS = _env_int("GATEWAY_BENCH_EVENTS", 100)
REPEATS = _env_int("GATEWAY_BENCH_REPEATS", 3)
PROBE_SESSIONS = 10
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
        runner = importlib.import_module("fsm.harness.redis_server")
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

    from fsm.harness.sdk import hx

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


# --------------------------------------------------------------------------- configurations


@dataclass
class Endpoints:
    """Where a configuration's clients connect, and its replicas' counted stores."""

    urls: list[str]
    stores: list[CountingStore] = field(default_factory=list)
    gateways: list[Any] = field(default_factory=list)

    def round_trips(self) -> int | None:
        """The stores' round trips so far, summed (``None``: no store, or one without IO)."""
        trips = [s.round_trips for s in self.stores]
        return None if not trips or None in trips else sum(t or 0 for t in trips)

    def ops(self) -> Counter[str]:
        """The stores' calls so far by operation, summed."""
        total: Counter[str] = Counter()
        for s in self.stores:
            total.update(s.ops)
        return total


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
    ``upstream``; fresh replicas and stores each time."""
    from fsm.gateway.store import MemoryStore
    from fsm.harness.gateway import running_gateway

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
    async with contextlib.AsyncExitStack() as stack:
        running = [
            await stack.enter_async_context(running_gateway(upstream, store=s, **gateway_kw))
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


@dataclass
class Run:
    """One timed run of one configuration."""

    config: str
    wall: float
    cpu: float
    latencies: list[float]
    presented: list[int]
    ops: Counter[str]
    round_trips: int | None


async def timed_run(
    config: str, upstream: str, redis_url: str | None, sessions: int, events: int
) -> Run:
    """One run of ``config``: its endpoints started, then the clock runs over the sessions."""
    async with endpoints(config, upstream, redis_url) as ep:
        trips = ep.round_trips()
        gc.collect()
        gc.freeze()
        try:
            started, cpu = time.perf_counter(), time.process_time()
            results = await many_sessions(ep.urls, sessions, events)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        finally:
            gc.unfreeze()
        after = ep.round_trips()
        return Run(
            config,
            wall,
            cpu,
            [lat for r in results for lat in r.latencies],
            [r.presented for r in results],
            ep.ops(),
            None if after is None or trips is None else after - trips,
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


async def light_latency(upstream: str, events: int, repeats: int) -> dict[str, list[float]]:
    """Each event's latency with one session at a time (no queueing behind other
    sessions): what one hop through the gateway adds. ``repeats`` sessions per
    configuration, alternating."""
    out: dict[str, list[float]] = {"direct": [], "gateway": []}
    for i in range(repeats):
        for config in ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct"):
            async with endpoints(config, upstream) as ep:
                (result,) = await many_sessions(ep.urls, 1, events)
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
    event logs, stream and id tables, connections they own), each object counted once;
    the traversal stops at what the replica shares (the gateway itself, its upstream HTTP
    client, task group, store), at modules, classes and module globals, and at the event
    loop."""
    import asyncio
    import sys
    import types

    sessions = gateway._sessions  # read only: the held sessions
    stop = {id(x) for x in (gateway, sessions, gateway._http, gateway._tg, gateway.store)}
    stop.add(id(asyncio.get_running_loop()))
    stop.update(id(vars(m)) for m in list(sys.modules.values()) if m is not None)
    opaque = (type, types.ModuleType, types.FrameType)
    seen: set[int] = set()
    todo: list[Any] = list(sessions.values())
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
    redis: str
    """``"on"``, or why the Redis rows are missing."""
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    peak_rss: int = 0
    """The process's peak resident memory, bytes (everything in it, all runs)."""

    def of(self, config: str) -> list[Run]:
        """The timed runs of ``config``."""
        return [r for r in self.runs if r.config == config]

    @property
    def configs(self) -> list[str]:
        """The configurations measured, in table order."""
        return [c for c in CONFIGS if self.of(c)]


@contextlib.contextmanager
def _redis_url() -> Iterator[tuple[str | None, str]]:
    parts = redis_parts()
    if isinstance(parts, str):
        yield None, parts
        return
    with parts[1]() as server:
        yield str(server.url), "on"


async def _measure(
    sessions: int, events: int, repeats: int, redis_url: str | None, redis: str
) -> Report:
    from fsm.harness.server import running_server

    configs = [c for c in CONFIGS if c != "redis" or redis_url is not None]
    runs: list[Run] = []
    async with running_server() as server:
        for config in configs:  # warm-up: imports, first connections, code paths
            await timed_run(config, server.url, redis_url, min(sessions, 10), events)
        for i in range(repeats):
            for config in configs if i % 2 == 0 else configs[::-1]:
                runs.append(await timed_run(config, server.url, redis_url, sessions, events))
        trips = await trips_probe(server.url, redis_url, min(sessions, PROBE_SESSIONS), events)
        memory = await memory_probe(server.url, sessions, events, WAVES)
        light = await light_latency(server.url, events, LIGHT_REPEATS)
    return Report(
        sessions, events, repeats, runs, trips, memory, light, redis, os.getloadavg(), _peak_rss()
    )


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def measure(sessions: int = SESSIONS, events: int = EVENTS, repeats: int = REPEATS) -> Report:
    """Run every configuration and both probes; check the correctness figures (every
    elicitation presented exactly once, every event arrived, held sessions within
    ``max_sessions``) and return the figures."""
    with _redis_url() as (url, redis):
        report = run_quietly(_measure, sessions, events, repeats, url, redis)
    for run in report.runs:
        assert run.presented == [1] * sessions, (run.config, Counter(run.presented))
        assert len(run.latencies) == sessions * events, run.config
    assert report.memory.peak_held <= report.memory.max_sessions, report.memory
    return report


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summary(report: Report) -> dict[str, dict[str, float]]:
    """Per configuration: medians of wall and CPU seconds, CPU ratio over direct, latency
    p50 and p99 (ms, pooled over the runs), store calls per session, round trips per
    session (Redis)."""
    out: dict[str, dict[str, float]] = {}
    for config in report.configs:
        runs = report.of(config)
        lat = [x for r in runs for x in r.latencies]
        trips = [r.round_trips for r in runs if r.round_trips is not None]
        out[config] = {
            "wall": statistics.median(r.wall for r in runs),
            "cpu": statistics.median(r.cpu for r in runs),
            "p50": _pct(lat, 0.50) * 1e3,
            "p99": _pct(lat, 0.99) * 1e3,
            "ops": statistics.median(sum(r.ops.values()) for r in runs) / report.sessions,
            "trips": statistics.median(trips) / report.sessions if trips else float("nan"),
            "presented": max(max(r.presented) for r in runs),
        }
    for figures in out.values():
        figures["cpu_ratio"] = figures["cpu"] / out["direct"]["cpu"]
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
            f["cpu_ratio"],
            n / f["wall"],
            f["p50"],
            f["p99"],
            int(f["presented"]),
            f["ops"],
        )
        for config, f in figures.items()
    ]
    text = table(
        rows,
        header=(
            f"{report.sessions} sessions x {report.events} events + 1 elicitation",
            "wall s",
            "CPU s",
            "CPU / direct",
            "events/s",
            "p50 ms",
            "p99 ms",
            "max presented",
            "store calls/session",
        ),
    )
    lines: list[str] = []
    for config in ("gateway", "redis"):
        if config in figures:
            f, d = figures[config], figures["direct"]
            verdict = "meets" if f["cpu_ratio"] <= TARGET_CPU_RATIO else "misses"
            lines.append(
                f"{config}: CPU {f['cpu_ratio']:.2f}x direct ({verdict} the target <= "
                f"{TARGET_CPU_RATIO}); latency added p50 {f['p50'] - d['p50']:+.2f} ms, "
                f"p99 {f['p99'] - d['p99']:+.2f} ms"
            )
    (d50, d99), (g50, g99) = light_summary(report)
    lines.append(
        f"one session at a time ({LIGHT_REPEATS} each, {report.events} events): latency "
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
        lines.append(f"redis round trips per session under load: {figures['redis']['trips']:.2f}")
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
    lines.append(
        f"process peak RSS {report.peak_rss / 2**20:,.0f} MB (clients, server and replicas of "
        "every run in one process)"
    )
    one, five, fifteen = report.loadavg
    lines.append(
        f"load average during the run: {one:.2f} {five:.2f} {fifteen:.2f} (2 cores shared); "
        f"{report.repeats} rounds, alternating order, after one warm-up run each"
    )
    for line in lines:
        print(line)
    return text + "\n" + "\n".join(lines)


PROFILE_SESSIONS = 40


async def _profiled(upstream: str, config: str) -> Counter[str]:
    """Seconds of own time per package (cProfile) of :data:`PROFILE_SESSIONS` sessions of
    ``EVENTS`` events through ``config``, after a warm-up."""
    import cProfile
    import pstats

    async with endpoints(config, upstream) as ep:
        await many_sessions(ep.urls, 5, 20)
        profiler = cProfile.Profile()
        profiler.enable()
        await many_sessions(ep.urls, PROFILE_SESSIONS, EVENTS)
        profiler.disable()
    spent: Counter[str] = Counter()
    stats: Any = getattr(pstats.Stats(profiler), "stats")  # noqa: B009 (untyped in typeshed)
    for (path, _, _), (_, _, own, _, _) in stats.items():
        if "site-packages/" in path:
            package = path.split("site-packages/")[-1].split("/")[0]
        elif "/fsm/" in path:
            package = "fsm (guard, core, gateway)"
        elif "asyncio" in path:
            package = "asyncio"
        else:
            package = "builtins and stdlib"
        spent[package] += own
    return spent


def profile() -> None:
    """Where the gateway's added CPU goes: the cProfile own time per package, gateway
    minus direct, in one process on one harness server (``python -m bench.gateway_bench
    profile``; profiling slows both alike)."""
    import anyio

    from fsm.harness.server import running_server

    async def run() -> tuple[Counter[str], Counter[str]]:
        async with running_server() as server:
            return await _profiled(server.url, "direct"), await _profiled(server.url, "gateway")

    direct, gateway = anyio.run(run, backend="asyncio")
    added = {k: gateway[k] - direct[k] for k in gateway}
    total = sum(added.values())
    rows = sorted(added.items(), key=lambda kv: -kv[1])
    share = {k: f"{100 * v / total:.0f}%" for k, v in rows}
    table(
        [(k, round(direct[k], 2), round(gateway[k], 2), share[k]) for k, _ in rows],
        header=("package (own time, s)", "direct", "gateway", "share of the added"),
    )


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
    t = report.trips
    unit = "round trips" if t.unit == "round trips" else "store calls"
    record("gateway_store_per_notification", round(t.per_notification, 4), unit)
    record("gateway_store_per_decision", round(t.per_decision, 3), unit)
    m = report.memory
    record(
        "gateway_bytes_per_held_session",
        round(m.per_held),
        "bytes",
    )
    (d50, d99), (g50, g99) = light_summary(report)
    record("gateway_one_session_added_p50_ms", round(g50 - d50, 3), "ms")
    record("gateway_one_session_added_p99_ms", round(g99 - d99, 3), "ms")
    record("gateway_bench_loadavg_1min", round(report.loadavg[0], 2), "load")
    return report


if __name__ == "__main__":
    import sys

    profile() if sys.argv[1:2] == ["profile"] else main()
