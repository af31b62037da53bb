"""The parent side of the one-call crash harnesses: run ``call_crash_child.py`` for an era
against a loopback server, SIGKILL it when it is about to make a given store write, and
read what the two processes of a run printed."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

CHILD = Path(__file__).with_name("call_crash_child.py")
ROOT = Path(__file__).resolve().parents[2]


async def lines(proc: Process) -> AsyncIterator[str]:
    assert proc.stdout is not None
    buffer = ""
    async for chunk in TextReceiveStream(proc.stdout):
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            yield line


async def run_child(era: str, url: str, path: Path, kill_at: int | None) -> list[str]:
    """One client process of ``era``; SIGKILLed when it is about to make write
    ``kill_at``. Returns what it printed (``write`` lines included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: list[str] = []
    async with await anyio.open_process(
        [sys.executable, str(CHILD), era, url, str(path)], env=env, stderr=None
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


def prompts(out: list[str]) -> tuple[list[str], list[str]]:
    """The questions a run presented fresh and those it re-showed (marked), in order."""
    shown = [x.split() for x in out if x.startswith("prompt ")]
    return [p[1] for p in shown if p[2] == "0"], [p[1] for p in shown if p[2] == "1"]


def outcomes(out: list[str]) -> list[str]:
    """The run's ``result``/``error`` lines."""
    return [x for x in out if x.startswith(("result ", "error "))]
