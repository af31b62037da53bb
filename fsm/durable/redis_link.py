"""The link to Redis both Redis stores stand on: the gateway's shared state
(:class:`fsm.gateway.redis_store.RedisStore`, asyncio) and the durable guard's store
(:class:`fsm.durable.redis_store.RedisStore`, blocking).

* **Clients from a URL** (:func:`open_client`): ``redis://``, ``rediss://`` (TLS, verified
  against the system's authorities or a CA file), ``redis+cluster://`` and
  ``rediss+cluster://`` (a Redis Cluster seeded with one node); connect and read timeouts,
  no retries (a failure is reported, not hidden), a pool that makes an operation wait for a
  free connection within the timeout. :func:`where` (of a client) and :func:`where_url`
  (of a URL) describe the server for a ``repr`` or an error: host, port and database,
  never a password.
* **Key naming** (:func:`namespaced`, :func:`hash_tag`): every key starts with a prefix
  (``fsm:`` or ``fsm:<namespace>:``) and holds the hash tag ``{<len>:<name>}`` of the one
  session or profile it belongs to, so no name runs into another's keys and every key of
  one name hashes to one Cluster slot (each script call is one atomic step on one master).
* **Text** (:func:`wire`, :func:`text`): strings go to Redis as UTF-8 that lets lone
  surrogates pass, so any Python string is a key or a value.
* **Scripts** (:class:`Script`): one Lua text and its SHA, sent with ``EVALSHA`` and once
  more with ``EVAL`` when Redis does not know it (new or restarted).
* **Leases** (:data:`LEASE_LUA`, :func:`check_lease`, :func:`millis`): a key holding its
  owner's token, with Redis's own expiry (``PX``) as the lease, so no process's clock is
  compared with another's. Taken with ``SET NX`` (one holder), renewed only while it still
  holds the same owner (a lapsed lease is final for that owner), released only by it.
* **Errors** (:func:`failures`, :func:`cause`): the exceptions that mean Redis could not
  be used (Redis's errors, a Cluster's, socket errors), and their text for a typed error
  (the exception's class and message: redis-py's never holds a password; the stores never
  add a key, which would hold a session or profile name).

The ``redis`` package is the ``gateway`` extra: it is imported when a client is made or an
error is classified, never when this module is imported; missing, it is
``ModuleNotFoundError`` naming the extra.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from fsm._extras import missing_extra
from fsm.fields import seconds_problem

__all__ = [
    "CLUSTER_SCHEMES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_TIMEOUT_S",
    "LEASE_LUA",
    "MAX_NAMESPACE",
    "Script",
    "cause",
    "check_lease",
    "failures",
    "hash_tag",
    "is_no_script",
    "millis",
    "namespaced",
    "open_client",
    "text",
    "where",
    "where_url",
    "wire",
]

DEFAULT_TIMEOUT_S = 1.0
"""Seconds a Redis operation may take before it fails."""
DEFAULT_MAX_CONNECTIONS = 64
"""Connections a client made by :func:`open_client` opens at most; more operations at
once wait for one (within their timeout)."""
MAX_NAMESPACE = 64
"""Characters a ``namespace`` may have at most."""
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
"""URL schemes of a Redis Cluster (:func:`open_client`)."""

LEASE_LUA = """
local function lease_take(key, owner, ms)
  return redis.call('SET', key, owner, 'NX', 'PX', ms)
end
local function lease_held(key, owner)
  return redis.call('GET', key) == owner
end
local function lease_hold(key, owner, ms)
  redis.call('SET', key, owner, 'PX', ms)
end
"""
"""Lua functions a store's script starts with: ``lease_take`` (the lease at ``key`` for
``owner``, ``ms`` milliseconds, only if nobody holds it: truthy when taken),
``lease_held`` (whether ``key`` still holds ``owner``: false once the lease lapsed or
another took it) and ``lease_hold`` (set the lease's owner and expiry; callers check
``lease_held`` first where a lapsed lease must stay lapsed)."""


def check_lease(owner: str, lease_s: float | None) -> None:
    """:class:`ValueError` unless ``lease_s`` is ``None`` or a finite number of seconds
    > 0 given with a non-empty ``owner``."""
    if lease_s is None:
        return
    problem = seconds_problem(lease_s, positive=True)
    if problem is not None:
        raise ValueError(f"lease_s: {lease_s!r} {problem}")
    if not owner:
        raise ValueError("a lease needs an owner")


def millis(seconds: float) -> int:
    """``seconds`` as Redis's milliseconds (``PX``), at least 1."""
    return max(1, round(seconds * 1000))


