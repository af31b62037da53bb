"""The crash harness's client processes, forked from one process that imported the client
once (an import of the SDK costs about a second of CPU; a fork, milliseconds).

Reads one command a line on stdin: ``ERA URL STORE IN OUT``. For each it forks a client
process whose stdin and stdout are the named pipes ``IN`` and ``OUT`` (the harness made
them and opens them), which prints ``pid N`` first, then runs
:func:`call_crash_child.main` and ends with ``exit 0`` (or ``exit 1``, its traceback on
stderr). Prints ``ready`` once the imports are done. Its children are reaped by the OS
(``SIGCHLD`` ignored)."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
from call_crash_child import main


def child(era: str, url: str, store: str, fifo_in: str, fifo_out: str) -> None:
    out = os.open(fifo_out, os.O_WRONLY)  # the harness opens OUT first, then IN
    inp = os.open(fifo_in, os.O_RDONLY)
    os.dup2(out, 1)
    os.dup2(inp, 0)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    print(f"pid {os.getpid()}", flush=True)
    code = 0
    try:
        anyio.run(main, era, url, store)
    except BaseException:
        traceback.print_exc()
        code = 1
    print(f"exit {code}", flush=True)
    os._exit(code)


def serve() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        args = line.split()
        if os.fork() == 0:
            try:
                child(*args)
            finally:  # never back into this loop
                os._exit(1)


if __name__ == "__main__":
    serve()
