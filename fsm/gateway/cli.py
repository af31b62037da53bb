"""``python -m fsm gateway``: run a guarding gateway replica in front of one MCP endpoint.

::

    python -m fsm gateway --upstream http://127.0.0.1:8000/mcp --listen 127.0.0.1:8100
    FSM_GATEWAY_STORE=redis://:secret@redis.internal:6379/0 \\
    FSM_GATEWAY_ID_KEY=<32+ characters shared by the replicas> \\
        python -m fsm gateway --upstream http://mcp.internal/mcp --listen 0.0.0.0:8100 \\
        --namespace prod --allow-host mcp.example.com

Clients use the gateway's address with the upstream's path (here
``http://127.0.0.1:8100/mcp``); the command prints that URL, alone, as its one line on
stdout once it serves: its store answered and its socket listens (``--listen
127.0.0.1:0`` picks a free port; a line is never printed by a start that fails).
Everything else goes to stderr: logs, as text or one JSON object a line
(``--log-format json``). ``--store memory`` (the default) keeps the shared state in this
process: one replica. A ``redis://`` (or ``rediss://``, TLS) store shares it with every
replica given the same URL and ``--namespace`` (``redis+cluster://host:port``, or
``rediss+cluster://``, for a Redis Cluster given any one of its nodes); give the URL in
``FSM_GATEWAY_STORE`` or a file (``--store-file``) rather than on the command line, where
``ps`` shows its password.
Replicas that share a store must share the key that signs their event ids
(``FSM_GATEWAY_ID_KEY``, ``FSM_GATEWAY_ID_KEY_PREVIOUS`` during a rotation, or
``--id-key-file``): without one a Redis store is refused. Runs until interrupted.

``--loop`` and ``--http`` pick uvicorn's event loop and HTTP parser. ``auto`` (the
default) takes uvloop and httptools when they are installed (the ``gateway`` extra
installs both where they build): a replica then uses about a sixth less CPU than on
asyncio and h11 (``python -m bench.gateway_bench paired``).

The HTTP edge (:mod:`fsm.gateway.edge`) bounds each client connection: the request head
(``--max-header-bytes``, ``--max-headers``, ``--header-timeout``), idle keep-alive
connections (``--keep-alive``) and connections at once (``--max-connections``);
``--allow-host`` and ``--allow-origin`` (repeatable) say which ``Host`` and ``Origin``
values reach the upstream (default: loopback names only). The gateway's own bounds
(:class:`~fsm.gateway.app.GatewayLimits`) take ``--max-event-bytes``, ``--body-timeout``,
``--max-receiving-bytes``, ``--max-receiving-bytes-per-peer``, ``--lease`` and
``--standalone-hold``; ``--resume-patience`` is each session's guard's
``resume_patience_s`` (how long a resume the upstream refuses because it still holds the
old connection is retried, with backoff and jitter, before the call ends with
``resume-patience-spent``).

Operations: ``/-/healthz`` and ``/-/readyz`` on the serving address
(:data:`~fsm.gateway.app.HEALTH_PATH`, :data:`~fsm.gateway.app.READY_PATH`);
``--metrics HOST:PORT`` serves Prometheus metrics (:mod:`fsm.gateway.metrics`) at
``/metrics`` on a separate address (off by default; an internal one: they are not
authenticated). On SIGTERM or SIGINT the gateway stops accepting connections, closes the
idle ones, and drains (:meth:`~fsm.gateway.app.Gateway.drain`): readiness answers
``503``, the open requests and event streams get ``--drain-seconds`` (default
:data:`DRAIN_S`) to end, the rest are ended at their next event boundary, and the
process exits 0.

Exit status: 0 after a clean stop (SIGTERM or SIGINT, drained, the store released), 2 for
bad arguments (an unparsable address, an upstream that is not an
http(s) URL or holds a password, a number of seconds that is negative, not finite or not
a number, a store that is neither ``memory`` nor ``redis://``, a
``--loop`` or ``--http`` that is not installed, a bad or missing id key), 1 if the
server could not start (the port or the metrics port is taken, Redis unreachable at
startup: no line on stdout then) or its
background work failed while serving (a defect; it then stops instead of serving
errors).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm._extras import missing_extra
from fsm.fields import seconds_problem

__all__ = ["DRAIN_S", "ENV_STORE", "main"]

DRAIN_S = 20.0
"""Default ``--drain-seconds``: inside the 30 s a Kubernetes pod gets by default between
its SIGTERM and its SIGKILL, with room for the drain's grace steps."""

