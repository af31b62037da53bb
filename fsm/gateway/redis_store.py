"""A :class:`~fsm.gateway.store.StateStore` in Redis, shared by a gateway's replicas.

:class:`RedisStore` keeps what :mod:`fsm.gateway.store` says replicas must agree on in one
Redis database, through redis-py's asyncio client. Every operation is one round trip
(one command or one Lua script call) and atomic on the server; :attr:`RedisStore.round_trips`
counts them.

Keys (``P`` is the prefix: ``fsm:`` by default, ``fsm:<namespace>:`` for a deployment
given a namespace; ``S`` is ``<len(session)>:<session>``, so that no session name can run
into another's keys; the braces make every key of one session hash to one Redis Cluster
slot):

=================================  ===============================  ======================
key                                value                            written by
=================================  ===============================  ======================
``P{S}:claim:<type>:<id>``         ``1``; ``lease <owner>`` when    ``claim`` (``SET NX``),
                                   won under a lease                ``renew`` (its TTL),
                                                                    ``take_over``,
                                                                    ``hold_answer``
``P{S}:lease:<type>:<id>``         the owner (a replica id)         ``claim`` under a
                                                                    lease, ``renew``,
                                                                    ``take_over``,
                                                                    ``hold_answer``
``P{S}:open:<stream>``             a list of ``<type>:<id>``: the   ``claim`` under a lease
                                   stream's leased claims (the      with a cursor
                                   newest ``MAX_OPEN_CLAIMS``)
``P{S}:answer:<type>:<id>``        the answer, as JSON              ``save_answer``,
                                                                    ``hold_answer``,
                                                                    ``take_over`` (its TTL)
``P{S}:submitted:<type>:<id>``     ``1``: the answer's submission   ``mark_submitted`` (the
                                   ended                            claim's TTL refreshed),
                                                                    ``renew`` (its TTL)
``P{S}:cursor:<stream>``           ``<position> <event id>``        ``save_cursor``,
                                                                    ``claim`` with a cursor
``P{S}:ended``                     the reason                       ``end_session``
``P{S}:session``                   ``1``                            ``begin_session``,
                                                                    ``claim``, ``renew``,
                                                                    ``take_over``,
                                                                    ``hold_answer`` (its
                                                                    TTL)
=================================  ===============================  ======================

``<type>:<id>`` keeps a request id's JSON type (``int:1`` and ``str:1`` are different
keys, as in :class:`~fsm.gateway.store.MemoryStore`). Text goes to Redis as UTF-8 that lets
lone surrogates pass, so any Python string is a session, stream, event id, owner or reason.

Every key is written with a TTL of ``ttl_s`` (``PX``, milliseconds), set anew at each
write: Redis memory is bounded by the sessions active within the last ``ttl_s``. A claim
that loses and a cursor that is not newer write nothing and so refresh nothing (a claim
refreshes the session's record, won or lost). The lease key is the one exception: its
TTL is the lease (``lease_s``), set when the claim is won and again at each ``renew``,
so Redis's own clock lapses it (no replica's clock is compared with another's); a renewal
also refreshes the claim's and the session record's TTLs. A claim whose lease key is gone
while the claim still says ``lease <owner>`` has lapsed, for its owner for good:
``renew`` needs both. Only ``take_over`` revives it, for a new owner, and only while the
submission is not marked: it rewrites the claim (``lease <new owner>``, the TTL anew),
sets the lease key for ``lease_s`` and refreshes the answer's and the session record's
TTLs, so the answer lives as long as the claim whose holder is to submit it.
``hold_answer`` writes the answer and, unless the submission is marked, gives the claim
and its lease to the replica that stored the answer and will submit it, whether the
previous holder's lease key still names it or is gone (that holder's renewals then
fail: ``lease_held`` compares the owner).

The writes that read first (``claim``: the session's record checked and refreshed, the
claim ``SET NX``, the lease set, the cursor advanced when given; ``renew``: owner and lease
compared; ``save_cursor``: positions compared) and ``claim_status`` (claim, lease and
answer read in one atomic step; ``mark_submitted``: the claim checked and the mark set;
``take_over``: the claim, its lease and the mark checked, the new owner set;
``hold_answer``: the answer set, the claim and the mark checked, the new owner set) are
one Lua
script (one ``EVALSHA``; after a Redis restart
has emptied the script cache, one more round trip sends the script with ``EVAL``).
Positions are compared on the server, so concurrent writers never move a cursor back (Lua
compares numbers as doubles: positions are exact up to 2**53).

Fail closed: every Redis error, refused or reset connection, and every operation that has
no answer within ``timeout_s`` (the socket timeouts and an overall deadline both hold it)
raises :class:`~fsm.gateway.store.StoreUnavailableError` whose message is fixed text naming
the operation (the gateway tells it to clients, to a peer with no credentials too: the
cause, redis-py's ``Error 111 connecting to HOST:PORT``, would name the store's address);
the cause is logged and chained (``__cause__``); nothing is retried inside the store and
nothing hangs. An operation that finds every pooled connection busy waits for one within
the same timeout (a store made by
:meth:`RedisStore.from_url` opens at most ``max_connections``). Once Redis answers again the
same store works again: the pool replaces, before use, a connection the server closed once
the event loop has seen it close (so a restart between two calls costs no failed call; a
call racing the restart fails closed), and reconnects on the next call. A write that timed out may
still have landed: a claim that raised may be held, and the request it stood for is then
never presented (never twice, possibly not at all: the closed side of failing).

A Redis restart without persistence (the harness runs Redis with ``--save ''
--appendonly no``) loses every key: claims, leases, answers, cursors, ended and begun
sessions.
Nothing is presented twice for it: a claim in a session whose record is gone raises
:class:`~fsm.gateway.store.StoreStateLostError`, so every session begun before the
restart fails closed at its next request decision (its calls end with that typed error,
``data.reason`` ``store-state-lost``), while sessions begun after it work as before. Kept
answers and cursors are gone (a resume starts from the client's ``Last-Event-ID``), and
an ended session is asked upstream again (the server answers 404 once more). Deployments
whose sessions must outlive a Redis restart run Redis with persistence (``appendonly
yes``); the store needs nothing else for that.

Round trips by operation: ``begin_session`` 1, ``claim`` 1, ``claim`` with ``stream`` and
``cursor`` and/or a lease 1, ``renew`` 1, ``claim_status`` 1, ``mark_submitted`` 1,
``take_over`` 1, ``hold_answer`` 1, ``open_claims`` 1,
``save_cursor`` 1,
``cursor_of`` 1, ``save_answer`` 1, ``answer_of`` 1, ``end_session`` 1, ``session_ended``
1, ``connect`` (optional: checks Redis and loads the script) 1, ``aclose`` 0. Connection
set-up (redis-py's handshake on a new or re-opened connection, and TLS's for
``rediss://``) is not counted. Needs the ``gateway`` extra (redis-py).

Redis Cluster: :meth:`RedisStore.from_url` with ``redis+cluster://host:port`` (or
``rediss+cluster://`` for TLS) runs on redis-py's cluster client, seeded with that one node
(it learns the others and follows the slots as they move). Every key of a session holds
its hash tag ``{S}``, so each command and each script call touches one slot: a claim stays
one atomic step on the one master that holds the session. A connection to each master is
opened on first use, at most ``max_connections`` per master at once; past that an
operation fails closed at once (redis-py's cluster client has no blocking pool).
``connect`` loads the script on every master; a master that lost it (a failover) gets it
with ``EVAL`` as a restarted Redis does. Only database 0 exists on a cluster.

Logging: the module logs each Redis failure at ``WARNING``, for operators: the operation
and the cause (redis-py's exception class and text, which may name the store's host and
port but never a password; the store never adds a key, so never a session or request id
nor an answer); nothing else at ``INFO`` or above.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, Unpack

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from fsm.durable import redis_link as link
from fsm.durable.redis_link import (
    CLUSTER_SCHEMES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_TIMEOUT_S,
    MAX_NAMESPACE,
    check_lease,
)
from fsm.gateway.store import (
    DEFAULT_TTL_S,
    MAX_OPEN_CLAIMS,
    Answer,
    ClaimStatus,
    ClaimTerms,
    Cursor,
    RequestId,
    StoreStateLostError,
    StoreUnavailableError,
    claim_terms,
    request_key,
)

__all__ = [
    "CLUSTER_SCHEMES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_TIMEOUT_S",
    "MAX_NAMESPACE",
    "RedisStore",
]

logger = logging.getLogger(__name__)

_SCRIPT = link.Script(
    link.LEASE_LUA
    + """
