"""The durable store in Redis: one client profile per key prefix, for guards that run
where a Redis is closer at hand than a disk (a container without a volume), or that a
restarted process elsewhere must pick up.

:class:`RedisStore` keeps exactly what :class:`~fsm.durable.sqlite.SqliteStore` keeps, in
the same row format (:mod:`fsm.durable.codec`), and reads it back equal (the contract
tests run on both). It stands on the gateway's Redis link (:mod:`fsm.durable.redis_link`:
the client from a URL, the key naming and hash tags, the leases, the error mapping).

* **Keys** (``P`` is :attr:`RedisStore.prefix`: ``fsm:durable:{<len>:<profile>}``, or
  ``fsm:<namespace>:durable:{...}`` with a namespace; the braces are the profile's hash
  tag, so one profile's keys sit in one Redis Cluster slot and no profile runs into
  another's): ``P:owner`` the owner lease (below), ``P:schema`` the schema version, hashes
  ``P:meta`` (session, expired; ``rejoin``: the SSE adapter's session record),
  ``P:streams`` (stream name -> record), ``P:requests``
  and ``P:questions`` (``[session, request id]`` -> record; a question's ``[method,
  params]``), the set ``P:reshown``, the hash ``P:calls`` (call id -> record), the sorted
  sets ``P:order`` (every call by its write) and ``P:ended`` (the ended ones: the oldest
  beyond :data:`~fsm.durable.store.MAX_ENDED_CALLS` leave) and the counter ``P:seq``. No
  key expires but the lease: what is stored stays as bounded as the guard's tombstones.
* **Atomic writes**: each :meth:`RedisStore.write` is one Lua script call (``EVALSHA``,
  and once more with ``EVAL`` after a Redis restart emptied the script cache): Redis runs
  it whole or not at all, and ``write`` returns once Redis acknowledged it.
* **What "durable" means on Redis** is the server's configuration, which the operator
  owns: with ``appendonly yes`` and ``appendfsync always``, Redis writes and fsyncs its
  append-only file before it replies, so an acknowledged write survives a Redis crash and
  a power loss, as the SQLite store's synced WAL does; with ``appendfsync everysec`` (the
  default once AOF is on) the last second of writes may be lost on a power loss (a process
  crash of Redis loses nothing written to the OS); without persistence a Redis restart
  loses everything, and the next open starts fresh (the store cannot tell an empty Redis
  from a new profile: run the store only on a Redis with AOF). ``wait_replicas=n`` adds
  ``WAIT n`` after each write (one more round trip): ``write`` then returns once ``n``
  replicas hold it too, and raises :class:`~fsm.errors.StoreError` when fewer did within
  ``wait_timeout_s`` (the write is on the master; the embedder must not take the actions
  after it, so nothing is shown that a failover could forget).
* **One process per profile**: opening takes the owner lease, the key ``P:owner``
  holding a token (host, pid, random) with a Redis expiry of ``lease_s`` (``SET NX PX``,
  the gateway's lease mechanism); a second store on the profile, in this process or
  another, gets :class:`~fsm.errors.StoreLockedError` at once, naming the holder. A thread
  renews the lease every third of ``lease_s`` while the store is open; :meth:`close`
  releases it. A process killed with the store open stops renewing, so its lease lapses
  ``lease_s`` later and a restart then opens the profile. Every write and read runs in
  the script only while the lease key still holds this store's token (a fence): a store
  whose lease lapsed (a process stalled past ``lease_s``) and was taken over gets
  :class:`~fsm.errors.StoreLockedError` and writes nothing, so two processes never both
  write one profile.
* **Schema**: ``P:schema`` holds :data:`~fsm.durable.codec.SCHEMA_VERSION`; a newer one
  is :class:`~fsm.errors.StoreVersionError`; one that is not a number, or data without a
  schema key, is :class:`~fsm.errors.StoreCorruptError`.
* **Bad values**: a record that does not read back, or a key of the wrong Redis type, is
  :class:`~fsm.errors.StoreCorruptError` at :meth:`RedisStore.load` or
  :meth:`RedisStore.calls`; never a fresh start on its own (an application that accepts
  one deletes the profile's keys).
* **Unreachable Redis**: any Redis or socket error, or no answer within ``timeout_s``, is
  :class:`~fsm.errors.StoreError` naming the operation, the server (never a password) and
  the cause; nothing is retried. A write that timed out may still have landed: the
  embedder stops rather than take the actions after it, so the question is never shown
  twice (at worst once after a restart, as a re-shown question).

Round trips: ``write`` 1 (2 with ``wait_replicas``), ``load`` 1, ``calls`` 1, open 1,
``close`` 1, a lease renewal 1 per third of ``lease_s``. Needs the ``gateway`` extra
(redis-py), imported when a store is made.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from fsm.durable import codec, store
from fsm.durable import redis_link as link
from fsm.durable.calls import CallRecord
from fsm.durable.codec import SCHEMA_VERSION
from fsm.errors import StoreCorruptError, StoreError, StoreLockedError, StoreVersionError
from fsm.machines.resumption import LIVENESS
from fsm.sse.guard import SseDelta, SseStored

__all__ = ["DEFAULT_OWNER_LEASE_S", "MAX_PROFILE", "RedisStore"]

DEFAULT_OWNER_LEASE_S = 10.0
"""Seconds a profile's owner lease lasts unless renewed: how long a restart after a crash
waits before it can open the profile (renewed every third of it while the store is open)."""

MAX_PROFILE = 128
"""Characters a profile name may have at most."""

_KEYS = ("owner", "schema", "meta", "streams", "requests", "questions", "reshown")
_CALL_KEYS = ("owner", "calls", "order", "ended", "seq")
_OWNER, _META, _STREAMS, _REQUESTS, _QUESTIONS, _RESHOWN = 1, 3, 4, 5, 6, 7
"""Lua's indexes (KEYS[n]) of the SSE script's keys, in :data:`_KEYS` order."""

_SCRIPT = link.Script(
    link.LEASE_LUA
    + """