ENV_STORE = "FSM_GATEWAY_STORE"
"""The environment variable that may hold the ``--store`` URL."""

_SHARED = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")
"""Store URLs of a store replicas share (Redis)."""


def _seconds(text: str) -> float:
    """The argparse type of every option that is a number of seconds: a finite number
    >= 0, else ``argparse.ArgumentTypeError`` (the command exits 2 naming the option).
    ``--ttl``, the timeouts and ``--lease`` must also be > 0, which :func:`_build` and the
    limits they configure (:class:`~fsm.gateway.edge.EdgeLimits`,
    :class:`~fsm.gateway.app.GatewayLimits`) check."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    problem = seconds_problem(seconds, positive=False)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return seconds


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsm gateway",
        description="Run a guarding gateway in front of one MCP streamable-HTTP endpoint.",
        epilog="exit status: 0 clean stop, 1 could not start or failed, 2 bad arguments",
    )
    p.add_argument(
        "--upstream", required=True, help="the MCP endpoint URL (http(s)://host:port/path)"
    )
    p.add_argument(
        "--listen", default="127.0.0.1:8100", help="HOST:PORT to serve on (default %(default)s)"
    )
    p.add_argument(
        "--store",
        default=None,
        help=f"memory (default), redis[s]://HOST:PORT/DB, or redis[s]+cluster://HOST:PORT "
        f"(a Redis Cluster, any one node) (also from ${ENV_STORE})",
    )
    p.add_argument("--store-file", help="a file whose first line is the --store URL")
    p.add_argument("--namespace", help="Redis key namespace of this deployment")
    p.add_argument(
        "--id-key-file",
        help="a file with the key that signs event ids (a second line: the previous key); "
        "default $FSM_GATEWAY_ID_KEY, or a random key for a memory store",
    )
    p.add_argument(
        "--ttl",
        type=_seconds,
        default=3600.0,
        help="seconds the store keeps a session's state after its last write",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="HOST",
        help="a Host the gateway serves (repeatable; default the loopback names; * any)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="an Origin allowed besides those of the allowed hosts (repeatable)",
    )
    p.add_argument(
        "--credential-header",
        action="append",
        default=None,
        metavar="NAME",
        help="a header the upstream authenticates by, besides the URL's query (repeatable; "
        "the names given replace the default authorization, cookie, x-api-key)",
    )
    p.add_argument("--max-header-bytes", type=int, help="bytes of a request head")
    p.add_argument("--max-headers", type=int, help="header lines of a request")
    p.add_argument("--header-timeout", type=_seconds, help="seconds to receive a request head")
    p.add_argument("--keep-alive", type=_seconds, help="seconds an idle connection is kept")
    p.add_argument("--max-connections", type=int, help="client connections at once")
    p.add_argument("--max-event-bytes", type=int, help="bytes of one upstream SSE event")
    p.add_argument("--body-timeout", type=_seconds, help="seconds to receive a request body")
    p.add_argument(
        "--max-receiving-bytes",
        type=int,
        help="bytes of request bodies being received at once, all connections together "
        "(default 256 MiB; a request past it gets 503)",
    )
    p.add_argument(
        "--max-receiving-bytes-per-peer",
        type=int,
        help="of those, what one client address may hold at once (default 16 MiB; a "
        "request past it gets 503; behind a proxy give --max-receiving-bytes)",
    )
    p.add_argument("--lease", type=_seconds, help="seconds a claim of a prompt lasts unrenewed")
    p.add_argument(
        "--resume-patience",
        type=_seconds,
        help="seconds a resume the upstream refuses while it holds the old connection "
        "(409, 429/503 with Retry-After) is retried (default 150)",
    )
    p.add_argument(
        "--standalone-hold",
        type=_seconds,
        help="seconds the standalone GET opened ahead for a session waits for its client "
        "(default 10 with --store memory, 0 with a shared store: give it when the balancer "
        "keeps a session on one replica; 0: none opened ahead)",
    )
    p.add_argument(
        "--loop",
        default="auto",
        choices=["auto", "asyncio", "uvloop"],
        help="event loop (default %(default)s: uvloop when installed)",
    )
    p.add_argument(
        "--http",
        default="auto",
        choices=["auto", "h11", "httptools"],
        help="HTTP parser (default %(default)s: httptools when installed)",
    )
    p.add_argument(
        "--drain-seconds",
        type=_seconds,
        default=DRAIN_S,
        help="seconds open requests and streams get to end after SIGTERM (default %(default)s)",
    )
    p.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: off)",
    )
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="logs on stderr: text, or one JSON object a line (default %(default)s)",
    )
    return p


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server that prints :attr:`ready_line` on stdout once it serves (the
        app's startup done: its store answered; the socket listens), drains the app
        before uvicorn's own shutdown, and ends the process with status 0 after a SIGTERM
        or SIGINT (uvicorn re-raises the signal, ending it by the signal)."""

        ready_line = ""
        drain_s = DRAIN_S
        gateway: Any = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and not self.should_exit:
                sys.stdout.write(self.ready_line + "\n")  # one write: the whole line
                sys.stdout.flush()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            for server in getattr(self, "servers", ()):  # no new connection from now on
                server.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()  # idle ones now, busy ones after their response
            app = self.gateway
            _LOG.warning("draining: %d open requests get %g s", app.in_flight, self.drain_s)
            started = time.monotonic()
            ended = await app.drain(self.drain_s)
            _LOG.warning(
                "drained in %.1f s (%d requests ended by the bound)",
                time.monotonic() - started,
                ended,
            )
            await super().shutdown(sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    return Server


_LOG = logging.getLogger("fsm.gateway")


_CHATTY = ("httpx2", "httpcore2")
"""Loggers of the upstream HTTP library: httpx2 logs every request's URL (with the
client's query string) at INFO. The command keeps them at WARNING whatever the level."""


class JsonFormatter(logging.Formatter):
    """One JSON object a record: ``time`` (UTC, ISO 8601, milliseconds), ``level``,
    ``logger``, ``message``, and ``exception`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _logging(level: str, fmt: str = "text") -> None:
    """Log at ``level`` to stderr, as text or JSON lines (uvicorn's loggers too, then),
    but never a request's URL (see :data:`_CHATTY`)."""
    if fmt == "json":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    else:
        logging.basicConfig(level=level.upper())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))


