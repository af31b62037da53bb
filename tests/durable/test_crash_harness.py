"""Crash testing of the real code, one harness for every era: a guarded mcp 2.x client
process runs its era's scenario against the loopback server with a SQLite store, is
SIGKILLed at every kill point, and a new process starts on the same file:

* ``sse``: the seed scenario's call (``delete_files``: "Delete 3 files?" on the seed
  server, silent deadline) through ``guarded_session(store=)``; killed before each store
  write and at each event fed to the guard; the restart rejoins the session and resumes
  the call from the stored cursor;
* ``mrtr``: the MRTR re-ask (a question, its answer, the same question asked again, the
  result); killed before each store write and at each action the adapter takes (a
  prompt, a retry, the end); restarted by its call id;
* ``tasks``: the tasks scenario (the task asks under one key, takes the answer through
  ``tasks/update``, completes); killed before each store write and at each action but
  the polls; resumed by the stored task id.

Across the two processes of every crash: a question is presented fresh at most once and
re-shown (marked) once exactly when the kill fell after its record and before its
answer's (for the first time, marked, if the kill fell before its prompt); never an
answered question again; exactly one outcome; every kill point fires (but, SSE, one
write that races); the server took the answer exactly once (MRTR: each round's, and
once more the round whose retry was sent and its outcome not yet written,
:data:`MRTR_RESENT`), or (SSE, a kill before the call's stream had a cursor on disk) the
call ended once with a typed error and the server took no answer, or (SSE, a kill after
the call's end was written and before its result was returned) the server took the answer
once and the call ends once with ``ended-before-restart`` (a result is not stored).
Each era's kill points, and the typed errors they end with, are counted and pinned
(:class:`Era`); the crashes of an era run a few at a time, each against its own server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from crash_harness import Children, Crash, crash, kill_points, reshow_window

from fsm.wire.mrtr_server import running_mrtr_server
from fsm.wire.server import running_server
from fsm.wire.tasks_server import running_tasks_server

pytestmark = pytest.mark.anyio

AT_ONCE = 2
"""Crashes of one era run at the same time (two child processes each, in turn)."""

SEED_RESULT = "result Deleted 3 files: a.txt, b.txt, c.txt"
ENDED = "error ended-before-restart"


def seed_answers(server: Any) -> list[Any]:
    return [e for e in server.controller.log if e.kind == "elicit_answered"]


def check_sse(run: Crash, server: Any) -> None:
    (end,) = run.outcomes()
    answers = seed_answers(server)
    if end in ("error no-cursor", "error not-resumable"):
        # killed before the call's stream had a cursor on disk: it ends once, typed, and
        # the server took no answer (its own deadline ends the tool)
        assert answers == [], run
    elif end == "error ended-before-restart":
        # killed after the call's end was on disk, before its result reached the
        # application (the SDK lists the tools to check it): the result is not stored
        assert len(answers) == 1, run
    else:
        assert end == SEED_RESULT, run
        assert [a.detail["content"] for a in answers] == [{"confirm": True}], run  # once


MRTR_RESENT = {"write call#2": 1, "write call#3": 2}
"""The MRTR kill points after a retry was sent and before its outcome was written, and
the round that retry was (its answer's): the restart sends it again, the answer in it, and
the server (which keeps nothing between rounds) takes that answer again, and ends the tool
again if that was the last round. Every other kill point: the two answers taken once."""


def check_mrtr(run: Crash, server: Any) -> None:
    (end,) = run.outcomes()
    # killed after the end's write, before the result was returned: the result is not
    # stored, the call ends once typed
    assert end.startswith("result Deleted 3 files") or end == ENDED, run
    resent = MRTR_RESENT.get(run.point)
    answers = [a[0] for a in server.log.answers]
    assert answers == ["reasking_delete"] * (2 + (resent is not None)), run  # none lost
    assert len(server.log.completed) == 1 + (resent == 2), run


def check_tasks(run: Crash, server: Any) -> None:
    assert run.outcomes() in (["result Deleted 3 files"], [ENDED]), run
    # Killed before the first write, nothing was kept: the tool is called again (a new
    # task); after it, the second process resumed the task the store named.
    assert len(server.log.created) == (2 if run.point == "write call#0" else 1), run
    task = server.latest().task_id
    assert [a[:2] for a in server.log.answers] == [(task, "confirm-1")], run  # once


@dataclass(frozen=True)
class Era:
    name: str
    serve: Callable[[], AbstractAsyncContextManager[Any]]
    result: str
    """What the clean run ends with."""
    points: tuple[tuple[int, int], ...]
    """Its kill points: store writes, and events fed (SSE) or actions taken (MRTR,
    tasks) (pinned; the SSE answer's outcome
    races the call's result on the wire, so its outcome is written on its own or with
    the end: one write more or less, and a kill point that a crash run may not reach)."""
    check: Callable[[Crash, Any], None]
    uncovered: int = 0
    """How many kill points a crash run may not reach (each a write: the SSE race above);
    every other kill point fires in every run."""
    errors: tuple[tuple[str, range], ...] = ()
    """How many kill points end the call with a typed error, by reason (pinned)."""


ERAS = [
    Era(
        "sse",
        running_server,
        SEED_RESULT,
        ((14, 10), (15, 10)),
        check_sse,
        uncovered=1,
        errors=(
            ("ended-before-restart", range(7, 8)),
            ("no-cursor", range(2, 3)),
            ("not-resumable", range(2, 4)),  # 3 when the call's record wins its race
        ),
    ),
    Era(
        "mrtr",
        lambda: running_mrtr_server(ttl=30.0),
        "result Deleted 3 files after 2 answers",
        ((4, 4),),
        check_mrtr,
        errors=(("ended-before-restart", range(1, 2)),),
    ),
    Era(
        "tasks",
        lambda: running_tasks_server(poll_interval_ms=50),
        "result Deleted 3 files",
        ((4, 3),),
        check_tasks,
        errors=(("ended-before-restart", range(1, 2)),),
    ),
]


@pytest.mark.parametrize("era", ERAS, ids=[e.name for e in ERAS])
async def test_sigkill_at_every_kill_point(era: Era, tmp_path: Path) -> None:
    async with Children.start(tmp_path) as children:
        await crash_everywhere(era, children, tmp_path)


async def crash_everywhere(era: Era, children: Children, tmp_path: Path) -> None:
    async with era.serve() as server:
        clean = await children.run(era.name, server.url, tmp_path / "clean.sqlite3", None)
    assert clean[-1] == era.result, clean
    points = kill_points(clean)
    writes = sum(p.startswith("write ") for p in points)
    assert (writes, len(points) - writes) in era.points, points
    window = reshow_window(clean)
    runs: dict[str, Crash] = {}
    limit = anyio.Semaphore(AT_ONCE)

    async def one(point: str) -> None:
        async with limit, era.serve() as srv:
            path = tmp_path / f"{point.replace(' ', '-')}.sqlite3"
            runs[point] = run = await crash(children, era.name, srv.url, path, point)
            if not run.covered:  # this run wrote one write less (the race above)
                assert run.lines[-1].startswith("result "), run
                return
            fresh, again = run.prompts()
            assert len(run.outcomes()) == 1, run  # one outcome
            assert len(fresh) <= 1, run  # never an answered question asked twice
            if point in window:  # recorded, not answered: shown once more, marked (for
                # the first time if the kill fell before its prompt)
                assert len(again) == 1 and fresh in ([], again), run
            else:
                assert again == [], run
            if run.outcomes()[0].startswith("result "):
                assert len(fresh + again) >= 1, run
            era.check(run, srv)

    async with anyio.create_task_group() as tg:
        for point in points:
            tg.start_soon(one, point)
    missed = [point for point, r in runs.items() if not r.covered]
    assert len(missed) <= era.uncovered, missed  # every kill point but a raced one
    assert all(point.startswith("write ") for point in missed), missed  # a write raced
    covered = [r for r in runs.values() if r.covered]
    reasons = Counter(r.outcomes()[0].split()[1] for r in covered)
    reasons.pop("Deleted", None)
    assert sorted(reasons) == [reason for reason, _ in era.errors], reasons
    for reason, count in era.errors:
        assert reasons[reason] in count, [r for r in covered if reason in r.outcomes()[0]]
    print(f"{era.name}: {len(covered)} crash points covered of {len(points)}", missed, reasons)