local op, token, lease = ARGV[1], ARGV[2], ARGV[3]
if op == 'open' then
  local holder = redis.call('GET', KEYS[1])
  if holder then
    return {'locked', holder}
  end
  local version = redis.call('GET', KEYS[2])
  if version and version ~= ARGV[4] then
    return {'schema', version}
  end
  if not version and redis.call('EXISTS', unpack(KEYS, 3)) > 0 then
    return {'schema', ''}
  end
  lease_take(KEYS[1], token, lease)
  redis.call('SET', KEYS[2], ARGV[4])
  return {'ok', ''}
end
if not lease_held(KEYS[1], token) then
  return 0
end
if op == 'release' then
  redis.call('DEL', KEYS[1])
  return 1
end
lease_hold(KEYS[1], token, lease)
if op == 'renew' then
  return 1
elseif op == 'load' then
  local counts = {redis.call('HLEN', KEYS[4]), redis.call('HLEN', KEYS[5]),
                  math.max(redis.call('HLEN', KEYS[6]), redis.call('SCARD', KEYS[7]))}
  for i = 1, 3 do
    local limit = tonumber(ARGV[3 + i])
    if limit >= 0 and counts[i] > limit then
      return {'over', counts[1], counts[2], counts[3]}
    end
  end
  return {redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]),
          redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[6]),
          redis.call('SMEMBERS', KEYS[7])}
elseif op == 'sse' then
  for i = 4, #ARGV, 4 do
    local cmd, key, field = ARGV[i], KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2]
    if cmd == 'set' then
      redis.call('HSET', key, field, ARGV[i + 3])
    elseif cmd == 'hdel' then
      redis.call('HDEL', key, field)
    elseif cmd == 'srem' then
      redis.call('SREM', key, field)
    elseif cmd == 'mark' then
      if redis.call('HEXISTS', KEYS[6], field) == 1 then
        redis.call('SADD', key, field)
      end
    end
  end
  return 1
elseif op == 'calls' then
  return {redis.call('ZRANGE', KEYS[3], 0, -1), redis.call('HGETALL', KEYS[2])}
elseif op == 'rejoin' then
  return {redis.call('HGET', KEYS[3], 'rejoin')}
elseif op == 'one call' then
  return {redis.call('HGET', KEYS[2], ARGV[4])}