local op, ttl = ARGV[1], ARGV[2]
local function advance(key, position, event_id)
  local old = redis.call('GET', key)
  local at = old and tonumber(string.match(old, '^(-?%d+) '))
  if not at or at < tonumber(position) then
    redis.call('SET', key, position .. ' ' .. event_id, 'PX', ttl)
  end
end
if op == 'cursor' then
  advance(KEYS[1], ARGV[3], ARGV[4])
  return 0
elseif op == 'claim' then
  if redis.call('PEXPIRE', KEYS[1], ttl) == 0 then
    return -1
  end
  if KEYS[4] then
    advance(KEYS[4], ARGV[5], ARGV[6])
  end
  local lease = tonumber(ARGV[3])
  local held = '1'
  if lease > 0 then
    held = 'lease ' .. ARGV[4]
  end
  if not redis.call('SET', KEYS[2], held, 'NX', 'PX', ttl) then
    return 0
  end
  if lease > 0 then
    lease_hold(KEYS[3], ARGV[4], lease)
    if KEYS[5] then
      redis.call('RPUSH', KEYS[5], ARGV[7])
      redis.call('LTRIM', KEYS[5], -tonumber(ARGV[8]), -1)
      redis.call('PEXPIRE', KEYS[5], ttl)
    end
  else
    redis.call('DEL', KEYS[3])
  end
  return 1
