"""The parent side of the SIGKILL crash harness (``test_crash_harness.py``): run
``call_crash_child.py`` for an era against a loopback server, SIGKILL it at a kill point
(about to make a store write, or at an event fed to the guard), start it again on the same
file, and read what the two processes printed.

Every kill is driven by an explicit handshake: the child prints its kill point and waits
for a line on stdin; the parent answers ``go`` or kills it there. Nothing sleeps."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

CHILD = Path(__file__).with_name("call_crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
KILL_POINTS = ("write ", "event ")
"""The prefixes of the lines a child stops at (``write N``, ``event N KIND``)."""


async def lines(proc: Process) -> AsyncIterator[str]:
    assert proc.stdout is not None
    buffer = ""
    async for chunk in TextReceiveStream(proc.stdout):
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            yield line


def point_of(line: str) -> str | None:
    """The kill point a child's line names (``write 3``, ``event 2``), or ``None``."""
    return " ".join(line.split()[:2]) if line.startswith(KILL_POINTS) else None


async def run_child(era: str, url: str, path: Path, kill_at: str | None) -> list[str]:
    """One client process of ``era``; SIGKILLed at the kill point ``kill_at`` (``None``: it
    runs to its end). Returns what it printed, its kill points included, and ``killed``
    last if it was killed (a run may end before it reaches ``kill_at``: the caller
    counts that kill point as not covered)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: list[str] = []
    async with await anyio.open_process(
        [sys.executable, str(CHILD), era, url, str(path)], env=env, stderr=None
    ) as proc:
        assert proc.stdin is not None
        with anyio.fail_after(30):
            async for line in lines(proc):
                out.append(line)
                point = point_of(line)
                if point is not None and point == kill_at:
                    proc.send_signal(signal.SIGKILL)
                    out.append("killed")
                    break
                if point is not None:
                    await proc.stdin.send(b"go\n")
            await proc.wait()
    if out[-1:] == ["killed"]:
        assert proc.returncode == -signal.SIGKILL, (kill_at, out)
    else:
        assert proc.returncode == 0, (kill_at, out)
    return out


@dataclass(frozen=True)
class Crash:
    """One crash run: the killed process's lines, then its restart's."""

    point: str
    killed: list[str]
    restarted: list[str]

    @property
    def covered(self) -> bool:
        """Whether the first process was killed at :attr:`point` (it ran to its end if
        its run had no such point)."""
        return self.killed[-1:] == ["killed"]

    @property
    def lines(self) -> list[str]:
        return self.killed + self.restarted

    def prompts(self) -> tuple[list[str], list[str]]:
        """The questions presented fresh and those re-shown (marked), in order."""
        shown = [x.split() for x in self.lines if x.startswith("prompt ")]
        return [p[1] for p in shown if p[2] == "0"], [p[1] for p in shown if p[2] == "1"]

    def outcomes(self) -> list[str]:
        """The ``result``/``error`` lines of both processes."""
        return [x for x in self.lines if x.startswith(("result ", "error "))]


async def crash(era: str, url: str, path: Path, point: str) -> Crash:
    """Kill a child of ``era`` at ``point``, then run one to its end on the same file
    (none if the first was not killed)."""
    killed = await run_child(era, url, path, point)
    if killed[-1:] != ["killed"]:
        return Crash(point, killed, [])
    return Crash(point, killed, await run_child(era, url, path, None))


def kill_points(clean: list[str]) -> list[str]:
    """The kill points of a run that was not killed, in order."""
    return [p for p in map(point_of, clean) if p is not None]


def reshow_window(clean: list[str]) -> set[str]:
    """The kill points after which a question is on screen but its answer not on disk:
    after the write that recorded the question (the last before its prompt) up to and
    including the write of its answer (the first after it). A kill there re-shows it."""
    at = next(i for i, line in enumerate(clean) if line.startswith("prompt "))
    before = max(i for i, line in enumerate(clean[:at]) if line.startswith("write "))
    after = next(i for i in range(at, len(clean)) if clean[i].startswith("write "))
    return {p for p in map(point_of, clean[before + 1 : after + 1]) if p is not None}
