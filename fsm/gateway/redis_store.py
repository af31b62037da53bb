"""A :class:`~fsm.gateway.store.StateStore` in Redis, shared by a gateway's replicas.

:class:`RedisStore` keeps what :mod:`fsm.gateway.store` says replicas must agree on in one
Redis database, through redis-py's asyncio client. Every operation is one round trip
(one command or one Lua script call) and atomic on the server; :attr:`RedisStore.round_trips`
counts them.

Keys (``P`` is the prefix, ``fsm:`` by default; ``S`` is ``<len(session)>:<session>``, so
that no session name can run into another's keys; the braces make every key of one session
hash to one Redis Cluster slot):

=================================  ===============================  ======================
key                                value                            written by
=================================  ===============================  ======================
``P{S}:claim:<type>:<id>``         ``1``                            ``claim`` (``SET NX``)
``P{S}:answer:<type>:<id>``        the answer, as JSON              ``save_answer``
``P{S}:cursor:<stream>``           ``<position> <event id>``        ``save_cursor``,
                                                                    ``claim`` with a cursor
``P{S}:ended``                     the reason                       ``end_session``
``P{S}:session``                   ``1``                            ``begin_session``
=================================  ===============================  ======================

``<type>:<id>`` keeps a request id's JSON type (``int:1`` and ``str:1`` are different
keys, as in :class:`~fsm.gateway.store.MemoryStore`). Text goes to Redis as UTF-8 that lets
lone surrogates pass, so any Python string is a session, stream, event id or reason.

Every key is written with a TTL of ``ttl_s`` (``PX``, milliseconds), set anew at each
write: Redis memory is bounded by the sessions active within the last ``ttl_s``. A claim
that loses and a cursor that is not newer write nothing and so refresh nothing (a claim
refreshes the session's record, won or lost). ``claim`` is one Lua script (the session's
record checked and refreshed, the claim ``SET NX``, the cursor advanced when given);
``save_cursor`` is another (``EVALSHA``; after a Redis restart has emptied the script
cache, one more round trip sends the script with ``EVAL``); both compare positions on
the server, so
concurrent writers never move a cursor back (Lua compares numbers as doubles: positions
are exact up to 2**53).

Fail closed: every Redis error, refused or reset connection, and every operation that has
no answer within ``timeout_s`` (the socket timeouts and an overall deadline both hold it)
raises :class:`~fsm.gateway.store.StoreUnavailableError` naming the operation and the
cause; nothing is retried inside the store and nothing hangs. An operation that finds
every pooled connection busy waits for one within the same timeout (a store made by
:meth:`RedisStore.from_url` opens at most ``max_connections``). Once Redis answers again the
same store works again: the pool replaces, before use, a connection the server closed once
the event loop has seen it close (so a restart between two calls costs no failed call; a
call racing the restart fails closed), and reconnects on the next call. A write that timed out may
still have landed: a claim that raised may be held, and the request it stood for is then
never presented (never twice, possibly not at all: the closed side of failing).

A Redis restart without persistence (the harness runs Redis with ``--save ''
--appendonly no``) loses every key: claims, answers, cursors, ended and begun sessions.
Nothing is presented twice for it: a claim in a session whose record is gone raises
:class:`~fsm.gateway.store.StoreStateLostError`, so every session begun before the
restart fails closed at its next request decision (its calls end with that typed error,
``data.reason`` ``store-state-lost``), while sessions begun after it work as before. Kept
answers and cursors are gone (a resume starts from the client's ``Last-Event-ID``), and
an ended session is asked upstream again (the server answers 404 once more). Deployments
whose sessions must outlive a Redis restart run Redis with persistence (``appendonly
yes``); the store needs nothing else for that.

Round trips by operation: ``begin_session`` 1, ``claim`` 1, ``claim`` with ``stream`` and
``cursor`` 1, ``save_cursor`` 1, ``cursor_of`` 1, ``save_answer`` 1, ``answer_of`` 1,
``end_session`` 1, ``session_ended`` 1, ``connect`` (optional: checks Redis and loads the script) 1,
``aclose`` 0. Connection set-up (redis-py's handshake on a new or
re-opened connection) is not counted. Needs the ``gateway`` extra (redis-py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError
from redis.maint_notifications import MaintNotificationsConfig

from fsm.gateway.store import (
    DEFAULT_TTL_S,
    Cursor,
    RequestId,
    StoreStateLostError,
    StoreUnavailableError,
    claim_cursor,
    request_key,
)

__all__ = ["DEFAULT_MAX_CONNECTIONS", "DEFAULT_TIMEOUT_S", "RedisStore"]

DEFAULT_TIMEOUT_S = 1.0
"""Seconds a Redis operation may take before it fails with ``StoreUnavailableError``."""
DEFAULT_MAX_CONNECTIONS = 64
"""Connections a store made by :meth:`RedisStore.from_url` opens at most; more operations
at once wait for one (within their timeout)."""


def _advance_lua(key: str) -> str:
    """Lua that advances the cursor at ``key`` to position ARGV[2] (event id ARGV[3])
    unless it is at or past it, with the TTL ARGV[1] in milliseconds. Lua compares the
    positions as doubles: exact up to 2**53."""
    return f"""
