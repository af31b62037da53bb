"""A throwaway ``redis-server`` on 127.0.0.1 for the gateway's tests and benchmarks.

:func:`redis_server` starts the Debian package's ``redis-server`` binary on an ephemeral
free port of 127.0.0.1, without persistence (``--save '' --appendonly no``) and in its own
temporary directory, waits until it answers ``PING``, and yields a :class:`RedisServer`
whose faults are explicit: :meth:`RedisServer.stop` kills it (connections are reset),
:meth:`RedisServer.restart` starts a fresh, empty server on the same port (a Redis restart
mid-run: every key is gone), :meth:`RedisServer.pause` / :meth:`RedisServer.resume` freeze
and thaw the process (connections stay open, nothing is answered: the fault a timeout
exists for). On exit the server is killed and its directory removed.

``redis_server(tls=True)`` runs it TLS-only (no plaintext port): a throwaway certificate
authority made with ``trustme`` (a test dependency, imported only then) issues the
server's certificate for ``127.0.0.1`` and ``localhost``; :attr:`RedisServer.url` is then
``rediss://...`` and :attr:`RedisServer.ca_file` the authority's PEM file, the one a
client must trust. ``password=...`` makes it require that password (``requirepass``,
written to a config file in its directory, not on its command line); :attr:`RedisServer.url`
then carries it.

Every method blocks (starting takes some milliseconds; polling for ``PING`` is used at
start only). From async code, call :meth:`~RedisServer.restart` through a thread
(``anyio.to_thread.run_sync``) when the event loop must keep serving meanwhile.

Standard library only (and ``trustme`` for TLS): the runner speaks the few lines of RESP
it needs itself.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RedisServer", "RedisServerError", "TlsFiles", "redis_server"]

START_TIMEOUT_S = 60.0
"""Seconds a starting server has to answer ``PING`` before :class:`RedisServerError`: a
hang guard. A cluster node writes and fsyncs its ``nodes.conf`` before it listens; with
three test workers on two cores one node's log stopped there and 10 s passed."""


class RedisServerError(RuntimeError):
    """``redis-server`` is not installed, or did not start (the message says which, with
    the server's log)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS-only server: the authority a client trusts (``ca``), the
    server's certificate chain and its private key."""

    ca: Path
    cert: Path
    key: Path


def _make_tls(directory: Path) -> TlsFiles:
    """A throwaway authority and a server certificate for the loopback names, in
    ``directory``."""
    try:
        import trustme
    except ImportError as exc:
        raise RedisServerError(
            "a TLS redis-server needs trustme for its certificates: pip install trustme"
        ) from exc
    authority = trustme.CA()
    leaf = authority.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    authority.cert_pem.write_to_path(str(files.ca))
    leaf.private_key_pem.write_to_path(str(files.key))
    with files.cert.open("wb") as chain:
        for pem in leaf.cert_chain_pems:
            chain.write(pem.bytes())
    return files


def _resp(*parts: bytes) -> bytes:
    """One command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


def _answers_ping(port: int, tls: TlsFiles | None = None, password: str | None = None) -> bool:
    """Whether the server on ``port`` answers ``PING`` (after ``AUTH`` when it has a
    password, over TLS trusting ``tls.ca`` when given)."""
    request = _resp(b"PING")
    if password is not None:
        request = _resp(b"AUTH", password.encode()) + request
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as raw:
            sock = raw
            if tls is not None:
                context = ssl.create_default_context(cafile=str(tls.ca))
                sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
            with sock:
                sock.sendall(request)
                got = b""
                while b"+PONG" not in got and not got.startswith(b"-"):
                    chunk = sock.recv(64)
                    if not chunk:
                        return False
                    got += chunk
                return b"+PONG" in got
    except OSError:  # refused, reset, timed out, or TLS not ready (ssl.SSLError)
        return False


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port`` (see the module docstring)."""

    def __init__(
        self,
        binary: str,
        directory: Path,
        port: int,
        *,
        tls: TlsFiles | None = None,
        password: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.binary = binary
        self.extra = extra
        """More ``redis-server`` arguments (a cluster node's)."""
        self.directory = directory
        self.port = port
        self.tls = tls
        self.password = password
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``: database 0 of this server (``rediss://`` when it
        runs TLS-only, ``redis://:<password>@...`` when it has a password)."""
        scheme = "rediss" if self.tls is not None else "redis"
        auth = f":{self.password}@" if self.password is not None else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0"

    @property
    def ca_file(self) -> Path | None:
        """The PEM file of the authority that issued a TLS server's certificate (the one
        its clients trust), or ``None`` without TLS."""
        return self.tls.ca if self.tls is not None else None

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
        config = self.directory / "redis.conf"  # the password, off the command line
        lines = [] if self.password is None else [f'requirepass "{self.password}"']
        config.write_text("".join(line + "\n" for line in lines))
        config.chmod(0o600)
        args = [
            self.binary,
            str(config),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--logfile", str(log),
            "--daemonize", "no",
            *self.extra,
        ]  # fmt: skip
        if self.tls is None:
            args += ["--port", str(self.port)]
        else:  # TLS only: no plaintext port; clients need no certificate of their own
            args += [
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls.cert),
                "--tls-key-file", str(self.tls.key),
                "--tls-ca-cert-file", str(self.tls.ca),
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers_ping(self.port, self.tls, self.password):
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
def redis_server(
    binary: str | None = None, *, tls: bool = False, password: str | None = None
) -> Iterator[RedisServer]:
    """Run a ``redis-server`` for the ``with`` block (see the module docstring). ``binary``
    defaults to ``redis-server`` on ``PATH``; without it, :class:`RedisServerError` says
    what to install (the Debian package ``redis-server``). ``tls``: TLS only, with a
    throwaway authority (:attr:`RedisServer.ca_file`). ``password``: required of clients
    (letters, digits and ``._~-``: it is written into :attr:`RedisServer.url` as it is)."""
    if password is not None and not re.fullmatch(r"[A-Za-z0-9._~-]+", password):
        raise ValueError("password: letters, digits and ._~- only (it goes into a URL)")
    found = binary or shutil.which("redis-server")
    if found is None:
        raise RedisServerError(
            "redis-server is not on PATH: install the Debian package redis-server "
            "(apt-get install redis-server)"
        )
    with tempfile.TemporaryDirectory(prefix="fsm-redis-") as directory:
        files = _make_tls(Path(directory)) if tls else None
        server = RedisServer(found, Path(directory), _free_port(), tls=files, password=password)
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
