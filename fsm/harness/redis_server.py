"""A throwaway ``redis-server`` on 127.0.0.1 for the gateway's tests and benchmarks.

:func:`redis_server` starts the Debian package's ``redis-server`` binary on an ephemeral
free port of 127.0.0.1, without persistence (``--save '' --appendonly no``) and in its own
temporary directory, waits until it answers ``PING``, and yields a :class:`RedisServer`
whose faults are explicit: :meth:`RedisServer.stop` kills it (connections are reset),
:meth:`RedisServer.restart` starts a fresh, empty server on the same port (a Redis restart
mid-run: every key is gone), :meth:`RedisServer.pause` / :meth:`RedisServer.resume` freeze
and thaw the process (connections stay open, nothing is answered: the fault a timeout
exists for). On exit the server is killed and its directory removed.

Every method blocks (starting takes some milliseconds; polling for ``PING`` is used at
start only). From async code, call :meth:`~RedisServer.restart` through a thread
(``anyio.to_thread.run_sync``) when the event loop must keep serving meanwhile.

Standard library only: the runner speaks the one line of RESP it needs itself.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["RedisServer", "RedisServerError", "redis_server"]

START_TIMEOUT_S = 10.0
"""Seconds a starting server has to answer ``PING`` before :class:`RedisServerError`."""


class RedisServerError(RuntimeError):
    """``redis-server`` is not installed, or did not start (the message says which, with
    the server's log)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port`` (see the module docstring)."""

    def __init__(self, binary: str, directory: Path, port: int) -> None:
        self.binary = binary
        self.directory = directory
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``: database 0 of this server."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (a benchmark reads its CPU time), else
        ``None``."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the process is alive (paused counts as alive)."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server on :attr:`port` and wait until it answers ``PING``; raises
        :class:`RedisServerError` (with the server's log) when it exits or stays silent."""
        if self.running:
            return
        log = self.directory / "redis.log"
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--logfile", str(log),
            "--daemonize", "no",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers_ping(self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = log.read_text(errors="replace") if log.exists() else "(no log)"
                raise RedisServerError(f"redis-server did not start on port {self.port}:\n{text}")
            time.sleep(0.01)

    def stop(self) -> None:
        """Kill the server (``SIGKILL``: no goodbye to its clients; their sockets are
        reset) and wait for it. A no-op when it is not running."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Kill the server and start an empty one on the same port (no persistence: every
        key of the old one is lost)."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freeze the process (``SIGSTOP``): it keeps its port and its clients' connections
        but answers nothing until :meth:`resume`."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a paused process (``SIGCONT``); it answers what it was sent meanwhile."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)


@contextmanager
def redis_server(binary: str | None = None) -> Iterator[RedisServer]:
    """Run a ``redis-server`` for the ``with`` block (see the module docstring). ``binary``
    defaults to ``redis-server`` on ``PATH``; without it, :class:`RedisServerError` says
    what to install (the Debian package ``redis-server``)."""
    found = binary or shutil.which("redis-server")
    if found is None:
        raise RedisServerError(
            "redis-server is not on PATH: install the Debian package redis-server "
            "(apt-get install redis-server)"
        )
    with tempfile.TemporaryDirectory(prefix="fsm-redis-") as directory:
        server = RedisServer(found, Path(directory), _free_port())
        try:
            for attempt in range(3):  # the free port may be taken before the server binds it
                try:
                    server.start()
                    break
                except RedisServerError:
                    if attempt == 2:
                        raise
                    server.port = _free_port()
            yield server
        finally:
            with suppress(OSError):
                server.stop()
