"""The parent side of the SIGKILL crash harness (``test_crash_harness.py``): run a client
process of an era (``call_crash_child.py``, forked by ``crash_zygote.py``) against a
loopback server, SIGKILL it at a kill point (about to make a store write, or at an event
fed to the guard), start another on the same file, and read what the two printed.

Every kill is driven by an explicit handshake: the child prints its kill point and waits
for a line on stdin; the parent answers ``go`` or kills it there. Nothing sleeps."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

ZYGOTE = Path(__file__).with_name("crash_zygote.py")
ROOT = Path(__file__).resolve().parents[2]
KILL_POINTS = ("write ", "event ", "action ")
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
    """The kill point a child's line names (``write call#0``, ``event began:post:2#0``),
    or ``None``."""
    return " ".join(line.split()[:2]) if line.startswith(KILL_POINTS) else None


class Children:
    """The client processes of one test: forked by ``crash_zygote.py`` (started once, its
    imports done once), each talking to the harness over two named pipes in ``tmp``."""

    def __init__(self, zygote: Process, tmp: Path) -> None:
        self.zygote, self.tmp = zygote, tmp
        self._count = itertools.count()
        self._send = anyio.Lock()

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, tmp: Path) -> AsyncIterator[Children]:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # Its stderr (and its children's tracebacks) goes to a file, never a pipe nobody
        # reads; echoed to ours at the end, where pytest shows it with a failure.
        log = tmp / "zygote.stderr"
        with log.open("wb") as err:
            async with await anyio.open_process(
                [sys.executable, str(ZYGOTE)], env=env, stderr=err
            ) as zygote:
                ready = False
                with anyio.move_on_after(60):
                    async for line in lines(zygote):
                        if line == "ready":
                            ready = True
                            break
                try:
                    if not ready:  # it died on import, or hung in it
                        with contextlib.suppress(ProcessLookupError):
                            zygote.kill()
                    assert ready, ("the crash zygote never said ready", log.read_text())
                    yield cls(zygote, tmp)
                finally:
                    assert zygote.stdin is not None
                    await zygote.stdin.aclose()  # the zygote ends with its input
                    with anyio.fail_after(10):
                        await zygote.wait()
                    sys.stderr.write(log.read_text())

    async def run(self, era: str, url: str, path: Path, kill_at: str | None) -> list[str]:
        """One client process of ``era``; SIGKILLed at the kill point ``kill_at`` (``None``:
        it runs to its end). Returns what it printed, its kill points included, and
        ``killed`` last if it was killed (a run may end before it reaches ``kill_at``: the
        caller counts that kill point as not covered). Returns once the process is gone
        (its file lock with it)."""
        n = next(self._count)
        fifo_in, fifo_out = self.tmp / f"in-{n}", self.tmp / f"out-{n}"
        os.mkfifo(fifo_in)
        os.mkfifo(fifo_out)
        # Both ends opened here first, never blocking (a FIFO opened read-write): a child
        # that dies early cannot leave the harness waiting on an open.
        fds = [os.open(f, os.O_RDWR | os.O_NONBLOCK) for f in (fifo_out, fifo_in)]
        reader, writer = fds
        assert self.zygote.stdin is not None
        async with self._send:
            command = f"{era} {url} {path} {fifo_in} {fifo_out}\n"
            await self.zygote.stdin.send(command.encode())
        out: list[str] = []
        code: int | None = None
        pidfd: int | None = None
        pid: int | None = None
        try:
            with anyio.move_on_after(30) as timer:
                pid = int((await _line(reader, None)).split()[1])
                pidfd = os.pidfd_open(pid)
                while (line := await _line(reader, pidfd)) != "":
                    if line.startswith("exit "):
                        code = int(line.split()[1])
                        continue
                    out.append(line)
                    point = point_of(line)
                    if point is not None and point == kill_at:
                        os.kill(pid, signal.SIGKILL)
                        out.append("killed")
                        break
                    if point is not None:
                        os.write(writer, b"go\n")
                await anyio.wait_readable(pidfd)  # the process is gone
            if timer.cancelled_caught and pid is not None:
                os.kill(pid, signal.SIGKILL)
            assert not timer.cancelled_caught, ("hung", kill_at, out)
        finally:
            _PENDING.pop(reader, None)
            for fd in (*fds, *(() if pidfd is None else (pidfd,))):
                os.close(fd)
        assert out[-1:] == ["killed"] or code == 0, (kill_at, code, out)
        return out


_PENDING: dict[int, bytes] = {}


async def _line(fd: int, pidfd: int | None) -> str:
    """The next line the child wrote to ``fd`` (without its end), or ``""`` once the
    process ``pidfd`` names is gone and nothing is left to read."""
    while b"\n" not in _PENDING.get(fd, b""):
        if pidfd is not None and _gone(pidfd):
            chunk = _read(fd)
            if not chunk:
                return _PENDING.pop(fd, b"").decode()
        else:
            async with anyio.create_task_group() as tg:
                for watched in (fd,) if pidfd is None else (fd, pidfd):
                    tg.start_soon(_wake, watched, tg.cancel_scope)
            chunk = _read(fd)
        _PENDING[fd] = _PENDING.get(fd, b"") + chunk
    line, _, rest = _PENDING[fd].partition(b"\n")
    _PENDING[fd] = rest
    return line.decode()


async def _wake(fd: int, scope: anyio.CancelScope) -> None:
    await anyio.wait_readable(fd)
    scope.cancel()


def _gone(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


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


async def crash(children: Children, era: str, url: str, path: Path, point: str) -> Crash:
    """Kill a child of ``era`` at ``point``, then run one to its end on the same file
    (none if the first was not killed)."""
    killed = await children.run(era, url, path, point)
    if killed[-1:] != ["killed"]:
        return Crash(point, killed, [])
    return Crash(point, killed, await children.run(era, url, path, None))


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