def _listen(value: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{option} must be HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def _store_url(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The store URL: ``--store``, else the first line of ``--store-file``, else
    ``$FSM_GATEWAY_STORE``, else ``memory``."""
    if args.store is not None and args.store_file is not None:
        raise ValueError("give --store or --store-file, not both")
    if args.store is not None:
        return str(args.store)
    if args.store_file is not None:
        try:
            lines = Path(args.store_file).read_text(encoding="utf-8").split()
        except OSError as exc:
            raise ValueError(f"--store-file {args.store_file}: {exc.strerror}") from None
        if not lines:
            raise ValueError(f"--store-file {args.store_file} is empty")
        return lines[0]
    return environ.get(ENV_STORE) or "memory"


def _overrides(args: argparse.Namespace, names: Mapping[str, str]) -> dict[str, Any]:
    """The options given on the command line, by the field names they set."""
    given = {field: getattr(args, arg) for arg, field in names.items()}
    return {field: value for field, value in given.items() if value is not None}


def _build(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Any, Any, Any]:
    """The gateway app, its edge limits and its store, from the arguments; ``ValueError``
    or ``ImportError`` for anything wrong with them."""
    if args.ttl <= 0:
        raise ValueError("--ttl must be > 0")
    for option, module in (("--loop", args.loop), ("--http", args.http)):
        if module in ("uvloop", "httptools") and importlib.util.find_spec(module) is None:
            raise ValueError(f"{option} {module}: {module} is not installed")
    from fsm.gateway.app import CREDENTIAL_HEADERS, GATEWAY_GUARD, Gateway, GatewayLimits
    from fsm.gateway.edge import EdgeLimits, HostPolicy
    from fsm.gateway.ids import EventIdKeys
    from fsm.gateway.store import MemoryStore, StateStore

    url = _store_url(args, environ)
    keys = (
        EventIdKeys.from_file(args.id_key_file)
        if args.id_key_file is not None
        else EventIdKeys.from_env(environ)
    )
    if keys is None and url.startswith(_SHARED):
        raise ValueError(
            "replicas sharing a store must share the key that signs event ids: "
            "set FSM_GATEWAY_ID_KEY or give --id-key-file"
        )
    store: StateStore
    if url == "memory":
        if args.namespace is not None:
            raise ValueError("--namespace needs a redis:// store")
        store = MemoryStore(ttl_s=args.ttl)
    elif url.startswith(_SHARED):
        from fsm.gateway.redis_store import RedisStore

        store = RedisStore.from_url(url, ttl_s=args.ttl, namespace=args.namespace)
    else:
        scheme = url.partition(":")[0]
        raise ValueError(f"--store must be memory or redis://..., not a {scheme!r} URL")
    edge = EdgeLimits(
        **_overrides(
            args,
            {
                "max_header_bytes": "max_header_bytes",
                "max_headers": "max_headers",
                "header_timeout": "header_timeout_s",
                "keep_alive": "keep_alive_s",
                "max_connections": "max_connections",
            },
        )
    )
    limits = GatewayLimits(
        **_overrides(
            args,
            {
                "max_event_bytes": "max_event_bytes",
                "body_timeout": "body_timeout_s",
                "max_receiving_bytes": "max_receiving_bytes",
                "max_receiving_bytes_per_peer": "max_receiving_bytes_per_peer",
                "lease": "lease_s",
                "standalone_hold": "standalone_hold_s",
            },
        )
    )
    config = GATEWAY_GUARD
    if args.resume_patience is not None:
        config = dataclasses.replace(config, resume_patience_s=args.resume_patience)
    policy = HostPolicy()
    if args.allow_host is not None or args.allow_origin is not None:
        policy = HostPolicy(
            allowed_hosts=tuple(args.allow_host or policy.allowed_hosts),
            allowed_origins=tuple(args.allow_origin or ()),
        )
    app = Gateway(
        args.upstream,
        store=store,
        config=config,
        limits=limits,
        id_keys=keys,
        host_policy=policy,
        credential_headers=(
            CREDENTIAL_HEADERS if args.credential_header is None else args.credential_header
        ),
    )
    return app, edge, store


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of ``python -m fsm gateway``; returns the exit code. ``environ``
    (default ``os.environ``) is where the store URL and the id keys may come from."""
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    env = os.environ if environ is None else environ
    try:
        host, port = _listen(args.listen)
        metrics_at = None if args.metrics is None else _listen(args.metrics, "--metrics")
        try:
            import uvicorn
            from prometheus_client import start_http_server

            from fsm.gateway.edge import uvicorn_settings

            app, edge, _store = _build(args, env)
        except ModuleNotFoundError as exc:
            raise missing_extra("gateway", "fsm gateway", exc) from exc
    except (ValueError, ImportError) as exc:
        print(f"fsm gateway: {exc}", file=sys.stderr)
        return 2
    _logging(args.log_level, args.log_format)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # protocol TCP: asyncio turns Nagle off (TCP_NODELAY) only on connections of such a socket
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        print(f"fsm gateway: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    bound = sock.getsockname()[1]
    metrics = None
    if metrics_at is not None:
        try:  # a thread of prometheus_client's; its gauges only read lengths
            metrics, _thread = start_http_server(
                metrics_at[1], addr=metrics_at[0], registry=app.metrics.registry
            )
        except OSError as exc:
            sock.close()
            where = f"{metrics_at[0]}:{metrics_at[1]}"
            print(f"fsm gateway: cannot serve metrics on {where}: {exc.strerror}", file=sys.stderr)
            return 1
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level=args.log_level,
        log_config=None if args.log_format == "json" else uvicorn.config.LOGGING_CONFIG,
        access_log=False,
        loop=args.loop,
        # the drain ends every request first (Gateway.drain); this only bounds the rest
        timeout_graceful_shutdown=2,
        **uvicorn_settings(edge, args.http, relay=True),
    )
    server = _server_class()(config)
    # the one line on stdout, once serving: where clients connect (port 0 picks a free one)
    server.ready_line = f"http://{args.listen.rpartition(':')[0]}:{bound}{app.path}"
    server.drain_s = args.drain_seconds
    server.gateway = app
    failed: list[BaseException] = []

    def fatal(exc: BaseException) -> None:  # stop serving: a supervisor restarts us
        failed.append(exc)
        server.should_exit = True

    app.on_fatal = fatal
    sock.listen(2048)  # connections queue until uvicorn accepts them
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits (status 3) when the app's startup fails
        return 1
    finally:
        sock.close()
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()
    if failed:
        print(f"fsm gateway: stopped: the gateway failed ({failed[0]!r})", file=sys.stderr)
        return 1
    return 0 if server.started else 1
