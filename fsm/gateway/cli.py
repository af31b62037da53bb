"""``python -m fsm gateway``: run a guarding gateway replica in front of one MCP endpoint.

::

    python -m fsm gateway --upstream http://127.0.0.1:8000/mcp --listen 127.0.0.1:8100
    python -m fsm gateway --upstream http://mcp.internal/mcp --listen 0.0.0.0:8100 \\
        --store redis://redis.internal:6379/0

Clients use the gateway's address with the upstream's path (here
``http://127.0.0.1:8100/mcp``); the one line the command prints on stdout says it
(``fsm gateway: serving http://127.0.0.1:8100/mcp``; ``--listen 127.0.0.1:0`` picks a free
port). ``--store memory`` (the default) keeps the shared state in
this process: one replica. ``--store redis://...`` shares it with every replica given the
same URL (needs redis-py, in the ``gateway`` extra). Runs until interrupted.

``--loop`` and ``--http`` pick uvicorn's event loop and HTTP parser. ``auto`` (the
default) takes uvloop and httptools when they are installed (the ``gateway`` extra
installs both where they build): a replica then uses about a sixth less CPU than on
asyncio and h11 (``python -m bench.gateway_bench paired``). One visible difference:
httptools refuses a request whose header holds a control character with its own plain
``400``, before the gateway sees it; on h11 the gateway answers such a header of its own
(``Mcp-Session-Id``, ``Last-Event-ID``, ``MCP-Protocol-Version``) with a JSON-RPC ``400``.

Exit status: 0 after a clean stop (SIGTERM or SIGINT: open streams are closed, the
store released), 2 for bad arguments (an unparsable address, an upstream
that is not an http(s) URL, a store that is neither ``memory`` nor ``redis://``, a
``--loop`` or ``--http`` that is not installed), 1 if the server could not start (the
port is taken, Redis unreachable at startup).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import socket
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsm gateway",
        description="Run a guarding gateway in front of one MCP streamable-HTTP endpoint.",
        epilog="exit status: 0 clean stop, 1 could not start, 2 bad arguments",
    )
    p.add_argument(
        "--upstream", required=True, help="the MCP endpoint URL (http(s)://host:port/path)"
    )
    p.add_argument(
        "--listen", default="127.0.0.1:8100", help="HOST:PORT to serve on (default %(default)s)"
    )
    p.add_argument("--store", default="memory", help="memory (default) or redis://HOST:PORT/DB")
    p.add_argument(
        "--ttl",
        type=float,
        default=3600.0,
        help="seconds the store keeps a session's state after its last write",
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


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen must be HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m fsm gateway``; returns the exit code."""
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        host, port = _listen(args.listen)
        if args.ttl <= 0:
            raise ValueError("--ttl must be > 0")
        for option, module in (("--loop", args.loop), ("--http", args.http)):
            if module in ("uvloop", "httptools") and importlib.util.find_spec(module) is None:
                raise ValueError(f"{option} {module}: {module} is not installed")
        import uvicorn

        from fsm.gateway.app import Gateway
        from fsm.gateway.store import MemoryStore, StateStore

        store: StateStore
        if args.store == "memory":
            store = MemoryStore(ttl_s=args.ttl)
        elif args.store.startswith(("redis://", "rediss://", "unix://")):
            from fsm.gateway.redis_store import RedisStore

            store = RedisStore.from_url(args.store, ttl_s=args.ttl)
        else:
            raise ValueError(f"--store must be memory or redis://..., not {args.store!r}")
        app = Gateway(args.upstream, store=store)
    except (ValueError, ImportError) as exc:
        print(f"fsm gateway: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper())
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
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
        http=args.http,
    )
    server = _server_class()(config)
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
    return 0 if server.started else 1
