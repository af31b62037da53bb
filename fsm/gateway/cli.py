"""``python -m fsm gateway``: run a guarding gateway replica in front of one MCP endpoint.

::

    python -m fsm gateway --upstream http://127.0.0.1:8000/mcp --listen 127.0.0.1:8100
    FSM_GATEWAY_STORE=redis://:secret@redis.internal:6379/0 \\
    FSM_GATEWAY_ID_KEY=<32+ characters shared by the replicas> \\
        python -m fsm gateway --upstream http://mcp.internal/mcp --listen 0.0.0.0:8100 \\
        --namespace prod --allow-host mcp.example.com

Clients use the gateway's address with the upstream's path (here
``http://127.0.0.1:8100/mcp``); the one line the command prints on stdout says it
(``fsm gateway: serving http://127.0.0.1:8100/mcp``; ``--listen 127.0.0.1:0`` picks a free
port). ``--store memory`` (the default) keeps the shared state in this process: one
replica. A ``redis://`` (or ``rediss://``, TLS) store shares it with every replica given
the same URL and ``--namespace``; give the URL in ``FSM_GATEWAY_STORE`` or a file
(``--store-file``) rather than on the command line, where ``ps`` shows its password.
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
(:class:`~fsm.gateway.app.GatewayLimits`) take ``--max-event-bytes``, ``--body-timeout``
and ``--lease``.

Exit status: 0 after a clean stop (SIGTERM or SIGINT: open streams are closed, the
store released), 2 for bad arguments (an unparsable address, an upstream that is not an
http(s) URL or holds a password, a store that is neither ``memory`` nor ``redis://``, a
``--loop`` or ``--http`` that is not installed, a bad or missing id key), 1 if the
server could not start (the port is taken, Redis unreachable at startup) or its
background work failed while serving (a defect; it then stops instead of serving
errors).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm._extras import missing_extra

__all__ = ["ENV_STORE", "main"]

ENV_STORE = "FSM_GATEWAY_STORE"
"""The environment variable that may hold the ``--store`` URL."""

_SHARED = ("redis://", "rediss://", "unix://")
"""Store URLs of a store replicas share (Redis)."""


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
        help=f"memory (default) or redis[s]://HOST:PORT/DB (also from ${ENV_STORE})",
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
        type=float,
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
    p.add_argument("--max-header-bytes", type=int, help="bytes of a request head")
    p.add_argument("--max-headers", type=int, help="header lines of a request")
    p.add_argument("--header-timeout", type=float, help="seconds to receive a request head")
    p.add_argument("--keep-alive", type=float, help="seconds an idle connection is kept")
    p.add_argument("--max-connections", type=int, help="client connections at once")
    p.add_argument("--max-event-bytes", type=int, help="bytes of one upstream SSE event")
    p.add_argument("--body-timeout", type=float, help="seconds to receive a request body")
    p.add_argument("--lease", type=float, help="seconds a claim of a prompt lasts unrenewed")
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
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return p


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but a SIGTERM or SIGINT ends the process with status 0 after
        the graceful stop (uvicorn re-raises the signal, ending it by the signal)."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    return Server


_CHATTY = ("httpx2", "httpcore2")
"""Loggers of the upstream HTTP library: httpx2 logs every request's URL (with the
client's query string) at INFO. The command keeps them at WARNING whatever the level."""


def _logging(level: str) -> None:
    """Log at ``level``, but never a request's URL (see :data:`_CHATTY`)."""
    logging.basicConfig(level=level.upper())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen must be HOST:PORT, not {value!r}")
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
    from fsm.gateway.app import Gateway, GatewayLimits
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
                "lease": "lease_s",
            },
        )
    )
    policy = HostPolicy()
    if args.allow_host is not None or args.allow_origin is not None:
        policy = HostPolicy(
            allowed_hosts=tuple(args.allow_host or policy.allowed_hosts),
            allowed_origins=tuple(args.allow_origin or ()),
        )
    app = Gateway(args.upstream, store=store, limits=limits, id_keys=keys, host_policy=policy)
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
        try:
            import uvicorn

            from fsm.gateway.edge import uvicorn_settings

            app, edge, _store = _build(args, env)
        except ModuleNotFoundError as exc:
            raise missing_extra("gateway", "fsm gateway", exc) from exc
    except (ValueError, ImportError) as exc:
        print(f"fsm gateway: {exc}", file=sys.stderr)
        return 2
    _logging(args.log_level)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # protocol TCP: asyncio turns Nagle off (TCP_NODELAY) only on connections of such a socket
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        print(f"fsm gateway: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level=args.log_level,
        access_log=False,
        loop=args.loop,
        **uvicorn_settings(edge, args.http),
    )
    server = _server_class()(config)
    failed: list[BaseException] = []

    def fatal(exc: BaseException) -> None:  # stop serving: a supervisor restarts us
        failed.append(exc)
        server.should_exit = True

    app.on_fatal = fatal
    sock.listen(2048)  # connections queue until uvicorn accepts them
    # the one line on stdout: where clients connect (port 0 picks a free one)
    print(
        f"fsm gateway: serving http://{args.listen.rpartition(':')[0]}:{bound}{app.path}",
        flush=True,
    )
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits (status 3) when the app's startup fails
        return 1
    finally:
        sock.close()
    if failed:
        print(f"fsm gateway: stopped: the gateway failed ({failed[0]!r})", file=sys.stderr)
        return 1
    return 0 if server.started else 1