class Script:
    """One Lua script: its text and the SHA-1 ``EVALSHA`` names it by."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def evalsha(self, keys: list[str], *argv: Any) -> tuple[Any, ...]:
        """The ``EVALSHA`` command (name first) for ``keys`` and ``argv``."""
        return ("EVALSHA", self.sha, len(keys), *keys, *argv)

    def eval(self, keys: list[str], *argv: Any) -> tuple[Any, ...]:
        """The ``EVAL`` command that sends the script itself (Redis did not know it)."""
        return ("EVAL", self.source, len(keys), *keys, *argv)


def hash_tag(name: str) -> str:
    """``{<len(name)>:<name>}``: the part of every key of one session or profile that
    Redis Cluster hashes, and that no other name can run into."""
    return f"{{{len(name)}:{name}}}"


def namespaced(prefix: str | None, namespace: str | None) -> str:
    """The key prefix for ``prefix`` or ``namespace`` (``fsm:<namespace>:``; neither:
    ``fsm:``); :class:`ValueError` for both, a bad namespace (empty, longer than
    :data:`MAX_NAMESPACE`, with braces, whitespace or control characters) or a prefix with
    braces (they would break the per-name hash slot)."""
    if namespace is not None:
        if prefix is not None:
            raise ValueError("give a prefix or a namespace, not both")
        if not namespace or len(namespace) > MAX_NAMESPACE:
            raise ValueError(f"a namespace has 1 to {MAX_NAMESPACE} characters")
        if any(c in "{}" or c.isspace() or not c.isprintable() for c in namespace):
            raise ValueError("a namespace has no braces, whitespace or control characters")
        return f"fsm:{namespace}:"
    prefix = "fsm:" if prefix is None else prefix
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"prefix {prefix!r} must not contain braces")
    return prefix


def wire(arg: Any) -> Any:
    """A command argument as Redis gets it: text as UTF-8 that lets lone surrogates pass."""
    return arg.encode("utf-8", "surrogatepass") if isinstance(arg, str) else arg


def text(value: Any) -> str:
    """A reply as text, whether the client decodes replies or not."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else str(value)


def _redis(feature: str) -> Any:
    try:
        import redis
        import redis.asyncio
        import redis.asyncio.cluster
        import redis.asyncio.retry
        import redis.backoff
        import redis.cluster
        import redis.maint_notifications
        import redis.retry
    except ModuleNotFoundError as exc:
        raise missing_extra("gateway", feature, exc) from exc
    return redis


@cache
def failures() -> tuple[type[BaseException], ...]:
    """The exceptions that mean Redis could not be used: its errors (a script error, a
    wrong-type key and a refused command included), a Cluster's, and socket errors."""
    redis = _redis("a Redis store")
    return (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError)


