"""A guarding gateway: the guard's guarantees for MCP clients in any language.

A reverse proxy between any streamable-HTTP client and server (``python -m fsm gateway``)
that enforces on the wire what :mod:`fsm.adapters` enforces inside a Python client. Its
replicas share what they must agree on through a :class:`~fsm.gateway.store.StateStore`
(:class:`~fsm.gateway.store.MemoryStore` for one replica,
:class:`~fsm.gateway.redis_store.RedisStore` across replicas). Needs the ``gateway`` extra.
"""

from fsm.gateway.store import Cursor, MemoryStore, StateStore, StoreUnavailableError

__all__ = ["Cursor", "MemoryStore", "StateStore", "StoreUnavailableError"]
