"""What durability costs a client: per presentation and per progress event, with the
SQLite store (``synchronous=FULL``, a synced WAL commit per write) and the Redis store (a
loopback ``redis-server`` with ``appendonly yes`` and ``appendfsync always``: a synced AOF
write per acknowledged script call) against the in-memory store and against a guard that
is not durable.

(a) A new ``elicitation/create`` delivered, recorded and presented: ``feed`` plus the
    ``Persist`` written to the store (the write-ahead before the prompt).
(b) The user's answer recorded and submitted: ``feed(UserAnswered)`` plus its write.
(c) A progress notification through ``Guard.on_event``: a durable guard asks for no
    write (counted, not timed: the store's ``writes`` stays put), so it costs what a
    guard without a store costs.

Times are the median of several runs, each on a fresh guard and a fresh store file in a
temporary directory (the disk the temporary directory is on), or a fresh Redis profile
(the server's files in a temporary directory too). The Redis rows need ``redis-server``
and the ``gateway`` extra; without them they are left out, saying why.
"""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench.guard_bench import PROGRESS, STREAM, _elicit
from bench.results import record, table
from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Persist
from fsm.durable import MemoryStore, SqliteStore, Store
from fsm.sse.guard import SseDelta

REPEATS = 5
PRESENTATIONS = 200
EVENTS = 20_000

Opener = Callable[[Path], Store | None]
"""Opens a fresh store (a file in the given directory, or a new Redis profile)."""
_profiles = itertools.count()


@contextmanager
def _openers() -> Iterator[tuple[dict[str, Opener], str | None]]:
    """The stores to measure by name, and why Redis is left out (``None``: it is not)."""
    openers: dict[str, Opener] = {
        "none": lambda _: None,
        "memory": lambda _: MemoryStore(),
        "sqlite": lambda tmp: SqliteStore(tmp / "bench.sqlite3"),
    }
    if shutil.which("redis-server") is None:
        yield openers, "no redis-server installed"
        return
    try:
        from fsm.durable.redis_store import RedisStore

        runner = importlib.import_module("support.redis_server")
        importlib.import_module("redis")
    except ImportError as exc:
        yield openers, f"not available ({exc})"
        return
    with ExitStack() as stack:
        server = stack.enter_context(runner.redis_server())
        server.extra = ("--appendonly", "yes", "--appendfsync", "always")
        server.restart()
        url = server.url
        openers["redis"] = lambda _: RedisStore.from_url(url, f"bench-{next(_profiles)}")
        yield openers, None


def _client(store: Store | None) -> Callable[[ev.Event], None]:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=store is not None))

    def feed(event: ev.Event) -> None:
        for action in guard.feed(event):
            if isinstance(action, Persist) and store is not None:
                assert isinstance(action.delta, SseDelta)
                store.write(action.delta)

    feed(ev.SessionStarted("s"))
    feed(ev.StreamOpened(STREAM, 1))
    return feed


def _per_op(kind: str, opener: Opener, ops: int) -> float:
    """Median seconds per operation of ``kind`` with the stores ``opener`` opens."""
    runs = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            st = opener(Path(tmp))
            feed = _client(st)
            if kind == "answer":
                for rid in range(ops):
                    feed(ev.SseEvent(STREAM, _elicit(rid), f"q{rid}"))
            events: list[ev.Event]
            if kind == "present":
                events = [ev.SseEvent(STREAM, _elicit(r), f"e{r}") for r in range(ops)]
            else:
                events = [ev.UserAnswered(("s", r), {"action": "accept"}) for r in range(ops)]
            start = time.perf_counter()
            for event in events:
                feed(event)
            runs.append((time.perf_counter() - start) / ops)
            if st is not None:
                st.close()
    return statistics.median(runs)


def _progress(opener: Opener) -> tuple[float, int]:
    """Median seconds per progress event through ``on_event``, and the writes it made."""
    runs, writes = [], 0
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            st = opener(Path(tmp))
            guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=st is not None))
            for a in (*guard.feed(ev.SessionStarted("s")), *guard.feed(ev.StreamOpened(STREAM, 1))):
                if isinstance(a, Persist) and st is not None:
                    assert isinstance(a.delta, SseDelta)
                    st.write(a.delta)
            before = st.writes if st is not None else 0
            ids = [f"p{i}" for i in range(EVENTS)]
            start = time.perf_counter()
            for i in ids:
                for a in guard.on_event(STREAM, i, PROGRESS):
                    if isinstance(a, Persist) and st is not None:
                        assert isinstance(a.delta, SseDelta)
                        st.write(a.delta)
            runs.append((time.perf_counter() - start) / EVENTS)
            if st is not None:
                writes += st.writes - before
                st.close()
    return statistics.median(runs), writes


def main() -> None:
    rows = []
    with _openers() as (openers, left_out):
        if left_out is not None:
            print(f"redis rows left out: {left_out}")
        for kind, label in (("present", "presentation"), ("answer", "answer")):
            for store, opener in openers.items():
                us = _per_op(kind, opener, PRESENTATIONS) * 1e6
                rows.append((label, store, us))
                record(f"durable_{kind}_{store}_us", us, "us")
        for store, opener in openers.items():
            if store == "memory":
                continue
            seconds, writes = _progress(opener)
            rows.append(("progress event", store, seconds * 1e6))
            record(f"durable_progress_{store}_us", seconds * 1e6, "us")
            if store != "none":
                assert writes == 0, writes
                record(f"durable_progress_{store}_writes", writes, "writes")
    load = os.getloadavg()[0]
    record("durable_bench_loadavg_1min", round(load, 2), "load")
    print(f"load average (1 min) at the end: {load:.2f}")
    table(rows, header=("operation", "store", "us per op"))


if __name__ == "__main__":
    main()