elseif op == 'call' then
  local call = ARGV[4]
  local seq = redis.call('INCR', KEYS[5])
  redis.call('HSET', KEYS[2], call, ARGV[5])
  redis.call('ZADD', KEYS[3], seq, call)
  if ARGV[6] == '1' then
    redis.call('ZADD', KEYS[4], seq, call)
    for _, old in ipairs(redis.call('ZRANGE', KEYS[4], 0, -tonumber(ARGV[7]) - 1)) do
      redis.call('HDEL', KEYS[2], old)
      redis.call('ZREM', KEYS[3], old)
      redis.call('ZREM', KEYS[4], old)
    end
  else
    redis.call('ZREM', KEYS[4], call)
  end
  return 1
end
return redis.error_reply('fsm durable script: unknown operation')
"""
)
"""Every operation of the store, chosen by ARGV[1], under the owner lease KEYS[1] (ARGV[2]
the token, ARGV[3] the lease in milliseconds).

* ``open``: refuse (``locked`` and the holder) while anyone holds the lease; refuse
  (``schema`` and the stored version, empty for data without one) a schema other than
  ARGV[4]; else take the lease and set the schema: ``ok``. Keys: :data:`_KEYS`.
* every other operation runs only while KEYS[1] still holds the token (else 0, nothing
  read or written) and renews the lease: ``release`` deletes it instead; ``renew`` does
  nothing more; ``load`` returns the hashes meta, streams, requests, questions and the
  reshown set; ``sse`` applies ARGV[4..] as steps of four (command, key index, field,
  value): ``set`` (HSET), ``hdel``, ``srem``, ``mark`` (SADD the field only when a question
  is stored under it); ``calls`` returns the call ids oldest write first and the calls
  hash; ``one call`` returns (in a list) the record of call ARGV[4], or nil; ``rejoin``
  the SSE adapter's session record (meta's field ``rejoin``), or nil; ``call``
  writes record ARGV[5] of call ARGV[4] with the next sequence number and, when it ended
  (ARGV[6] ``1``), keeps the newest ARGV[7] ended ones. Keys of ``calls``, ``one call``
  and ``call``: :data:`_CALL_KEYS`."""


def _field(session: str, rid: Any) -> str:
    """A request's or question's hash field: ``[session, dump_id(rid)]`` as JSON."""
    return json.dumps([session, codec.dump_id(rid)])


class RedisStore:
    """A :class:`~fsm.durable.store.Store` for one client profile in Redis (see the module
    docstring).

    Build it with :meth:`from_url`, or around a blocking ``redis.Redis`` (or
    ``redis.RedisCluster``) client given no retries, as :func:`~fsm.durable.redis_link.open_client`
    makes one (``owns_client``: whether :meth:`close` closes it). Opening takes the
    profile's owner lease (:class:`~fsm.errors.StoreLockedError` while another holds it)
    and checks the schema. ``before_write(delta)``, if given, is called before each write
    (crash tests stop the process there). ``renew_every_s``: how often the lease is renewed
    (default a third of ``lease_s``; ``0``: never, by no thread: a test of a lapsed lease).
    Methods may be called from any thread, one at a time (a lock serialises them). The
    ``repr`` shows the server, the prefix and the profile, never a password."""

    def __init__(
        self,
        client: Any,
        profile: str,
        *,
        prefix: str | None = None,
        namespace: str | None = None,
        lease_s: float = DEFAULT_OWNER_LEASE_S,
        renew_every_s: float | None = None,
        wait_replicas: int = 0,
        wait_timeout_s: float = 1.0,
        owns_client: bool = False,
        before_write: Callable[[store.Written], None] | None = None,
    ) -> None:
        if not profile or len(profile) > MAX_PROFILE:
            raise ValueError(f"a profile name has 1 to {MAX_PROFILE} characters")
        link.check_lease("profile owner", lease_s)
        if wait_replicas < 0 or wait_timeout_s <= 0:
            raise ValueError("wait_replicas must be >= 0 and wait_timeout_s > 0")
        self.client = client
        self.profile = profile
        self.prefix = link.namespaced(prefix, namespace) + "durable:" + link.hash_tag(profile)
        self.lease_s = lease_s
        self.wait_replicas = wait_replicas
        self.owns_client = owns_client
        self.path = f"redis {link.where(client)} {self.prefix}"
        """The server and the profile's prefix: what the typed errors' ``path`` names."""
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        """This store's owner token (the lease key holds it while the store owns the
        profile)."""
        self._before_write = before_write
        self._lease_ms = link.millis(lease_s)
        self._wait_ms = link.millis(wait_timeout_s)
        self._writes = 0
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._keys = [self.key(k) for k in _KEYS]
        self._call_keys = [self.key(k) for k in _CALL_KEYS]
        try:
            self._open()
        except BaseException:
            if owns_client:
                client.close()
            raise
        every = lease_s / 3 if renew_every_s is None else renew_every_s
        self._renewer: threading.Thread | None = None
        if every > 0:
            self._renewer = threading.Thread(
                target=self._renew_loop, args=(every,), name="fsm-durable-lease", daemon=True
            )
            self._renewer.start()

    @classmethod
    def from_url(
        cls,
        url: str,
        profile: str,
        *,
        timeout_s: float = link.DEFAULT_TIMEOUT_S,
        ssl_ca_certs: str | None = None,
        prefix: str | None = None,
        namespace: str | None = None,
        lease_s: float = DEFAULT_OWNER_LEASE_S,
        wait_replicas: int = 0,
        wait_timeout_s: float = 1.0,
        before_write: Callable[[store.Written], None] | None = None,
    ) -> RedisStore:
        """A store of ``profile`` on a new client for ``url`` (the URLs, timeouts and TLS
        of :func:`~fsm.durable.redis_link.open_client`: ``redis://``, ``rediss://``,
        ``redis+cluster://``), opened now (one round trip); :meth:`close` closes the
        client. A server or cluster that cannot be used is :class:`StoreError` (never
        naming a password); a URL or an argument that cannot be is :class:`ValueError`;
        ``ModuleNotFoundError`` naming the ``gateway`` extra without redis-py."""
        link.namespaced(prefix, namespace)  # refused before a client is made
        try:
            client = link.open_client(
                url,
                asynchronous=False,
                timeout_s=timeout_s,
                max_connections=4,  # the caller's thread and the renewing thread
                ssl_ca_certs=ssl_ca_certs,
                feature="fsm.durable.RedisStore",
            )
        except link.failures() as exc:  # a cluster client connects as it is made
            where = f"redis {link.where_url(url)}"
            raise StoreError(f"{where}: connect failed: {link.cause(exc)}", path=where) from exc
        return cls(
            client,
            profile,
            prefix=prefix,
            namespace=namespace,
            lease_s=lease_s,
            wait_replicas=wait_replicas,
            wait_timeout_s=wait_timeout_s,
            owns_client=True,
            before_write=before_write,
        )

    def __repr__(self) -> str:
        return f"<RedisStore {self.path} lease_s={self.lease_s:g}>"

    def key(self, kind: str) -> str:
        """The Redis key of one part of the profile (see the module docstring)."""
        return f"{self.prefix}:{kind}"

    @property
    def writes(self) -> int:
        """The deltas written through this store."""
        return self._writes

    # ------------------------------------------------------------------ IO

    def _send(self, op: str, *command: Any) -> Any:
        """One command; every Redis or socket failure is :class:`StoreError` (a key of
        the wrong type: :class:`StoreCorruptError`) naming ``op`` and the cause."""
        try:
            return self.client.execute_command(command[0], *map(link.wire, command[1:]))
        except link.failures() as exc:
            if "WRONGTYPE" in str(exc):
                raise StoreCorruptError(
                    f"{self.path}: {op}: a key holds another kind of value", path=self.path
                ) from exc
            if link.is_no_script(exc):
                raise
            raise StoreError(
                f"{self.path}: {op} failed: {link.cause(exc)}", path=self.path
            ) from exc

    def _script(self, op: str, keys: list[str], *argv: Any, label: str = "") -> Any:
        """The store's script for ``op`` under this store's token and lease (``label``:
        the operation the errors name, ``op`` by default)."""
        label = label or op
        args = (op, self.token, self._lease_ms, *argv)
        try:
            return self._send(label, *_SCRIPT.evalsha(keys, *args))
        except link.failures() as exc:  # only NoScriptError gets here: send the script
            if not link.is_no_script(exc):
                raise
            return self._send(label, *_SCRIPT.eval(keys, *args))

    def _fenced(self, op: str, keys: list[str], *argv: Any, label: str = "") -> Any:
        """:meth:`_script`, :class:`StoreLockedError` when this store no longer holds the
        lease (nothing was read or written)."""
        label = label or op
        if self._closed:
            raise StoreError(f"{self.path} is closed", path=self.path)
        got = self._script(op, keys, *argv, label=label)
        if got == 0:
            raise StoreLockedError(
                f"{self.path}: {label}: this store's owner lease lapsed (another process may"
                " own the profile now): nothing written; open the store again",
                path=self.path,
            )
        return got

    def _open(self) -> None:
        got = self._script("open", self._keys, SCHEMA_VERSION)
        state, detail = link.text(got[0]), link.text(got[1])
        if state == "locked":
            holder = detail.rpartition(":")[0]  # host:pid, not the random part
            raise StoreLockedError(f"{self.path} is in use by {holder}", path=self.path)
        if state == "schema":
            if not detail.isdigit():
                raise StoreCorruptError(
                    f"{self.path}: the schema version {detail[:20]!r} does not read back",
                    path=self.path,
                )
            raise StoreVersionError(
                f"{self.path} has schema {detail}; this library reads {SCHEMA_VERSION}",
                path=self.path,
            )

    def _renew_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self._script("renew", self._keys[:1])
            except StoreError:  # unreachable now: the fence refuses writes once it lapses
                continue

    def renew(self) -> None:
        """Renew the owner lease now (the thread does it every third of ``lease_s``);
        :class:`StoreLockedError` when it lapsed."""
        self._fenced("renew", self._keys[:1])

    # ------------------------------------------------------------------ Store

    def write(self, delta: store.Delta) -> None:
        """Write ``delta`` in one script call; returns once Redis acknowledged it (and
        ``wait_replicas`` replicas did, when asked)."""
        with codec.naming_store(self.path):
            if isinstance(delta, CallRecord):
                ended = "1" if delta.ended else "0"
                argv = (delta.call, codec.dump_call(delta), ended, store.MAX_ENDED_CALLS)
                self._write(delta, "call", self._call_keys, *argv)
            else:
                self._write(delta, "sse", self._keys, *_steps(delta))

    def write_session(self, record: store.SessionRecord) -> None:
        """Replace the SSE adapter's session record (in ``P:meta``, field ``rejoin``) in
        one script call, acknowledged as :meth:`write` is; counted in ``writes``."""
        with codec.naming_store(self.path):
            rejoin = codec.dump_session(record)
            self._write(record, "sse", self._keys, "set", _META, "rejoin", rejoin)

    def _write(self, written: store.Written, op: str, keys: list[str], *argv: Any) -> None:
        with self._lock:
            if self._before_write is not None:
                self._before_write(written)
            self._fenced(op, keys, *argv, label="write")
            self._writes += 1
            if self.wait_replicas:
                acked = int(self._send("write", "WAIT", self.wait_replicas, self._wait_ms))
                if acked < self.wait_replicas:
                    raise StoreError(
                        f"{self.path}: write reached {acked} of {self.wait_replicas}"
                        " replicas in time",
                        path=self.path,
                    )

    def session(self) -> store.SessionRecord | None:
        """The SSE adapter's session record last written, or ``None``
        (:class:`StoreCorruptError` if it does not read back)."""
        with self._lock:
            got = self._fenced("rejoin", self._keys, label="session")
        if got[0] is None:
            return None
        with codec.naming_store(self.path):
            return codec.load_session(link.text(got[0]))

    def load(self, limits: store.LoadLimits | None = None) -> SseStored:
        """Everything stored (:class:`StoreCorruptError` for a value that does not read
        back, or, with ``limits``, for more records of a kind than they allow, counted in
        the same script before any record is read)."""
        argv = limits if limits is not None else (-1, -1, -1)
        with self._lock:
            got = self._fenced("load", self._keys, *argv)
        if limits is not None and not isinstance(got[0], list):  # "over", and the counts
            limits.check(self.path, store.LoadLimits(*(int(n) for n in got[1:])))
        try:
            with codec.naming_store(self.path):
                meta, streams, requests, questions = (_pairs(part) for part in got[:4])
                reshown_fields = {link.text(f) for f in got[4]}
                session, expired = codec.load_meta(meta)
                asked = []
                for field, value in questions.items():
                    sess, rid = _key_field(field)
                    method, params = codec.fields(value, 2)
                    asked.append((codec.load_question(sess, rid, method, params), field))
                everything = SseDelta(
                    session,
                    expired,
                    tuple(codec.load_stream(r) for r in streams.values()),
                    tuple(codec.load_request(r) for r in requests.values()),
                    tuple(q for q, _ in asked),
                    tuple(q.key for q, field in asked if field in reshown_fields),
                )
        except codec.DECODE_ERRORS as exc:
            raise StoreCorruptError(
                f"{self.path}: a value does not read back", path=self.path
            ) from exc
        return store.EMPTY.apply(everything)

    def calls(self) -> dict[str, CallRecord]:
        """The MRTR calls' and tasks' records by call id, oldest write first
        (:class:`StoreCorruptError` for a record that does not read back)."""
        with self._lock:
            got = self._fenced("calls", self._call_keys)
        try:
            order = [link.text(c) for c in got[0]]
            rows = _pairs(got[1])
        except codec.DECODE_ERRORS as exc:
            raise StoreCorruptError(
                f"{self.path}: the calls do not read back", path=self.path
            ) from exc
        if set(order) != set(rows):
            raise StoreCorruptError(
                f"{self.path}: the calls and their order disagree", path=self.path
            )
        return {call: self._load_call(call, rows[call]) for call in order}

    def call(self, call_id: str) -> CallRecord | None:
        """The record of ``call_id`` alone (one record decoded), or ``None``
        (:class:`StoreCorruptError` if that record does not read back)."""
        with self._lock:
            got = self._fenced("one call", self._call_keys, call_id, label="call")
        return None if got[0] is None else self._load_call(call_id, link.text(got[0]))

    def _load_call(self, call: str, text: str) -> CallRecord:
        with codec.naming_store(self.path):
            return codec.load_call_of(call, text)

    def close(self) -> None:
        """Stop renewing, release the owner lease (a restart opens the profile at once)
        and close the client if this store made it (idempotent; a Redis that is gone is
        not an error here: the lease then lapses on its own)."""
        if self._closed:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            self._closed = True
            with suppress(StoreError):
                self._script("release", self._keys[:1])
            if self.owns_client:
                self.client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _steps(d: SseDelta) -> list[Any]:
    """The ``sse`` script's steps for ``d``: what ``SqliteStore`` writes, in its order."""
    out: list[Any] = []

    def step(cmd: str, key: int, field: str, value: str = "") -> None:
        out.extend((cmd, key, field, value))

    for name, value in codec.dump_meta(d):
        step("set", _META, name, value)
    for name in d.dropped:
        step("hdel", _STREAMS, name)
    for key in d.forgotten:
        field = _field(*key)
        step("hdel", _REQUESTS, field)
        step("hdel", _QUESTIONS, field)
        step("srem", _RESHOWN, field)
    for s in d.streams:
        step("set", _STREAMS, s.id, codec.dump_stream(s))
    for r in d.requests:
        step("set", _REQUESTS, _field(*r.key), codec.dump_request(r))
    for q in d.questions:  # shown anew: not re-shown yet
        field = _field(*q.key)
        step("set", _QUESTIONS, field, codec.storable(json.dumps([q.method, q.params])))
        step("srem", _RESHOWN, field)
    for key in d.reshown:
        step("mark", _RESHOWN, _field(*key))
    for r in d.requests:
        if r.state in LIVENESS.terminal:  # ended: never asked again
            field = _field(*r.key)
            step("hdel", _QUESTIONS, field)
            step("srem", _RESHOWN, field)
    return out


def _pairs(flat: Any) -> dict[str, str]:
    """An ``HGETALL`` reply (a flat list from a script) as a dict of text."""
    items = [link.text(v) for v in flat]
    return dict(zip(items[::2], items[1::2], strict=True))


def _key_field(field: str) -> tuple[str, str]:
    """A hash field back as ``(session, request id as dump_id wrote it)``."""
    session, rid = codec.fields(field, 2)
    if not isinstance(session, str) or not isinstance(rid, str):
        raise StoreCorruptError("a request's field does not read back")
    return session, rid
