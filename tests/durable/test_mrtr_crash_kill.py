"""Crash testing of the real code: a guarded mcp 2.x client process runs the MRTR re-ask
(a question, its answer, the same question asked again, the result) against the loopback
MRTR server with a SQLite store; it is SIGKILLed before each of its store writes and a new
process started on the same file and call id. Across the two processes: the question is
presented once (and re-shown once, marked, only when the kill fell while it was on
screen), the server takes the answer, and the call has exactly one outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from call_crash import outcomes, prompts, run_child

from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server

pytestmark = pytest.mark.anyio

WRITES = 4
"""The question, its answer, the re-ask's resubmission, the end (pinned below)."""


@pytest.fixture
async def server() -> AsyncIterator[MrtrServer]:
    async with running_mrtr_server(ttl=30.0) as srv:
        yield srv


async def test_without_a_kill_the_child_writes_four_times(
    server: MrtrServer, tmp_path: Path
) -> None:
    out = await run_child("mrtr", server.url, tmp_path / "p.sqlite3", None)
    assert [x for x in out if x.startswith("write")] == [f"write {n}" for n in range(WRITES)]
    assert out[-1] == "result Deleted 3 files after 2 answers"


@pytest.mark.parametrize("kill_at", range(WRITES))
async def test_sigkill_before_each_write(server: MrtrServer, tmp_path: Path, kill_at: int) -> None:
    path = tmp_path / "p.sqlite3"
    first = await run_child("mrtr", server.url, path, kill_at)
    second = await run_child("mrtr", server.url, path, None)
    fresh, again = prompts(first + second)
    assert len(fresh) == 1, fresh  # never an answered question asked twice
    assert again == (fresh if kill_at == 1 else []), again  # on screen at the kill: once more
    ends = outcomes(first + second)
    assert len(ends) == 1 and ends[0].startswith("result Deleted 3 files"), ends
    assert server.log.answers, "the answer reached the server"  # no answer lost
