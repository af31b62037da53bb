"""Durable stores for the guard's decisions: what a client must remember across a crash.

The guard stays sans-IO: configured ``durable``, it returns a
:class:`~fsm.actions.Persist` first among its actions whenever something that must
survive a crash changed; the embedder writes that delta to a :class:`Store` and waits
for it before taking the next action (write-ahead). After a restart,
:meth:`fsm.sse.guard.Guard.restart` takes what :meth:`Store.load` returns. An MRTR call
or a task is made durable by :class:`DurableCall`, restarted from :meth:`Store.calls`.
Stores: :class:`SqliteStore` (the embedded default, one file per client profile),
:class:`RedisStore` (one profile per key prefix in Redis; the ``gateway`` extra),
:class:`MemoryStore` (no durability). See docs/durability.md.
"""

from fsm.durable.calls import CallRecord, DurableCall
from fsm.durable.codec import SCHEMA_VERSION
from fsm.durable.redis_store import RedisStore
from fsm.durable.sqlite import SqliteStore, profile_path
from fsm.durable.store import LoadLimits, MemoryStore, Store

__all__ = [
    "SCHEMA_VERSION",
    "CallRecord",
    "DurableCall",
    "LoadLimits",
    "MemoryStore",
    "RedisStore",
    "SqliteStore",
    "Store",
    "profile_path",
]