elseif op == 'renew' then
  if redis.call('GET', KEYS[2]) ~= 'lease ' .. ARGV[4]
      or not lease_held(KEYS[3], ARGV[4]) then
    return 0
  end
  lease_hold(KEYS[3], ARGV[4], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)  -- the mark, if any, lives as its claim does
  return 1
elseif op == 'status' then
  return {redis.call('GET', KEYS[1]), redis.call('EXISTS', KEYS[2]),
          redis.call('GET', KEYS[3]), redis.call('EXISTS', KEYS[4])}
elseif op == 'mark' then
  if redis.call('PEXPIRE', KEYS[1], ttl) == 0 then
    return 0
  end
  redis.call('SET', KEYS[2], '1', 'PX', ttl)
  return 1
elseif op == 'take' then
  local held = redis.call('GET', KEYS[2])
  if not held or string.sub(held, 1, 6) ~= 'lease '
      or redis.call('EXISTS', KEYS[3]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then
    return 0
  end
  redis.call('SET', KEYS[2], 'lease ' .. ARGV[4], 'PX', ttl)
  lease_hold(KEYS[3], ARGV[4], ARGV[3])
  redis.call('PEXPIRE', KEYS[5], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
elseif op == 'hold' then
  redis.call('SET', KEYS[5], ARGV[5], 'PX', ttl)
  local held = redis.call('GET', KEYS[2])
  if not held or string.sub(held, 1, 6) ~= 'lease '
      or redis.call('EXISTS', KEYS[4]) == 1 then
    return 0
  end
  redis.call('SET', KEYS[2], 'lease ' .. ARGV[4], 'PX', ttl)
  lease_hold(KEYS[3], ARGV[4], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
end
return redis.error_reply('fsm store script: unknown operation')
"""
)
"""Every write of the store that reads first, in one script (one SHA, loaded by
:meth:`RedisStore.connect` in one round trip), chosen by ARGV[1]; ARGV[2] is the entries'
TTL in milliseconds.

* ``cursor``: advance the cursor at KEYS[1] to position ARGV[3] (event id ARGV[4])
  unless it is at or past it. Lua compares positions as doubles: exact up to 2**53.
* ``claim``: in the session whose record is KEYS[1] (-1, nothing changed, without one;
  its TTL refreshed otherwise), first advance the cursor KEYS[4] when given (to ARGV[5],
  ARGV[6]), then claim KEYS[2] with ``SET NX``: 1 if won, 0 if lost. A won claim holds
  ``1``, or under a lease of ARGV[3] milliseconds (0: none) ``lease <owner>`` (ARGV[4]),
  and the lease key KEYS[3] then holds the owner with that expiry (without a lease, a
  stale lease key is deleted); given a stream, the request's key (ARGV[7]) is appended
  to the stream's open claims KEYS[5], trimmed to the newest ARGV[8].
* ``renew``: while the claim KEYS[2] is ARGV[4]'s under a lease that has not lapsed (the
  lease key KEYS[3] still holds ARGV[4]), set the lease to ARGV[3] milliseconds and
  refresh the claim's, the session record's (KEYS[1]) and the mark's (KEYS[4], if set)
  TTLs: 1; else 0, nothing changed.
* ``status``: the claim KEYS[1], whether the lease key KEYS[2] exists, the answer KEYS[3],
  whether the submission's mark KEYS[4] exists (read only).
* ``mark``: while the claim KEYS[1] exists, refresh its TTL and set the mark KEYS[2] with
  the same TTL: 1 (the two expire together); without a claim, 0, nothing written.
* ``take``: while the claim KEYS[2] was won under a lease (``lease <owner>``) whose lease
  key KEYS[3] is gone (lapsed) and no mark KEYS[4] exists, make ARGV[4] its owner (the
  claim rewritten with the TTL, the lease key set for ARGV[3] milliseconds) and refresh
  the TTLs of the answer KEYS[5] and the session's record KEYS[1] (neither made): 1;
  else 0, nothing changed. The checks and the writes are one script, so of concurrent
  takers exactly one wins.
* ``hold``: set the answer KEYS[5] to ARGV[5] (JSON) with the TTL; then, while the claim
  KEYS[2] was won under a lease and no mark KEYS[4] exists, make ARGV[4] its owner
  whether the lease key KEYS[3] still holds another owner or is gone (the claim
  rewritten with the TTL, the lease key set for ARGV[3] milliseconds) and refresh the
  session record's TTL (KEYS[1]): 1; else 0, only the answer written.

The lease key is kept by the Redis link's lease functions
(:data:`fsm.durable.redis_link.LEASE_LUA`), as the durable store's owner lease is."""

_SHA = _SCRIPT.sha
"""The SHA-1 ``EVALSHA`` names the script by."""
_LEASED = "lease "
"""How a claim won under a lease starts its value (the owner follows)."""
_NO_SCRIPT = object()


def _request_id(key: str) -> RequestId:
    """A request id back from its :func:`~fsm.gateway.store.request_key`."""
    kind, _, value = key.partition(":")
    return int(value) if kind == "int" else value


def _answer(raw: Any, op: str) -> dict[str, Any] | None:
    """A stored answer (``None`` for none); a value that is not a JSON object raises
    ``StoreUnavailableError`` (the store cannot be trusted for it)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise StoreUnavailableError(f"redis store: {op}: a stored answer is not JSON") from exc
    if not isinstance(value, dict):
        raise StoreUnavailableError(f"redis store: {op}: a stored answer is not a JSON object")
    return value


class RedisStore:
    """A :class:`~fsm.gateway.store.StateStore` in Redis (see the module docstring for the
    keys, their TTLs, the round trips and the failure behaviour).

    Build it with :meth:`from_url`, or around an existing ``redis.asyncio.Redis`` client
    (``owns_client``: whether :meth:`aclose` closes it; give such a client no retries and
    ``MaintNotificationsConfig(enabled=False)`` as :meth:`from_url` does, or a failure
    waits for its retries and a Redis restart costs one failed call on a pooled
    connection; the overall ``timeout_s`` deadline holds either way). Entries expire ``ttl_s`` after
    their last write; an operation without an answer in ``timeout_s`` fails.

    Every key starts with :attr:`prefix`: ``fsm:<namespace>:`` for a ``namespace`` (1 to
    64 printable characters, no braces, no whitespace), so that deployments sharing one
    Redis under different namespaces share nothing; else ``prefix`` itself (default
    ``fsm:``; no braces in it: they would break the per-session hash slot). Give one of
    the two, not both. :attr:`round_trips` counts the commands and script calls sent
    since creation. The ``repr`` shows the prefix and where Redis is, never a password."""

    def __init__(
        self,
        client: Redis | RedisCluster,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        prefix: str | None = None,
        namespace: str | None = None,
        owns_client: bool = False,
    ) -> None:
        if ttl_s <= 0 or timeout_s <= 0:
            raise ValueError("ttl_s and timeout_s must be > 0")
        self.client = client
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.prefix = link.namespaced(prefix, namespace)
        self.owns_client = owns_client
        self.round_trips = 0
        self._execute: Callable[..., Awaitable[Any]] = client.execute_command
        self._ttl_ms = link.millis(ttl_s)

    def __repr__(self) -> str:
        where = link.where(self.client)
        return f"<RedisStore {where} prefix={self.prefix!r} ttl_s={self.ttl_s:g}>"

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        prefix: str | None = None,
        namespace: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        ssl_ca_certs: str | None = None,
    ) -> RedisStore:
        """A store on a new client for ``url`` (``redis://[:password@]host:port/db``, or
        ``rediss://...`` for TLS; ``redis+cluster://[:password@]host:port`` or
        ``rediss+cluster://...`` for a Redis Cluster, given any one of its nodes), with
        connect and read timeouts of ``timeout_s`` and no retries (a failure is reported,
        not hidden); :meth:`aclose` closes the client. Connects lazily: no IO here.

        TLS (``rediss://``) verifies the server's certificate and host name against the
        system's authorities, or against the CA file ``ssl_ca_certs`` (a private CA; the
        URL's ``?ssl_ca_certs=PATH`` query parameter, redis-py's own, does the same); a
        certificate that does not verify fails the first operation (``connect``) with
        ``StoreUnavailableError``. ``ssl_ca_certs`` with a URL that is not ``rediss://``
        is a :class:`ValueError`, as is a cluster URL with no node or a database other
        than 0.

        The client's pool opens at most ``max_connections`` connections and makes an
        operation that finds them all busy wait for one (redis-py's
        ``BlockingConnectionPool``), so a burst of sessions queues instead of failing: with
        redis-py's default pool, the 101st operation in flight failed at once with
        ``MaxConnectionsError``, and a session whose record it was failed closed. The
        client is made by :func:`fsm.durable.redis_link.open_client`, as the durable
        store's is."""
        prefix = link.namespaced(prefix, namespace)  # refused before a client is made
        client = link.open_client(
            url,
            asynchronous=True,
            timeout_s=timeout_s,
            max_connections=max_connections,
            ssl_ca_certs=ssl_ca_certs,
            feature="fsm.gateway.redis_store",
        )
        return cls(client, ttl_s=ttl_s, timeout_s=timeout_s, prefix=prefix, owns_client=True)

    # ------------------------------------------------------------------ keys

    def key(self, session: str, kind: str, item: str | None = None) -> str:
        """The Redis key of one entry (``kind``: ``claim``, ``lease``, ``answer``,
        ``submitted``, ``cursor``, ``ended`` or ``session``; ``item``: the request key or
        the stream), as the module docstring lays them out."""
        base = f"{self.prefix}{link.hash_tag(session)}:{kind}"
        return base if item is None else f"{base}:{item}"

    # ------------------------------------------------------------------ IO

    async def _send(self, op: str, *args: Any, no_script: Any = None, **route: Any) -> Any:
        """Send one command (its name ``args[0]`` as it is, a plain word: a cluster client
        routes by it; the rest as :func:`_wire` encodes them); every failure becomes
        ``StoreUnavailableError``, except Redis
        not knowing a script, which returns ``no_script`` when that is given. ``route``
        goes to a cluster client (``target_nodes``). Failure messages name the operation
        only (:meth:`_unavailable`)."""
        self.round_trips += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._execute(args[0], *map(link.wire, args[1:]), **route)
        except TimeoutError as exc:
            raise self._unavailable(op, str(exc) or f"no answer within {self.timeout_s} s") from exc
        except link.failures() as exc:
            if no_script is not None and link.is_no_script(exc):
                return no_script
            raise self._unavailable(op, link.cause(exc)) from exc

    @staticmethod
    def _unavailable(op: str, cause: str) -> StoreUnavailableError:
        """The error for ``op`` failing with ``cause``: its message is fixed text naming
        the operation, because the gateway tells it to clients (a ``503`` before any
        credential is checked, a call's ending error) and ``cause`` may name the store's
        host and port. ``cause`` is logged at ``WARNING`` instead, where operators see it
        (redis-py's text never holds a password, and the store never puts a key in it)."""
        logger.warning("redis store: %s failed: %s", op, cause)
        return StoreUnavailableError(f"redis store: {op} failed")

    async def _script(self, op: str, keys: list[str], *argv: Any) -> Any:
        """Run the store's script (:data:`_SCRIPT`) for ``op`` (the script's operation is
        ``argv[0]``): ``EVALSHA``, and once more with ``EVAL`` when Redis does not know
        it (new or restarted)."""
        got = await self._send(op, *_SCRIPT.evalsha(keys, *argv), no_script=_NO_SCRIPT)
        if got is _NO_SCRIPT:  # a new or restarted Redis: send the script itself once
            got = await self._send(op, *_SCRIPT.eval(keys, *argv))
        return got

    async def connect(self) -> None:
        """Check that Redis answers and load the store's script into its cache (one round
        trip), so that every later operation costs one round trip;
        ``StoreUnavailableError`` when Redis does not answer (or its certificate does not
        verify). Optional: every operation connects by itself. For a replica's start-up
        check. On a cluster, the script is loaded on every master (one round trip each,
        counted as one)."""
        route = {}
        if isinstance(self.client, RedisCluster):
            route["target_nodes"] = RedisCluster.PRIMARIES
        await self._send("connect", "SCRIPT", "LOAD", _SCRIPT.source, **route)

    async def ping(self) -> None:
        """Check that Redis answers (one ``PING``); ``StoreUnavailableError`` when it does
        not within ``timeout_s``. A replica's readiness check."""
        await self._send("ping", "PING")

    async def begin_session(self, session: str) -> None:
        """Record that ``session`` began (its record lives ``ttl_s`` after the last claim
        or :meth:`keep_session`)."""
        await self._send(
            "begin_session", "SET", self.key(session, "session"), "1", "PX", self._ttl_ms
        )

    async def keep_session(self, session: str) -> None:
        """See :meth:`fsm.gateway.store.StateStore.keep_session`: one ``PEXPIRE``, which
        extends a record Redis still has and creates none."""
        await self._send("keep_session", "PEXPIRE", self.key(session, "session"), self._ttl_ms)

    # ------------------------------------------------------------------ StateStore

    async def claim(self, session: str, request_id: RequestId, **terms: Unpack[ClaimTerms]) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.claim`: one script (the session's record
        checked, the cursor advanced when given, the claim ``SET NX``, the lease key set
        with ``PX`` when won under a lease)."""
        claim = claim_terms(terms)
        advance, owner, lease_s = claim.advance, claim.owner, claim.lease_s
        rkey = request_key(request_id)
        keys = self._claim_keys(session, rkey)
        lease_ms = 0 if lease_s is None else link.millis(lease_s)
        argv: tuple[Any, ...] = ("claim", self._ttl_ms, lease_ms, owner)
        if advance is not None:
            keys.append(self.key(session, "cursor", advance[0]))
            keys.append(self.key(session, "open", advance[0]))
            argv += (advance[1].position, advance[1].event_id, rkey, MAX_OPEN_CLAIMS)
        got = int(await self._script("claim", keys, *argv))
        if got < 0:
            raise StoreStateLostError(
                "redis store: no record of the session (Redis lost its state, or the"
                " session was idle past the TTL)"
            )
        return got == 1

    def _claim_keys(self, session: str, rkey: str) -> list[str]:
        """The keys a claim's script reads and writes: the session's record, the claim,
        its lease."""
        return [
            self.key(session, "session"),
            self.key(session, "claim", rkey),
            self.key(session, "lease", rkey),
        ]

    async def renew(self, session: str, request_id: RequestId, owner: str, lease_s: float) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.renew`: one script (the claim's owner
        and the lease key compared in Redis; the claim's mark, if any, kept as long as
        the claim)."""
        check_lease(owner, lease_s)
        rkey = request_key(request_id)
        keys = [*self._claim_keys(session, rkey), self.key(session, "submitted", rkey)]
        lease_ms = link.millis(lease_s)
        got = await self._script("renew", keys, "renew", self._ttl_ms, lease_ms, owner)
        return int(got) == 1

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        """See :meth:`fsm.gateway.store.StateStore.claim_status`: one script reads the
        claim, whether its lease key exists and the answer (``StoreUnavailableError`` for
        a stored answer that is not a JSON object). Redis expires the lease key itself,
        on its own clock."""
        rkey = request_key(request_id)
        keys = [
            self.key(session, "claim", rkey),
            self.key(session, "lease", rkey),
            self.key(session, "answer", rkey),
            self.key(session, "submitted", rkey),
        ]
        got = await self._script("claim_status", keys, "status", self._ttl_ms)
        try:
            held_raw, leased_raw, answer_raw, submitted_raw = got
        except (TypeError, ValueError) as exc:
            raise StoreUnavailableError("redis store: claim_status: unexpected reply") from exc
        answer = _answer(answer_raw, "claim_status")
        if held_raw is None:
            return ClaimStatus(claimed=False, owner=None, lapsed=False, answer=answer)
        held = link.text(held_raw)
        submitted = int(submitted_raw) == 1
        if not held.startswith(_LEASED):  # won without a lease: it never lapses
            return ClaimStatus(
                claimed=True, owner=None, lapsed=False, answer=answer, submitted=submitted
            )
        gone = int(leased_raw) == 0
        return ClaimStatus(
            claimed=True,
            owner=held[len(_LEASED) :],
            lapsed=gone and answer is None and not submitted,
            answer=answer,
            submitted=submitted,
            lease_lapsed=gone,
        )

    async def mark_submitted(self, session: str, request_id: RequestId) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.mark_submitted`: one script (the
        claim's existence checked and its TTL refreshed, the mark set, in Redis)."""
        rkey = request_key(request_id)
        keys = [self.key(session, "claim", rkey), self.key(session, "submitted", rkey)]
        got = await self._script("mark_submitted", keys, "mark", self._ttl_ms)
        return int(got) == 1

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.take_over`: one script (the claim, its
        lease key and the mark checked, the claim and the lease key written for the new
        owner, in Redis: concurrent takers cannot both win)."""
        check_lease(owner, lease_s)
        rkey = request_key(request_id)
        keys = [
            *self._claim_keys(session, rkey),
            self.key(session, "submitted", rkey),
            self.key(session, "answer", rkey),
        ]
        lease_ms = link.millis(lease_s)
        got = await self._script("take_over", keys, "take", self._ttl_ms, lease_ms, owner)
        return int(got) == 1

    async def open_claims(self, session: str, stream: str) -> list[RequestId]:
        """See :meth:`fsm.gateway.store.StateStore.open_claims`: one ``LRANGE``."""
        key = self.key(session, "open", stream)
        got = await self._send("open_claims", "LRANGE", key, 0, -1)
        return [_request_id(link.text(item)) for item in got or ()]

    async def save_answer(
        self, session: str, request_id: RequestId, answer: Mapping[str, Any]
    ) -> None:
        """Keep ``answer`` as JSON (``TypeError`` before any IO if it is not
        JSON-serialisable)."""
        text = json.dumps(dict(answer), separators=(",", ":"))
        key = self.key(session, "answer", request_key(request_id))
        await self._send("save_answer", "SET", key, text, "PX", self._ttl_ms)

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Answer, owner: str, lease_s: float
    ) -> bool:
        """See :meth:`fsm.gateway.store.StateStore.hold_answer`: one script (the answer
        set; the claim and the mark checked, the claim and the lease key written for
        ``owner``, in Redis: no watcher reads the answer stored without its submitter's
        lease). ``TypeError`` before any IO for an answer that is not JSON-serialisable."""
        check_lease(owner, lease_s)
        text = json.dumps(dict(answer), separators=(",", ":"))
        rkey = request_key(request_id)
        keys = [
            *self._claim_keys(session, rkey),
            self.key(session, "submitted", rkey),
            self.key(session, "answer", rkey),
        ]
        lease_ms = link.millis(lease_s)
        got = await self._script("hold_answer", keys, "hold", self._ttl_ms, lease_ms, owner, text)
        return int(got) == 1

    async def answer_of(self, session: str, request_id: RequestId) -> Mapping[str, Any] | None:
        """The kept answer, or ``None``; a stored value that is not a JSON object raises
        ``StoreUnavailableError`` (the store cannot be trusted for it)."""
        key = self.key(session, "answer", request_key(request_id))
        return _answer(await self._send("answer_of", "GET", key), "answer_of")

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        """Advance ``stream``'s cursor to ``cursor`` unless it is at or past it (one
        script: the comparison happens in Redis)."""
        key = self.key(session, "cursor", stream)
        await self._script(
            "save_cursor", [key], "cursor", self._ttl_ms, cursor.position, cursor.event_id
        )

    async def cursor_of(self, session: str, stream: str) -> Cursor | None:
        """The newest recorded cursor of ``stream``, or ``None``; a malformed stored value
        raises ``StoreUnavailableError``."""
        key = self.key(session, "cursor", stream)
        raw = await self._send("cursor_of", "GET", key)
        if raw is None:
            return None
        position, _, event_id = link.text(raw).partition(" ")
        try:
            return Cursor(int(position), event_id)
        except ValueError as exc:
            raise StoreUnavailableError(
                "redis store: cursor_of: a stored cursor is malformed"
            ) from exc

    async def end_session(self, session: str, reason: str) -> None:
        """Record that ``session`` is gone, and why."""
        key = self.key(session, "ended")
        await self._send("end_session", "SET", key, reason, "PX", self._ttl_ms)

    async def session_ended(self, session: str) -> str | None:
        """Why ``session`` ended, or ``None``."""
        raw = await self._send("session_ended", "GET", self.key(session, "ended"))
        return None if raw is None else link.text(raw)

    async def aclose(self) -> None:
        """Close the client if this store made it (:meth:`from_url`) or was given it with
        ``owns_client``; sends nothing to Redis and never raises for a Redis that is gone."""
        if self.owns_client:
            with suppress(*link.failures()):
                await self.client.aclose()
