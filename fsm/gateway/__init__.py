"""A guarding gateway: the guard's guarantees for MCP clients in any language.

A reverse proxy between any streamable-HTTP client and server (``python -m fsm gateway``)
that enforces on the wire what :mod:`fsm.adapters` enforces inside a Python client. Its
replicas share what they must agree on through a :class:`~fsm.gateway.store.StateStore`
(:class:`~fsm.gateway.store.MemoryStore` for one replica,
:class:`~fsm.gateway.redis_store.RedisStore` across replicas). The app is
:class:`fsm.gateway.app.Gateway`; ``python -m fsm gateway`` serves it
(:mod:`fsm.gateway.cli`); its event ids are :mod:`fsm.gateway.ids`; its upstream
connections :mod:`fsm.gateway.upstream`; its metrics :mod:`fsm.gateway.metrics`. This
package's ``__init__`` imports only the store interface (no HTTP library); the app needs
the ``gateway`` extra. See docs/gateway.md.
"""

from fsm.gateway.store import (
    Cursor,
    MemoryStore,
    StateStore,
    StoreStateLostError,
    StoreUnavailableError,
)

__all__ = ["Cursor", "MemoryStore", "StateStore", "StoreStateLostError", "StoreUnavailableError"]
