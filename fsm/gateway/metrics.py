"""What a gateway replica counts, in Prometheus terms (``prometheus-client``, the
``gateway`` extra).

Contract
--------
:class:`GatewayMetrics` holds one replica's metrics in a registry of its own
(:attr:`GatewayMetrics.registry`; two gateways in one process never share a series).
``python -m fsm gateway --metrics HOST:PORT`` serves it; an embedding application serves
it with ``prometheus_client``'s exposition functions (``generate_latest(registry)``).
Every name starts with ``fsm_gateway_``; docs/gateway.md lists them:

* gauges read when scraped: ``sessions`` (held), ``streams`` (event streams being
  relayed to clients), ``requests_in_flight``, ``draining`` (1 once a drain began);
* counters: ``presentations_total`` (server requests passed on to a client),
  ``blanked_total{reason}`` (server requests passed on as an empty event that keeps its
  id: the guard's reason, ``refused``, ``claimed-elsewhere`` or ``claim-failed``),
  ``cursor_rewrites_total`` (client resumes sent upstream from a newer event than the
  client's ``Last-Event-ID``), ``failures_total{reason}`` (interactions the gateway
  ended with an error, by the error's ``data.reason``), ``upstream_errors_total{kind}``
  (upstream requests that failed without a response: ``connect``, ``timeout``,
  ``protocol``, ``network``, ``other``), ``store_errors_total{op}``;
* a histogram: ``store_round_trip_seconds{op}``, one observation per store operation
  (its ``_count`` is the operations, each one round trip to a remote store but the first
  script call on a new or restarted Redis, which costs two).

Cost: every count is made where the gateway already handles the event (a claim, a
resume, a guard decision that has actions, a store call, an upstream failure), never per
relayed SSE event; label values come from fixed sets (operation names, the guard's and
the errors' reason identifiers), so the series are bounded. Counters are kept under
``prometheus_client``'s lock (a scrape runs in another thread); the gauges are read by
functions that only take lengths (safe to call from the scraping thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Unpack

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fsm.gateway.store import (
    Answer,
    ClaimStatus,
    ClaimTerms,
    Cursor,
    RequestId,
    StateStore,
    StoreUnavailableError,
)

__all__ = ["STORE_OPS", "UPSTREAM_ERROR_KINDS", "GatewayMetrics", "TimedStore"]

STORE_OPS = (
    "begin_session",
    "keep_session",
    "claim",
    "renew",
    "claim_status",
    "mark_submitted",
    "take_over",
    "open_claims",
    "save_answer",
    "hold_answer",
    "answer_of",
    "save_cursor",
    "cursor_of",
    "end_session",
    "session_ended",
    "ping",
)
"""The store operations timed (the ``op`` label)."""

UPSTREAM_ERROR_KINDS = ("connect", "timeout", "protocol", "network", "other")
"""The ``kind`` label of ``fsm_gateway_upstream_errors_total``."""

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Store latency buckets, seconds: a loopback Redis answers in well under a millisecond,
a store that times out after its 1 s default lands past the last finite bucket."""