local old = redis.call('GET', {key})
local at = old and tonumber(string.match(old, '^(-?%d+) '))
if not at or at < tonumber(ARGV[2]) then
  redis.call('SET', {key}, ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[1])
end
"""


_ADVANCE = _advance_lua("KEYS[1]") + "return 0\n"
"""Advance the cursor at KEYS[1] (:func:`_advance_lua`)."""

_CLAIM = f"""
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if KEYS[3] then{_advance_lua("KEYS[3]")}end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  return 1
end
return 0
"""
"""Claim KEYS[2] (1 if won, 0 if lost) in the session whose record is KEYS[1] (-1, and
nothing changed, when there is no record; its TTL refreshed otherwise); given KEYS[3],
first advance that cursor (:func:`_advance_lua`). ARGV: the TTL in milliseconds, the
cursor's position and event id."""

_SCRIPTS = {script: hashlib.sha1(script.encode()).hexdigest() for script in (_ADVANCE, _CLAIM)}
_NO_SCRIPT = object()


def _text(value: Any) -> str:
    """A reply as text, whether the client decodes replies or not."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else str(value)


def _wire(arg: Any) -> Any:
    """A command argument as Redis gets it: text as UTF-8 that lets lone surrogates pass
    (any Python string is a key or value, as in ``MemoryStore``)."""
    return arg.encode("utf-8", "surrogatepass") if isinstance(arg, str) else arg


class RedisStore:
    """A :class:`~fsm.gateway.store.StateStore` in Redis (see the module docstring for the
    keys, their TTLs, the round trips and the failure behaviour).

    Build it with :meth:`from_url`, or around an existing ``redis.asyncio.Redis`` client
    (``owns_client``: whether :meth:`aclose` closes it; give such a client no retries and
    ``MaintNotificationsConfig(enabled=False)`` as :meth:`from_url` does, or a failure
    waits for its retries and a Redis restart costs one failed call on a pooled
    connection; the overall ``timeout_s`` deadline holds either way). Entries expire ``ttl_s`` after
    their last write; an operation without an answer in ``timeout_s`` fails. ``prefix``
    starts every key (no braces in it: they would break the per-session hash slot).
    :attr:`round_trips` counts the commands and script calls sent since creation."""

    def __init__(
        self,
        client: Redis,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        prefix: str = "fsm:",
        owns_client: bool = False,
    ) -> None:
        if ttl_s <= 0 or timeout_s <= 0:
            raise ValueError("ttl_s and timeout_s must be > 0")
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix {prefix!r} must not contain braces")
        self.client = client
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.prefix = prefix
        self.owns_client = owns_client
        self.round_trips = 0
        self._execute: Callable[..., Awaitable[Any]] = client.execute_command
        self._ttl_ms = max(1, round(ttl_s * 1000))

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        prefix: str = "fsm:",
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> RedisStore:
        """A store on a new client for ``url`` (``redis://host:port/db``), with connect and
        read timeouts of ``timeout_s`` and no retries (a failure is reported, not hidden);
        :meth:`aclose` closes the client. Connects lazily: no IO here.

        The client's pool opens at most ``max_connections`` connections and makes an
        operation that finds them all busy wait for one (redis-py's
        ``BlockingConnectionPool``), so a burst of sessions queues instead of failing: with
        redis-py's default pool, the 101st operation in flight failed at once with
        ``MaxConnectionsError``, and a session whose record it was failed closed."""
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout_s,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
            # off, the pool checks an idle connection before use and replaces one that the
            # server closed (a restarted Redis costs no failed call); "auto" skips the check
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
        )
        client = Redis.from_pool(pool)  # closing the client closes its pool
        return cls(client, ttl_s=ttl_s, timeout_s=timeout_s, prefix=prefix, owns_client=True)

    # ------------------------------------------------------------------ keys

    def key(self, session: str, kind: str, item: str | None = None) -> str:
        """The Redis key of one entry (``kind``: ``claim``, ``answer``, ``cursor``,
        ``ended`` or ``session``; ``item``: the request key or the stream), as the module docstring
        lays them out."""
        base = f"{self.prefix}{{{len(session)}:{session}}}:{kind}"
        return base if item is None else f"{base}:{item}"

    # ------------------------------------------------------------------ IO

    async def _send(self, op: str, *args: Any, no_script: Any = None) -> Any:
        """Send one command; every failure becomes ``StoreUnavailableError``, except Redis
        not knowing a script, which returns ``no_script`` when that is given."""
        self.round_trips += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._execute(*map(_wire, args))
        except NoScriptError as exc:
            if no_script is None:
                raise StoreUnavailableError(
                    f"redis store: {op} failed: {type(exc).__name__}: {exc}"
                ) from exc
            return no_script
        except TimeoutError as exc:
            cause = str(exc) or f"no answer within {self.timeout_s} s"
            raise StoreUnavailableError(f"redis store: {op} failed: {cause}") from exc
        except (RedisError, OSError) as exc:
            raise StoreUnavailableError(
                f"redis store: {op} failed: {type(exc).__name__}: {exc}"
            ) from exc

    async def _script(self, op: str, script: str, keys: list[str], *argv: Any) -> int:
        args = (len(keys), *keys, *argv)
        got = await self._send(op, "EVALSHA", _SCRIPTS[script], *args, no_script=_NO_SCRIPT)
        if got is _NO_SCRIPT:  # a new or restarted Redis: send the script itself once
            got = await self._send(op, "EVAL", script, *args)
        return int(got)

    async def connect(self) -> None:
        """Check that Redis answers and load the claim script into its cache (one round
        trip; ``save_cursor``'s loads on first use), so that the first ``claim`` costs one
        round trip too; ``StoreUnavailableError`` when Redis does not answer. Optional:
        every operation connects by itself. For a replica's start-up check."""
        await self._send("connect", "SCRIPT", "LOAD", _CLAIM)

    async def begin_session(self, session: str) -> None:
        """Record that ``session`` began (its record lives ``ttl_s`` after the last claim)."""
        await self._send(
            "begin_session", "SET", self.key(session, "session"), "1", "PX", self._ttl_ms
        )

    # ------------------------------------------------------------------ StateStore

    async def claim(
        self,
        session: str,
        request_id: RequestId,
        *,
        stream: str | None = None,
        cursor: Cursor | None = None,
    ) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.claim`: one script (the session's record
        checked, the cursor advanced when given, the claim ``SET NX``)."""
        advance = claim_cursor(stream, cursor)
        keys = [self.key(session, "session"), self.key(session, "claim", request_key(request_id))]
        argv: tuple[Any, ...] = (self._ttl_ms,)
        if advance is not None:
            keys.append(self.key(session, "cursor", advance[0]))
            argv += (advance[1].position, advance[1].event_id)
        got = await self._script("claim", _CLAIM, keys, *argv)
        if got < 0:
            raise StoreStateLostError(
                f"redis store: no record of session {session!r} (Redis lost its state, or"
                " the session was idle past the TTL)"
            )
        return got == 1

    async def save_answer(
        self, session: str, request_id: RequestId, answer: Mapping[str, Any]
    ) -> None:
        """Keep ``answer`` as JSON (``TypeError`` before any IO if it is not
        JSON-serialisable)."""
        text = json.dumps(dict(answer), separators=(",", ":"))
        key = self.key(session, "answer", request_key(request_id))
        await self._send("save_answer", "SET", key, text, "PX", self._ttl_ms)

    async def answer_of(self, session: str, request_id: RequestId) -> Mapping[str, Any] | None:
        """The kept answer, or ``None``; a stored value that is not a JSON object raises
        ``StoreUnavailableError`` (the store cannot be trusted for it)."""
        key = self.key(session, "answer", request_key(request_id))
        raw = await self._send("answer_of", "GET", key)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise StoreUnavailableError(f"redis store: answer_of: {key} is not JSON") from exc
        if not isinstance(value, dict):
            raise StoreUnavailableError(f"redis store: answer_of: {key} is not a JSON object")
        return value

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        """Advance ``stream``'s cursor to ``cursor`` unless it is at or past it (one
        script: the comparison happens in Redis)."""
        key = self.key(session, "cursor", stream)
        await self._script(
            "save_cursor", _ADVANCE, [key], self._ttl_ms, cursor.position, cursor.event_id
        )

    async def cursor_of(self, session: str, stream: str) -> Cursor | None:
        """The newest recorded cursor of ``stream``, or ``None``; a malformed stored value
        raises ``StoreUnavailableError``."""
        key = self.key(session, "cursor", stream)
        raw = await self._send("cursor_of", "GET", key)
        if raw is None:
            return None
        position, _, event_id = _text(raw).partition(" ")
        try:
            return Cursor(int(position), event_id)
        except ValueError as exc:
            raise StoreUnavailableError(f"redis store: cursor_of: {key} is malformed") from exc

    async def end_session(self, session: str, reason: str) -> None:
        """Record that ``session`` is gone, and why."""
        key = self.key(session, "ended")
        await self._send("end_session", "SET", key, reason, "PX", self._ttl_ms)

    async def session_ended(self, session: str) -> str | None:
        """Why ``session`` ended, or ``None``."""
        raw = await self._send("session_ended", "GET", self.key(session, "ended"))
        return None if raw is None else _text(raw)

    async def aclose(self) -> None:
        """Close the client if this store made it (:meth:`from_url`) or was given it with
        ``owns_client``; sends nothing to Redis and never raises for a Redis that is gone."""
        if self.owns_client:
            with suppress(RedisError, OSError):
                await self.client.aclose()
