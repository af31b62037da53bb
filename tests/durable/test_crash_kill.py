"""The store under SIGKILL: a client process is killed before each of its writes (and
once, after the last, by exiting); every time, the file opens again (the lock died with
the process), holds exactly the writes made before the kill, and a guard restarted from
it shows no answered question again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from durable_script import CONFIG, drive

from fsm.actions import Present
from fsm.durable import MemoryStore, SqliteStore
from fsm.durable.store import EMPTY, Delta
from fsm.sse.guard import Guard, SseDelta, SseStored

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[2]


class Recorder(MemoryStore):
    """The deltas, in order, as the child will write them."""

    def __init__(self) -> None:
        super().__init__()
        self.deltas: list[SseDelta] = []

    def write(self, delta: Delta) -> None:
        assert isinstance(delta, SseDelta)  # the script drives the SSE guard alone
        super().write(delta)
        self.deltas.append(delta)


RECORDED = Recorder()
drive(RECORDED)
WRITES = len(RECORDED.deltas)


def _stored_after(n: int) -> SseStored:
    stored = EMPTY
    for delta in RECORDED.deltas[:n]:
        stored = stored.apply(delta)
    return stored


def _run_until(path: Path, kill_at: int | None) -> int:
    """Run the child; SIGKILL it when it is about to make write ``kill_at``. Returns the
    writes it was let make."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    made = 0
    try:
        for line in child.stdout:
            if line.startswith("write "):
                n = int(line.split()[1])
                if n == kill_at:
                    child.send_signal(signal.SIGKILL)
                    break
                made = n
                child.stdin.write("go\n")
                child.stdin.flush()
            else:
                assert line == "done\n"
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    return made


def test_the_script_writes_thirteen_times() -> None:
    assert WRITES == 13  # docs/durability.md states the count


@pytest.mark.parametrize("kill_at", [*range(1, WRITES + 1), None])
def test_a_kill_before_a_write_keeps_every_write_made(tmp_path: Path, kill_at: int | None) -> None:
    path = tmp_path / "profile.sqlite3"
    made = _run_until(path, kill_at)
    assert made == (WRITES if kill_at is None else kill_at - 1)
    with SqliteStore(path) as store:  # the killed process's lock is gone
        stored = store.load()
    assert stored == _stored_after(made)
    answered = {r.key for r in stored.snapshot.requests if r.answer is not None}
    restarted = Guard(clock=lambda: 5.0, config=CONFIG).restart(stored)
    assert not answered & {a.key for a in restarted if isinstance(a, Present)}