class GatewayMetrics:
    """One replica's metrics (see the module docstring). ``sessions``, ``streams`` and
    ``in_flight`` are read when scraped; ``registry`` defaults to a new one."""

    def __init__(
        self,
        *,
        sessions: Callable[[], float] = lambda: 0,
        streams: Callable[[], float] = lambda: 0,
        in_flight: Callable[[], float] = lambda: 0,
        draining: Callable[[], float] = lambda: 0,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        for name, doc, read in (
            ("fsm_gateway_sessions", "Sessions held (accepted by the upstream)", sessions),
            ("fsm_gateway_streams", "Event streams being relayed to clients", streams),
            ("fsm_gateway_requests_in_flight", "Client requests being served", in_flight),
            ("fsm_gateway_draining", "1 once the replica began draining", draining),
        ):
            Gauge(name, doc, registry=r).set_function(read)
        self.presentations = Counter(
            "fsm_gateway_presentations",
            "Server requests passed on to a client (claimed by this replica)",
            registry=r,
        )
        self._blanked = Counter(
            "fsm_gateway_blanked",
            "Server requests passed on as an empty event that keeps its id",
            ["reason"],
            registry=r,
        )
        self.cursor_rewrites = Counter(
            "fsm_gateway_cursor_rewrites",
            "Client resumes sent upstream from a newer event than the client's Last-Event-ID",
            registry=r,
        )
        self._failures = Counter(
            "fsm_gateway_failures",
            "Interactions the gateway ended with an error, by the error's reason",
            ["reason"],
            registry=r,
        )
        upstream = Counter(
            "fsm_gateway_upstream_errors",
            "Upstream requests that failed without a response",
            ["kind"],
            registry=r,
        )
        self._upstream = {kind: upstream.labels(kind) for kind in UPSTREAM_ERROR_KINDS}
        store_errors = Counter(
            "fsm_gateway_store_errors",
            "Store operations that raised StoreUnavailableError",
            ["op"],
            registry=r,
        )
        latency = Histogram(
            "fsm_gateway_store_round_trip_seconds",
            "Store operations and their latency",
            ["op"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.store_errors = {op: store_errors.labels(op) for op in STORE_OPS}
        self.store_latency = {op: latency.labels(op) for op in STORE_OPS}
        self._by_reason: dict[tuple[int, str], Any] = {}

    def blanked(self, reason: str) -> None:
        """A server request was passed on blank, for ``reason``."""
        self._child(0, self._blanked, reason).inc()

    def failed(self, reason: str) -> None:
        """An interaction ended with an error whose reason is ``reason``."""
        self._child(1, self._failures, reason).inc()

    def upstream_error(self, kind: str) -> None:
        """An upstream request failed without a response (``kind``: one of
        :data:`UPSTREAM_ERROR_KINDS`; another counts as ``other``)."""
        self._upstream.get(kind, self._upstream["other"]).inc()

    def _child(self, family: int, counter: Counter, reason: str) -> Any:
        child = self._by_reason.get((family, reason))
        if child is None:
            child = self._by_reason[(family, reason)] = counter.labels(reason)
        return child


class TimedStore:
    """``store`` with each operation timed into ``metrics`` (and each
    :class:`~fsm.gateway.store.StoreUnavailableError` counted); otherwise the same
    :class:`~fsm.gateway.store.StateStore`. ``ping`` is ``store.ping()`` when the store
    has one, else nothing (a store in this process is always reachable)."""

    def __init__(self, store: StateStore, metrics: GatewayMetrics) -> None:
        self.store = store
        self._latency = metrics.store_latency
        self._errors = metrics.store_errors

    async def _timed(self, op: str, call: Any) -> Any:
        start = time.perf_counter()
        try:
            return await call
        except StoreUnavailableError:
            self._errors[op].inc()
            raise
        finally:
            self._latency[op].observe(time.perf_counter() - start)

    async def begin_session(self, session: str) -> None:
        await self._timed("begin_session", self.store.begin_session(session))

    async def keep_session(self, session: str) -> None:
        await self._timed("keep_session", self.store.keep_session(session))

    async def claim(self, session: str, request_id: RequestId, **terms: Unpack[ClaimTerms]) -> bool:
        return bool(await self._timed("claim", self.store.claim(session, request_id, **terms)))

    async def renew(self, session: str, request_id: RequestId, owner: str, lease_s: float) -> bool:
        return bool(
            await self._timed("renew", self.store.renew(session, request_id, owner, lease_s))
        )

    async def claim_status(self, session: str, request_id: RequestId) -> ClaimStatus:
        status: ClaimStatus = await self._timed(
            "claim_status", self.store.claim_status(session, request_id)
        )
        return status

    async def mark_submitted(self, session: str, request_id: RequestId) -> bool:
        return bool(
            await self._timed("mark_submitted", self.store.mark_submitted(session, request_id))
        )

    async def take_over(
        self, session: str, request_id: RequestId, owner: str, lease_s: float
    ) -> bool:
        return bool(
            await self._timed(
                "take_over", self.store.take_over(session, request_id, owner, lease_s)
            )
        )

    async def open_claims(self, session: str, stream: str) -> list[RequestId]:
        claims: list[RequestId] = await self._timed(
            "open_claims", self.store.open_claims(session, stream)
        )
        return claims

    async def save_answer(
        self, session: str, request_id: RequestId, answer: Mapping[str, Any]
    ) -> None:
        await self._timed("save_answer", self.store.save_answer(session, request_id, answer))

    async def hold_answer(
        self, session: str, request_id: RequestId, answer: Answer, owner: str, lease_s: float
    ) -> bool:
        return bool(
            await self._timed(
                "hold_answer",
                self.store.hold_answer(session, request_id, answer, owner, lease_s),
            )
        )

    async def answer_of(self, session: str, request_id: RequestId) -> Mapping[str, Any] | None:
        answer: Mapping[str, Any] | None = await self._timed(
            "answer_of", self.store.answer_of(session, request_id)
        )
        return answer

    async def save_cursor(self, session: str, stream: str, cursor: Cursor) -> None:
        await self._timed("save_cursor", self.store.save_cursor(session, stream, cursor))

    async def cursor_of(self, session: str, stream: str) -> Cursor | None:
        cursor: Cursor | None = await self._timed(
            "cursor_of", self.store.cursor_of(session, stream)
        )
        return cursor

    async def end_session(self, session: str, reason: str) -> None:
        await self._timed("end_session", self.store.end_session(session, reason))

    async def session_ended(self, session: str) -> str | None:
        why: str | None = await self._timed("session_ended", self.store.session_ended(session))
        return why

    async def ping(self) -> None:
        ping = getattr(self.store, "ping", None)
        if ping is not None:
            await self._timed("ping", ping())

    async def aclose(self) -> None:
        await self.store.aclose()
