"""A client process for the crash tests: drives ``durable_script`` with an
``SqliteStore`` at ``argv[1]`` and, before each write, prints ``write N`` and waits for a
line on stdin (the parent answers ``go``, or kills it with SIGKILL there). Prints ``done``
at the end."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_script import drive

from fsm.durable import SqliteStore
from fsm.durable.store import Written


def main(path: str) -> None:
    count = 0

    def before_write(delta: Written) -> None:
        nonlocal count
        count += 1
        print(f"write {count}", flush=True)
        sys.stdin.readline()

    with SqliteStore(path, before_write=before_write) as store:
        drive(store)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