def is_no_script(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis not knowing a script (``EVALSHA`` before ``EVAL``)."""
    return isinstance(exc, _redis("a Redis store").exceptions.NoScriptError)


def cause(exc: BaseException) -> str:
    """``exc`` as the cause a store's typed error states: its class and message."""
    return f"{type(exc).__name__}: {exc}"


def open_client(
    url: str,
    *,
    asynchronous: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ssl_ca_certs: str | None = None,
    feature: str = "a Redis store",
) -> Any:
    """A redis-py client for ``url`` (``redis://[:password@]host:port/db``,
    ``rediss://...`` for TLS, ``redis+cluster://[:password@]host:port`` or
    ``rediss+cluster://...`` for a Redis Cluster, given any one of its nodes):
    ``redis.asyncio`` when ``asynchronous``, the blocking client otherwise. Connect and
    read timeouts of ``timeout_s``, no retries; at most ``max_connections`` connections
    (per master on a cluster), an operation that finds them all busy waits for one within
    ``timeout_s`` (a cluster client fails at once instead: redis-py's has no blocking
    pool). Closing the client closes its pool.

    Connects lazily (no IO here), except the blocking cluster client: redis-py's asks a
    node for the cluster's layout as it is made, so a cluster that cannot be reached or
    used raises one of :func:`failures` here (the caller makes its typed error of it, as of
    any failed operation).

    TLS verifies the server's certificate and host name against the system's authorities,
    or the CA file ``ssl_ca_certs`` (the URL's ``?ssl_ca_certs=PATH`` does the same).
    :class:`ValueError` for ``ssl_ca_certs`` without a ``rediss`` URL, ``max_connections``
    below 1, a cluster URL with no node or a database other than 0 (found before any IO);
    ``ModuleNotFoundError`` naming the ``gateway`` extra (for ``feature``) without
    redis-py."""
    if max_connections < 1:
        raise ValueError("max_connections must be >= 1")
    tls: dict[str, Any] = {}
    if ssl_ca_certs is not None:
        if not url.startswith(("rediss://", "rediss+cluster://")):
            raise ValueError("ssl_ca_certs needs a rediss:// URL")
        tls["ssl_ca_certs"] = ssl_ca_certs
    redis = _redis(feature)
    kind = redis.asyncio if asynchronous else redis
    retry_kind = redis.asyncio.retry.Retry if asynchronous else redis.retry.Retry
    retry = retry_kind(redis.backoff.NoBackoff(), 0)
    scheme, sep, rest = url.partition("://")
    if sep and scheme in CLUSTER_SCHEMES:
        nodes_url = f"{scheme.partition('+')[0]}://{rest}"
        options: dict[str, Any] = {
            "max_connections": max_connections,
            "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
            "retry": retry,
            **tls,
        }
        if not asynchronous:  # redis-py's blocking client connects as it is made
            _check_cluster_url(redis, scheme, nodes_url)
            return redis.RedisCluster.from_url(nodes_url, **options)
        try:  # makes no connection: what it refuses is the URL
            return redis.asyncio.cluster.RedisCluster.from_url(nodes_url, **options)
        except redis.exceptions.RedisClusterException as exc:  # no node, a database > 0
            first = str(exc).splitlines()[0]
            raise ValueError(f"a {scheme}:// store URL: {first}") from None
    pool = kind.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout_s,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=retry,
        # off, the pool checks an idle connection before use and replaces one that the
        # server closed (a restarted Redis costs no failed call); "auto" skips the check
        maint_notifications_config=redis.maint_notifications.MaintNotificationsConfig(
            enabled=False
        ),
        **tls,
    )
    return kind.Redis.from_pool(pool)


def _check_cluster_url(redis: Any, scheme: str, url: str) -> None:
    """What the asyncio cluster client refuses in ``url`` as it is made, with no IO,
    checked before the blocking one is made (which connects): :class:`ValueError`, in the
    asyncio client's words, for a URL with no node or a database other than 0."""
    options = redis.connection.parse_url(url)
    if not options.get("host"):
        fault = "RedisCluster requires at least one node to discover the cluster"
    elif options.get("db", 0) != 0:
        fault = "Argument 'db' must be 0 or None"
    else:
        return
    raise ValueError(f"a {scheme}:// store URL: {fault}")


def where_url(url: str) -> str:
    """Where the Redis of a URL :func:`open_client` takes is, as :func:`where` states it
    of the client (for an error raised before there is one): ``host:port/db`` or
    ``cluster host:port``; never a password."""
    scheme, _, _ = url.partition("://")
    split = urlsplit(url)
    node = f"{split.hostname}:{split.port or 6379}"
    if scheme in CLUSTER_SCHEMES:
        return f"cluster {node}"
    return f"{node}/{split.path.strip('/') or 0}"


def where(client: Any) -> str:
    """Where ``client``'s Redis is: ``host:port/db``, a socket's ``path/db``, or
    ``cluster <node>,...``; never a password."""
    nodes = getattr(client, "nodes_manager", None)
    if nodes is not None:
        return "cluster " + ",".join(nodes.startup_nodes)
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, Mapping):
        return "?"
    if "path" in kwargs:
        return f"{kwargs['path']}/{kwargs.get('db', 0)}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
