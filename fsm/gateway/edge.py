"""What the gateway's HTTP edge accepts: request heads, connections, ``Host`` and ``Origin``.

:class:`EdgeLimits` bounds each client connection of the server that serves the gateway
(uvicorn); :func:`uvicorn_settings` turns them into ``uvicorn.Config`` keywords.
:class:`HostPolicy` says which ``Host`` and ``Origin`` values the gateway serves: it
sends the upstream its own ``Host``, so the upstream's DNS-rebinding check no longer
sees the client's, and the gateway checks it instead (``421`` / ``403``, as the MCP SDKs
answer).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_HOSTS", "EdgeLimits", "HostPolicy", "uvicorn_settings"]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The host names :class:`HostPolicy` allows by default (any port)."""


@dataclass(frozen=True)
class EdgeLimits:
    """Bounds on one client connection (defaults stated per field)."""

    max_header_bytes: int = 32 * 1024
    """Bytes of a request head (request line and headers); more gets ``431``."""
    max_headers: int = 100
    """Header lines of a request; more gets ``431``."""
    header_timeout_s: float = 10.0
    """Seconds from a connection's start (or the end of its previous request) to the end
    of a request head; slower gets ``408`` and the connection is closed."""
    keep_alive_s: float = 5.0
    """Seconds an idle keep-alive connection is kept."""
    max_connections: int | None = 4096
    """Client connections at once (``None``: no bound); more get ``503``."""

    def __post_init__(self) -> None:
        if self.max_header_bytes < 1024:
            raise ValueError("EdgeLimits.max_header_bytes must be >= 1024")
        if self.max_headers < 1:
            raise ValueError("EdgeLimits.max_headers must be >= 1")
        if not self.header_timeout_s > 0 or not self.keep_alive_s > 0:
            raise ValueError("EdgeLimits timeouts must be > 0")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError("EdgeLimits.max_connections must be None or >= 1")


def uvicorn_settings(limits: EdgeLimits, http: str = "auto") -> dict[str, Any]:
    """``uvicorn.Config`` keywords that apply ``limits`` with the ``http`` parser
    (``auto``: httptools when installed, else h11)."""
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    settings: dict[str, Any] = {
        "http": http,
        "timeout_keep_alive": max(1, round(limits.keep_alive_s)),
        "h11_max_incomplete_event_size": limits.max_header_bytes,
    }
    if limits.max_connections is not None:
        settings["limit_concurrency"] = limits.max_connections
    return settings


def _split_host(value: str) -> tuple[str, str | None]:
    """``host[:port]`` (or ``[v6]:port``) as (lower-case host, port or ``None``)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = value.rpartition(":")
    if sep and port.isdigit():
        return host, port
    return value, None


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` and ``Origin`` values reach the upstream.

    ``allowed_hosts``: an entry without a port matches that host on any port, one with a
    port (``"example.com:8443"``) that port only, ``"*"`` any host. ``allowed_origins``:
    exact origins (``"https://app.example.com"``) allowed besides those whose host is an
    allowed host (scheme http or https). A request without ``Origin`` is allowed (not a
    browser's cross-origin request)."""

    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    allowed_origins: tuple[str, ...] = ()

    def host_allowed(self, value: str) -> bool:
        """Whether ``Host: value`` is served."""
        host, port = _split_host(value)
        for entry in self.allowed_hosts:
            if entry == "*":
                return True
            want_host, want_port = _split_host(entry)
            if host == want_host and (want_port is None or want_port == port):
                return True
        return False

    def origin_allowed(self, value: str) -> bool:
        """Whether ``Origin: value`` is served."""
        origin = value.strip().lower().rstrip("/")
        if origin in (o.lower().rstrip("/") for o in self.allowed_origins):
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self.host_allowed(parts.netloc)

    def refusal(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """``None`` when the request (lower-case header names) is allowed, else its
        status and message: ``400`` without ``Host``, ``421`` for a ``Host`` not
        allowed, ``403`` for an ``Origin`` not allowed."""
        host = headers.get("host")
        if not host:
            return 400, "Missing Host header"
        if not self.host_allowed(host):
            return 421, "Invalid Host header"
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            return 403, "Invalid Origin header"
        return None
