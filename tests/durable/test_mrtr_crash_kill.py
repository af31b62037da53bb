"""Crash testing of the real code: a guarded mcp 2.x client process runs the MRTR re-ask
(a question, its answer, the same question asked again, the result) against the loopback
MRTR server with a SQLite store; it is SIGKILLed before each of its store writes and a new
process started on the same file and call id. Across the two processes: the question is
presented once (and re-shown once, marked, only when the kill fell while it was on
screen), the server takes the answer, and the call has exactly one outcome."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from fsm.wire.mrtr_server import MrtrServer, running_mrtr_server

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).with_name("mrtr_crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
WRITES = 4
"""The question, its answer, the re-ask's resubmission, the end (pinned below)."""


@pytest.fixture
async def server() -> AsyncIterator[MrtrServer]:
    async with running_mrtr_server(ttl=30.0) as srv:
        yield srv


async def lines(proc: Process) -> AsyncIterator[str]:
    assert proc.stdout is not None
    buffer = ""
    async for chunk in TextReceiveStream(proc.stdout):
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            yield line


async def run_child(url: str, path: Path, kill_at: int | None) -> list[str]:
    """One client process; SIGKILLed when it is about to make write ``kill_at``. Returns
    what it printed (``write`` lines included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: list[str] = []
    async with await anyio.open_process(
        [sys.executable, str(CHILD), url, str(path)], env=env, stderr=None
    ) as proc:
        assert proc.stdin is not None
        with anyio.fail_after(20):
            async for line in lines(proc):
                out.append(line)
                if line == f"write {kill_at}":
                    proc.send_signal(signal.SIGKILL)
                    break
                if line.startswith("write "):
                    await proc.stdin.send(b"go\n")
            await proc.wait()
    if kill_at is not None:
        assert proc.returncode == -signal.SIGKILL
    return out


async def test_without_a_kill_the_child_writes_four_times(
    server: MrtrServer, tmp_path: Path
) -> None:
    out = await run_child(server.url, tmp_path / "p.sqlite3", None)
    assert [x for x in out if x.startswith("write")] == [f"write {n}" for n in range(WRITES)]
    assert out[-1] == "result Deleted 3 files after 2 answers"


@pytest.mark.parametrize("kill_at", range(WRITES))
async def test_sigkill_before_each_write(server: MrtrServer, tmp_path: Path, kill_at: int) -> None:
    path = tmp_path / "p.sqlite3"
    first = await run_child(server.url, path, kill_at)
    second = await run_child(server.url, path, None)
    prompts = [x.split() for x in first + second if x.startswith("prompt ")]
    fresh = [p[1] for p in prompts if p[2] == "0"]
    again = [p[1] for p in prompts if p[2] == "1"]
    assert len(fresh) == 1, prompts  # never an answered question asked twice
    assert again == (fresh if kill_at == 1 else []), prompts  # on screen at the kill: once more
    outcomes = [x for x in first + second if x.startswith(("result ", "error "))]
    assert len(outcomes) == 1 and outcomes[0].startswith("result Deleted 3 files"), outcomes
    assert server.log.answers, "the answer reached the server"  # no answer lost
