"""The guarding gateway: an ASGI reverse proxy in front of one MCP streamable-HTTP endpoint.

Every request of a client goes through the guarded-transport core the SDK adapters use
(:class:`fsm.adapters.core.GuardedTransport`), with one guard per MCP session, so the
gateway enforces on the wire what the adapters enforce in-process:

* **Replays are blanked.** A server request the guard does not present (a replayed
  duplicate, a stale replay, one cancelled later in the replay) reaches the client as an
  empty event that keeps its id; the client never sees it twice.
* **Presentation is claimed.** Before a request is passed on, the gateway claims it in its
  :class:`~fsm.gateway.store.StateStore` (atomic: two replicas never both present a key),
  under a lease this replica renews while the request awaits its answer and while its
  submission of the answer is under way. A lost claim blanks the request; the replica
  that lost it submits a stored answer only if the holder died before marking its
  submission ended (the answer reaches the server once while the holder lives); if the
  holder's lease lapses with no answer stored, the call ends
  with :class:`~fsm.gateway.store.ClaimLapsedError`. A store that cannot answer blanks it
  and ends the interaction with :class:`~fsm.gateway.store.StoreUnavailableError` (fail
  closed).
* **Answers are the gateway's.** A client's answer POST is written to the store, answered
  ``202`` and submitted by the guard: classified, retryable failures resubmitted with the
  same answer, answers to withdrawn or dead requests dropped.
* **Resumes are the gateway's.** When the upstream connection breaks under a client, the
  gateway resumes it itself (the guard's cursor, backoff and budgets) and the client sees
  one unbroken stream. When the client's own connection breaks, its resume ``GET`` carries a
  gateway-issued, signed ``Last-Event-ID`` (:mod:`fsm.gateway.ids`): the stream is taken
  over (the old upstream response closed first) and resumed upstream from the newest
  event the gateway passed on (a stale client cursor is rewritten), or, on a replica that
  never saw the stream or saw less of it than the client's id proves, from the newer of
  the client's id and the store's cursor (a cursor never moves back).
* **One outcome.** An interaction the guard ends (dead request, budget spent, session
  gone, store unavailable, an event over the size bound) gets exactly one JSON-RPC error
  response for its origin request on the client's stream: code
  :data:`~fsm.adapters._transport.http.ENDED_CODE` (-32000), ``message`` ``"<reason>: ..."``,
  ``data`` with ``reason``, ``key``, ``stream`` and ``evidence``.
* **Sessions end once.** After the server said the session is gone (404), every request
  of it is answered ``404`` by the gateway (every replica, through the store).

**No authority of its own.** What a client holding another client's session id can do
through the gateway, it could do to the upstream directly. A request's credentials (its
:data:`CREDENTIAL_HEADERS` and its URL's query string) are *proven* for a session once
the upstream accepted a request carrying them in it: the ``initialize`` that began it,
or the JSON-RPC result of a ``ping`` carrying them, asked before a request of a session
held here is sent, or once the upstream opened an event stream for one of a session not
held here (no status proves them: a 2xx may carry a JSON-RPC error, or come before the
upstream's check; a method the transport does not define, a CORS preflight say, changes
nothing). Only a request with proven credentials changes
shared state: its answer is taken by the guard, its resume takes over the stream
(credentials not yet proven here are asked with a ``ping`` first), its 404 ends the
session. Any other request is relayed:
sent as it came, the upstream's answer returned to that client alone. The gateway's own
requests carry the credentials of the client request they act for, and go to its URL
(an answer's submissions those of its POST, a resume those of the stream's request),
never another client's. A guard exists only for a session the upstream accepted. A
``Connection`` naming a header the gateway reads or a credential header, and header
values that could not be forwarded as they came are refused (``400``) before anything
is stored, and a ``Host`` or ``Origin`` outside :class:`~fsm.gateway.edge.HostPolicy`
gets ``421`` or ``403``.

**Bounds** (:class:`GatewayLimits`, defaults in docs/gateway.md): request bodies
(``413``), the time to send one (``408``), SSE event size (the stream ends with
``event-too-large``), the gateway's own upstream requests per session and its queued
refusals, live streams per session (a stream no client reads is abandoned for a new
one; with every one read, the new stream gets ``503``), sessions held (every session the
upstream accepts is held, the least recently used with nothing under way dropped for it;
with none, a new session gets ``503``, and one accepted meanwhile is held over the bound
until sessions can be dropped), sessions not yet accepted. Each session's work runs
contained: its faults end its own interactions, never another's; if the gateway's own
background work fails, it stops (``on_fatal``) instead of serving errors.

Limits (see docs/gateway.md): the gateway cannot know which events a client received
before its connection broke; an event written to a connection that then broke counts as
passed on (a request in it is not presented again, its interaction ends by the server's
deadline), and a stream's final response is kept (up to 1 MiB) to answer a resume that
lost it. An answer POST that lands on a replica that never saw its request is forwarded
unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import formatdate
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import httpx2
from anyio.abc import TaskGroup

from fsm import actions as act
from fsm import events
from fsm.adapters._transport.body import YIELD_EVERY, GuardedBody
from fsm.adapters._transport.http import (
    ENDED_CODE,
    LOCAL_HEADER,
    SESSION_GONE_BODY,
    Passthrough,
    decodable_accept,
    ending_error,
    holds_result,
    json_body,
    opens_stream,
    origin_of,
)
from fsm.adapters._transport.session import SdkBinding, sdk_streams
from fsm.adapters._transport.session_io import SUBMITTING, Claim, SessionIO
from fsm.adapters._transport.sse import BOM, LARGE_EVENT, SseParser, encode_event
from fsm.adapters._transport.transport import GuardedTransport, asks, bind
from fsm.adapters.sdkversion import MCP2
from fsm.errors import InteractionFailed, RequestKey
from fsm.fields import seconds_problem
from fsm.gateway.edge import BodiesFull, BodyBudget, HostPolicy
from fsm.gateway.ids import (
    EventIdKeys,
    GatewayEventId,
    IdRewriter,
    parse_event_id,
    store_name,
)
from fsm.gateway.kept import KeptResults
from fsm.gateway.metrics import GatewayMetrics, TimedStore
from fsm.gateway.standalone import (
    StandaloneAhead,
    ahead_headers,
    claimant,
    is_initialized,
)
from fsm.gateway.store import (
    DEFAULT_LEASE_S,
    ClaimLapsedError,
    ClaimStatus,
    Cursor,
    MemoryStore,
    RequestId,
    StateStore,
    StoreStateLostError,
    StoreUnavailableError,
)
from fsm.gateway.upstream import AiohttpTransport
from fsm.messages import valid_id
from fsm.outcomes import OutcomeClass, SubmissionResult
from fsm.sse.guard import Guard, GuardConfig
from fsm.sse.observe import ObservedGuard

__all__ = [
    "CREDENTIAL_HEADERS",
    "DRAIN_GRACE_S",
    "GATEWAY_GUARD",
    "HEALTH_PATH",
    "OWN_PATHS",
    "READY_PATH",
    "STANDALONE_HOLD_S",
    "Credentials",
    "Gateway",
    "GatewayLimits",
    "credentials_of",
]

logger = logging.getLogger(__name__)

Scope = Mapping[str, Any]
Message = dict[str, Any]

_HOP_BY_HOP = frozenset(
    {
        # RFC 9110 section 7.6.1
        "connection",
        "proxy-connection",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        # for the proxy itself, which authenticates nobody
        "proxy-authenticate",
        "proxy-authorization",
        # no trailer is forwarded, so none is announced
        "trailer",
    }
)
"""Fields never forwarded, either way, besides those a message's ``Connection`` names."""
_REFRAMED = frozenset({"host", "content-length", "expect"})
"""Request fields the upstream connection writes itself (the upstream's ``Host``, the
length of the body as sent)."""

OWN_PATHS = "/-/"
"""The prefix of the gateway's own endpoints: an upstream path under it is refused, so
they never shadow the MCP endpoint."""
HEALTH_PATH = "/-/healthz"
"""``200`` while the process serves and its background work runs, else ``503``."""
READY_PATH = "/-/readyz"
"""``200`` while the store answers and the gateway is not draining, else ``503``."""
STANDALONE_HOLD_S = 10.0
"""``GatewayLimits.standalone_hold_s`` of a gateway on a memory store, unless given."""
DRAIN_GRACE_S = 1.0
"""Seconds :meth:`Gateway.drain` gives, after its bound, each of three steps: a stream
caught in the middle of an event to reach the event's end, cancelled requests to finish
their cleanup, the store writes they left (cursors) to land."""
CREDENTIAL_HEADERS = ("authorization", "cookie", "x-api-key")
"""A request's credential headers unless ``Gateway(credential_headers=...)`` names
others: the headers the upstream may bind a session to. With the query string of the
request's URL (where an upstream may take a key, ``?key=...``) they are its credentials.
The gateway's own requests (answer submissions, resumes, refusals) carry those of the
client request they act for, and go to that request's URL; a request whose credentials
the upstream has not accepted for its session changes nothing shared (see
:class:`Gateway`)."""


GATEWAY_GUARD = GuardConfig(max_tombstones=16, max_ended_streams=4)
"""Each session's guard policy unless ``Gateway(config=...)`` says otherwise: the
library's, but 16 finished requests kept for de-duplication (the library keeps 4,096)
and 4 ended streams (the library: as many as ``max_streams`` leaves room for). A gateway
holds up to ``max_sessions`` guards, so a guard remembers little: a replay of a request
it forgot still loses its claim in the store (kept ``ttl_s``), so it is never presented
twice, and a resume of a stream it forgot is answered from the session's kept results
(``GatewayLimits.max_finals``) and failures (``GatewayLimits.remembered``)."""

_DEFAULT_HOSTS = HostPolicy()
"""Loopback ``Host`` and ``Origin`` only (see :class:`~fsm.gateway.edge.HostPolicy`)."""


def _unused(*_: Any) -> Any:
    raise RuntimeError("the gateway opens no SDK session")


_BINDING = SdkBinding(
    name="gateway",
    hx=httpx2,
    supported=MCP2,
    others=(),
    connect=sdk_streams,
    session_class=_unused,
    cancel_result=_unused,
)
"""The core as the gateway uses it: httpx2 upstream, no SDK session, HTTP errors of request
POSTs forwarded unchanged (the client handles them)."""


@dataclass(frozen=True)
class GatewayLimits:
    """Bounds on what one gateway process holds and accepts. Every number of seconds is
    finite (a bound that never ends bounds nothing); a value out of range is
    ``ValueError`` at construction."""

    max_body: int = 4 * 1024 * 1024
    """Bytes of a request body; more gets ``413``."""
    max_sessions: int = 10_000
    """Sessions (guards) held. Every session the upstream accepts is held, room made for
    it then: the least recently used held ones with nothing under way (no request in
    flight, no answer submission pending, no prompt presented here awaiting its answer)
    are dropped until fewer than this are held. A request of a session not held (an
    ``initialize``, an id held elsewhere or made up) drops no session within the bound,
    and is refused (``503``) before it is sent upstream while this many are held and
    none could be dropped. The held sessions pass the bound only by sessions accepted
    when no room could be made (every held one got work under way after their requests
    were let in): a new session is let in only with at most this many held, so held
    sessions number at most this plus the sessions not yet accepted with a request in
    flight when the last new one was let in (at most ``max_unaccepted`` naming an id,
    plus the ``initialize`` requests then in flight, bounded by the edge's connections).
    What is over the bound is dropped, least recently used first, as soon as sessions
    can be, checked when a new session's request is let in and when one is accepted."""
    session_idle_s: float = 3600.0
    """A session with no request for this long is dropped (its guard forgotten) when
    room is made (:attr:`max_sessions`), never while a request or an answer submission of
    it is under way."""
    max_final: int = 1024 * 1024
    """Bytes of a stream's final response kept to answer a resume that lost it."""
    max_finals: int = 16
    """Final responses kept per session (the newest); a resume of an older finished
    stream gets ``result-not-kept``."""
    max_kept_bytes: int = 256 * 1024 * 1024
    """Bytes of final responses kept over every session together; past it the session
    holding the most loses its oldest first (:mod:`fsm.gateway.kept`), so the results
    clients read whole cannot fill the replica, nor one session's take another's share
    (a client holding many sessions holds many shares)."""
    observations: int = 16
    """Observations each session's event log keeps, the newest (the monitor checks them
    all as they come; the log is for reading a session's recent past)."""
    remembered: int = 16
    """What each session remembers of its past, per kind, the newest: ended interactions
    its monitor still checks, failed interactions (a resume of one is told why), withdrawn
    prompts (their late answers dropped), relayed answers. With the guard's own bounds
    (:data:`GATEWAY_GUARD`) a session's memory stops growing after this many calls."""
    upstream_connections: int | None = None
    """Connections to the upstream at once (``None``: as many as the sessions need; each
    streaming session holds two: its call's POST stream and its standalone GET)."""
    upstream_idle_s: float = 1.0
    """Seconds an idle upstream connection is kept for reuse: shorter than servers keep
    an idle connection (uvicorn: 5 s), so a reused one is never one the server is closing."""
    max_event_bytes: int = 8 * 1024 * 1024
    """Characters of one SSE event from the upstream held at once; a larger event ends
    its stream with one error for its client (``event-too-large``)."""
    upstream_requests_per_session: int = 8
    """The gateway's own upstream requests for one session in flight at once (answer
    submissions, refusals); more wait for a slot. A credentials probe (the ``ping`` that
    proves a request's credentials) is not counted: it runs inside the client request it
    proves, before that request is sent, at most once per request, bounded by
    ``probe_timeout_s``."""
    probe_timeout_s: float = 10.0
    """Seconds a credentials probe may take (its response included: a ``ping`` is
    answered at once); past it the credentials are not proven, and the request is
    relayed as it came."""
    max_pending_refusals: int = 64
    """Refusals (answers to server requests past the guard's ``max_live_requests``) of
    one session waiting to be sent; past it a refusal is not sent (the server's own
    deadline ends that request)."""
    body_timeout_s: float = 30.0
    """Seconds to receive a request's whole body; a client slower than that gets
    ``408``."""
    max_receiving_bytes: int = 256 * 1024 * 1024
    """Bytes of request bodies being received at once, over every connection together
    (counted as they arrive, given back once a body is whole or its reading ends: timeout,
    disconnect, refusal). A request whose declared ``Content-Length`` does not fit now
    gets ``503`` (with ``Retry-After``) before any of its body is read, one sent without
    a length as soon as its next piece would pass it; the connection is then closed.
    Bounds what ``max_body`` times the edge's connections would allow (4096 x 4 MiB).
    At least ``max_body``. Bodies received whole, while their requests are served, are
    not counted."""
    max_receiving_bytes_per_peer: int | None = None
    """Of ``max_receiving_bytes``, what the connections of one peer (the client address's
    host; all clients the server gives no address of are one peer) may hold at once;
    past it ``503`` as past ``max_receiving_bytes`` (the message says which). Keeps one
    client from filling ``max_receiving_bytes`` alone with stalled bodies (until
    ``body_timeout_s``) so that every other client's requests get ``503``. It does not
    stop many addresses from filling it together; behind a proxy every client is one peer
    (the proxy): there give it as ``max_receiving_bytes``. ``None`` (the default):
    16 MiB (:attr:`~fsm.gateway.edge.BodyBudget.PEER_SHARE`), raised to ``max_body`` or
    lowered to ``max_receiving_bytes`` if needed. Given, at least ``max_body`` and at most
    ``max_receiving_bytes``."""
    max_unaccepted: int = 256
    """Session ids at once with a request in flight that the upstream has not accepted
    here (a guard is made for such a session only while its request is in flight, held
    once the upstream accepts it: :attr:`max_sessions`); past it ``503``. An
    ``initialize`` (no session id yet) is bounded by ``max_sessions`` and the edge's
    connections instead."""
    max_credentials: int = 8
    """Credentials the upstream accepted kept per session (the most recent ones: a
    client refreshing its token proves the new one with its next request)."""
    lease_s: float = DEFAULT_LEASE_S
    """Seconds a replica's claim of a presented request lasts unless renewed (renewed
    every third of it while the request awaits its answer). A call whose prompt was
    claimed by a replica that died ends with ``claim-lapsed`` this long after."""
    session_keepalive_s: float = 60.0
    """Seconds between extensions of a held session's record in the store while the
    session is in use (a request of it served or being served, an event stream of it
    open): the store keeps a record ``ttl_s`` past its last extension, so a session busy
    with calls and streams for longer than ``ttl_s`` without a prompt still has its
    record when a prompt comes. Checked every third of ``lease_s``; keep it well under
    the store's ``ttl_s``."""
    standalone_hold_s: float | None = None
    """Seconds a session's standalone ``GET``, opened upstream when its
    ``notifications/initialized`` is accepted, waits for the client's own ``GET`` to
    take it before it is closed (:mod:`fsm.gateway.standalone`); ``0``: none is opened
    ahead, the client's ``GET`` goes upstream when it comes. ``None`` (the default):
    :data:`STANDALONE_HOLD_S` with a :class:`~fsm.gateway.store.MemoryStore` (one
    replica, which every request of a session reaches), ``0`` with any other store:
    replicas behind a balancer without session affinity would open a ``GET`` the
    client's, landing on another replica, cannot take (the server refuses a second one);
    give it where the balancer keeps a session's requests on one replica."""

    def __post_init__(self) -> None:
        for name in (
            "max_body",
            "max_sessions",
            "max_final",
            "max_finals",
            "max_kept_bytes",
            "observations",
            "remembered",
            "max_event_bytes",
            "upstream_requests_per_session",
            "max_unaccepted",
            "max_credentials",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"GatewayLimits.{name} must be >= 1")
        if self.max_receiving_bytes < self.max_body:
            raise ValueError("GatewayLimits.max_receiving_bytes must be >= max_body")
        share = self.max_receiving_bytes_per_peer
        if share is not None and not self.max_body <= share <= self.max_receiving_bytes:
            raise ValueError(
                "GatewayLimits.max_receiving_bytes_per_peer must be >= max_body"
                " and <= max_receiving_bytes"
            )
        if self.max_pending_refusals < 0:
            raise ValueError("GatewayLimits.max_pending_refusals must be >= 0")
        seconds: list[tuple[str, float | None, bool]] = [
            ("standalone_hold_s", self.standalone_hold_s, False),
            ("session_keepalive_s", self.session_keepalive_s, False),
            ("session_idle_s", self.session_idle_s, True),
            ("upstream_idle_s", self.upstream_idle_s, True),
            ("body_timeout_s", self.body_timeout_s, True),
            ("lease_s", self.lease_s, True),
            ("probe_timeout_s", self.probe_timeout_s, True),
        ]
        for name, value, positive in seconds:
            problem = None if value is None else seconds_problem(value, positive=positive)
            if problem is not None:
                raise ValueError(f"GatewayLimits.{name}: {value!r} {problem}")
        if self.upstream_connections is not None and self.upstream_connections < 1:
            raise ValueError("GatewayLimits.upstream_connections must be None or >= 1")


Credentials = tuple[str, ...]
"""The values of the credential headers in a request (``""`` for one it lacks)."""


def credentials_of(
    headers: Mapping[str, str], names: Iterable[str] = CREDENTIAL_HEADERS
) -> Credentials:
    """The credential headers a request carries, of ``names`` (see
    :data:`CREDENTIAL_HEADERS`)."""
    return tuple(headers.get(name, "") for name in names)


def _with_query(upstream: httpx2.URL, query: bytes) -> httpx2.URL:
    """The upstream URL a client request goes to: the gateway's one ``upstream``, with
    the request's ``query`` (the only part of the target a client chooses). ``ValueError``
    for a query no URL can hold (a ``#``, which the h11 parser passes on as query)."""
    if not query:
        return upstream
    try:
        return upstream.copy_with(query=query)
    except httpx2.InvalidURL as exc:
        raise ValueError(str(exc)) from None


def _is_initialize(body: bytes) -> bool:
    """Whether ``body`` is a JSON-RPC ``initialize`` request (a body that does not hold the
    word is not parsed). Such a request begins a session: the gateway files it as a new
    one even when it names a session id, and the id the upstream answers names it, so a
    client cannot have a session held under an id it picked (the upstream still sees the
    header, and judges it)."""
    if b'"initialize"' not in body:
        return False
    message = _json_object(body)
    return message is not None and message.get("method") == "initialize"


def _credential_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as the gateway's credential headers: lower case, each an RFC 9110 token
    the gateway forwards as it came (not hop-by-hop, not one it writes or reads itself:
    ``Host``, ``Content-Length``, ``Origin``, the session's own), once each; else
    ``ValueError``."""
    if isinstance(names, str):
        raise ValueError("credential headers must be a collection of names, not one string")
    out = tuple(dict.fromkeys(name.lower() for name in names))
    for name in out:
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"credential header {name!r} is not a header name")
        if name in _HOP_BY_HOP or name in _REFRAMED or name in (*_READ, "origin"):
            raise ValueError(f"credential header {name!r} is not forwarded as it came")
    return out


@dataclass(eq=False)
class _Session:
    engine: SessionIO
    transport: GuardedTransport
    keys: EventIdKeys
    max_credentials: int
    credential_headers: tuple[str, ...] = CREDENTIAL_HEADERS
    ids: dict[str, IdRewriter] = field(default_factory=dict)
    proven: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    """The digests of the credentials (:meth:`credentials`) the upstream accepted for this
    session (newest last): 32 bytes each, however long the cookies."""
    claimed: set[RequestId] = field(default_factory=set)
    """Requests this replica claimed and presented, or took over to submit their answer,
    whose leases it renews."""
    marking: set[RequestId] = field(default_factory=set)
    """Requests whose answer's mark (:meth:`Gateway._mark_submitted`) is in flight: the
    lease of one claimed here is renewed meanwhile, and the session is kept."""
    unmarked: set[RequestId] = field(default_factory=set)
    """Requests whose answer's submission from this replica ended (or whose answer was
    relayed from here) but whose mark failed (the store did not answer):
    :meth:`Gateway._renew` marks them again, renewing the lease of those held here until
    it lands, and the session is not let go (a lapsed, unmarked claim is a survivor's to
    send again)."""
    watching: set[RequestId] = field(default_factory=set)
    """Requests another replica claimed whose claim this replica watches
    (:meth:`Gateway._watch_claim`): one watcher per request."""
    held: bool = False
    """Accepted by the upstream and held in the gateway's table."""
    closed: bool = False
    """No longer held, for good (:meth:`Gateway._close`): never held again, keeps no
    result."""
    ahead: StandaloneAhead = field(default_factory=StandaloneAhead)
    """Its standalone ``GET``, opened upstream before its client's."""
    began_here: bool = False
    waiting_as: str | None = None
    """The id it is filed under among the sessions awaiting the upstream's acceptance
    (the one its first request named: the upstream may accept it under another)."""
    last_used: float = 0.0
    place: int = 0
    """Its place in the gateway's table of held sessions: the count of moves to the
    table's most recently used end (:meth:`Gateway._hold`, :meth:`Gateway._known`) at its
    last, so held sessions ordered by it are in the table's order."""
    kept_at: float = 0.0
    """When its record in the store was last extended (:meth:`Gateway._keep_alive`)."""
    busy: int = 0
    ended_recorded: bool = False

    def rewriter(self, stream: str) -> IdRewriter:
        ids = self.ids.get(stream)
        if ids is None:
            ids = self.ids[stream] = IdRewriter(stream, self.engine.session or "", self.keys)
        return ids

    def credentials(self, request: Any) -> bytes:
        """A digest of ``request``'s credentials: its credential headers and its URL's
        query (:func:`~fsm.gateway.standalone.claimant`). Worked out once per request
        (kept on it: a forwarded request is asked about before it is sent and proven
        after), since neither changes while the gateway handles it."""
        known = request.extensions.get(_CLAIMANT)
        if known is None:
            headers = credentials_of(request.headers, self.credential_headers)
            known = request.extensions[_CLAIMANT] = claimant(headers, request.url.query)
        return bytes(known)

    def trusts(self, request: Any) -> bool:
        """Whether ``request``'s credentials are ones the upstream accepted here."""
        return self.credentials(request) in self.proven

    def prove(self, request: Any) -> None:
        """The upstream accepted ``request``: its credentials are proven (kept newest)."""
        creds = self.credentials(request)
        self.proven[creds] = None
        self.proven.move_to_end(creds)
        while len(self.proven) > self.max_credentials:
            self.proven.popitem(last=False)


class Gateway:
    """The ASGI app (see the module docstring). ``upstream`` is the MCP endpoint URL
    (``http://host:port/mcp``, no ``user:password@``: the gateway adds no credentials of
    its own); clients use the same path on the gateway. ``store`` defaults to a
    :class:`~fsm.gateway.store.MemoryStore` (one replica). ``config`` is each session's
    guard policy (default :data:`GATEWAY_GUARD`). ``id_keys`` sign the event ids it
    issues (default: a random key, one replica; replicas behind one balancer must share
    keys:
    :meth:`~fsm.gateway.ids.EventIdKeys.from_env`). ``host_policy`` says which ``Host``
    and ``Origin`` values reach the upstream (default: loopback only; ``None``: any).
    ``replica`` names this replica in the store's claims (default: random).
    ``credential_headers`` names the headers the upstream may bind a session to (default
    :data:`CREDENTIAL_HEADERS`; ``ValueError`` for a name the gateway does not forward
    as it came).
    ``on_fatal`` is called if the gateway's own background work fails (it then serves
    nothing: every request gets ``503``); ``python -m fsm gateway`` exits 1 on it. Run
    it with any ASGI server with lifespan on (``python -m fsm gateway`` runs uvicorn), or
    enter :meth:`running` around serving it, on an ``asyncio`` loop (uvloop included):
    its upstream connections are aiohttp's (:mod:`fsm.gateway.upstream`).

    Operations: :data:`HEALTH_PATH` and :data:`READY_PATH` answer on any ``Host``, before
    the host policy and without touching a session (an upstream path under
    :data:`OWN_PATHS` is refused). :attr:`metrics` counts what the replica does
    (:mod:`fsm.gateway.metrics`). :meth:`drain` ends the replica's work before a stop.
    Forwarding: hop-by-hop fields (RFC 9110 section 7.6.1, and those a message's
    ``Connection`` names) are dropped both ways; a request goes upstream with
    ``X-Forwarded-For`` and ``Forwarded`` appended; a response keeps the upstream's
    fields (its ``Date`` and ``Server`` among them; a ``Date`` is added when it has none)
    and its ``Content-Length`` whenever its body passes as it came. The server that runs
    the app must add no ``Date`` or ``Server`` of its own (uvicorn:
    ``server_header=False, date_header=False``, as
    :func:`fsm.gateway.edge.uvicorn_settings` gives with ``relay=True``)."""

    def __init__(
        self,
        upstream: str,
        *,
        store: StateStore | None = None,
        config: GuardConfig | None = None,
        limits: GatewayLimits | None = None,
        timeout: httpx2.Timeout | None = None,
        id_keys: EventIdKeys | None = None,
        host_policy: HostPolicy | None = _DEFAULT_HOSTS,
        replica: str | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        credential_headers: Iterable[str] = CREDENTIAL_HEADERS,
    ) -> None:
        self.credential_headers = _credential_names(credential_headers)
        """Its credential headers (lower case; see :data:`CREDENTIAL_HEADERS`)."""
        self._single = _single(self.credential_headers)
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, not {_redacted(upstream)!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "upstream must not hold user:password@ (the gateway adds no credentials "
                "of its own; clients send theirs)"
            )
        self.upstream = upstream
        self.path = parts.path or "/"
        if self.path.startswith(OWN_PATHS):
            raise ValueError(f"the upstream's path must not begin with {OWN_PATHS}")
        self.store: StateStore = store if store is not None else MemoryStore()
        self.config = config if config is not None else GATEWAY_GUARD
        self.limits = limits or GatewayLimits()
        receiving, share = self.limits.max_receiving_bytes, self.limits.max_receiving_bytes_per_peer
        if share is None:
            share = min(max(BodyBudget.PEER_SHARE, self.limits.max_body), receiving)
        self._bodies = BodyBudget(receiving, share)
        """Bytes of request bodies being received (``max_receiving_bytes``, and
        ``max_receiving_bytes_per_peer`` per client address)."""
        hold = self.limits.standalone_hold_s
        if hold is None:
            hold = STANDALONE_HOLD_S if isinstance(self.store, MemoryStore) else 0.0
        self.standalone_hold_s: float = hold
        """Seconds a standalone ``GET`` opened ahead is held (``GatewayLimits``'s, or its
        default for this store)."""
        self.id_keys = id_keys if id_keys is not None else EventIdKeys.generate()
        self.host_policy = host_policy
        self.replica = replica or secrets.token_hex(8)
        self.on_fatal = on_fatal
        self.failure: BaseException | None = None
        """What ended the gateway's background work, if it failed (then every request
        gets ``503``)."""
        self._timeout = timeout or httpx2.Timeout(30.0, read=300.0)
        self._timeouts = self._timeout.as_dict()
        """What a forwarded request's ``timeout`` extension holds (made once)."""
        self._upstream_url = httpx2.URL(upstream)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._kept = KeptResults(self.limits.max_finals, self.limits.max_kept_bytes)
        """The last piece passed on of each finished stream, by session: its last event
        is the stream's result, parsed out only when a resume asks for it."""
        self._unaccepted: dict[str, _Session] = {}
        """Sessions the upstream has not accepted here, by the id they were filed under,
        while a request is in flight for them (shared by concurrent requests of one id):
        at most ``max_unaccepted``."""
        self._provisional: set[_Session] = set()
        """Every session not yet accepted with a request in flight (``initialize``s
        included)."""
        self._unsure: dict[_Session, None] = {}
        """The held sessions :meth:`_room_possible` and :meth:`_make_room` ask
        :meth:`_droppable` about: held, or told changed (:meth:`_recheck`), since last
        found kept. Every other held session was kept then and stays kept until it is
        told changed or :attr:`_idle_at` passes."""
        self._idle_at = math.inf
        """The earliest time a held session not in :attr:`_unsure` may go idle
        (:meth:`_idle_after`): from then on every held session is asked again."""
        self._moves = 0
        """Moves of held sessions to the most recently used end of :attr:`_sessions` so
        far (each session's :attr:`_Session.place`)."""
        self._http: httpx2.AsyncClient | None = None
        self._tg: TaskGroup | None = None
        self._halted = False
        self.draining = False
        """Set by :meth:`drain`: readiness then answers ``503``."""
        self._flights: set[_Flight] = set()
        """Client requests being served (past the early refusals)."""
        self._cutting = False
        """The drain's bound passed: a request from now on gets ``503`` at once."""
        self._streams = 0
        """Event streams being relayed to clients."""
        self._writes = 0
        """Store writes spawned and not finished."""
        self._changed: anyio.Event | None = None
        """Set (and replaced) when a request or a spawned write ends, for :meth:`drain`."""
        self.metrics = GatewayMetrics(
            sessions=lambda: len(self._sessions),
            streams=lambda: self._streams,
            in_flight=lambda: len(self._flights),
            draining=lambda: float(self.draining),
        )
        """This replica's metrics (:mod:`fsm.gateway.metrics`)."""
        self._store = TimedStore(self.store, self.metrics)
        """The store, each operation timed into :attr:`metrics`."""

    # -- lifecycle -----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Hold the upstream HTTP client and the background task group (answer
        submissions, store writes, lease renewals) while serving; on exit every session
        is closed. A store with a ``connect()``
        (:class:`~fsm.gateway.redis_store.RedisStore`) is checked first:
        :class:`~fsm.gateway.store.StoreUnavailableError` if it does not answer. If the
        background work fails (a defect: every session's own faults are contained),
        :attr:`failure` is set, ``on_fatal`` is called and the failure is raised."""
        connect = getattr(self.store, "connect", None)
        if connect is not None:  # a remote store's start-up check (fails: no start)
            await connect()
        transport = _Watched(
            AiohttpTransport(
                connections=self.limits.upstream_connections,
                idle_s=self.limits.upstream_idle_s,
            ),
            self.metrics,
        )
        try:
            async with (
                httpx2.AsyncClient(
                    transport=transport, timeout=self._timeout, cookies=_no_cookies()
                ) as http,
                anyio.create_task_group() as tg,
            ):
                self._http, self._tg = http, tg
                tg.start_soon(self._keep_alive)
                try:
                    yield self
                finally:
                    for session in self._sessions.values():
                        self._close(session)
                    self._sessions.clear()
                    tg.cancel_scope.cancel()
                    self._http = self._tg = None
        except Exception as exc:
            self._http = self._tg = None
            self.failure = exc
            logger.critical("gateway failed: %r", exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)
            raise

    def halt(self) -> None:
        """Stop the gateway's background work now (answer submissions, lease renewals,
        store writes), as a crash stops it; requests get ``503`` from then on. For tests
        that kill a replica in-process; a deployment stops the process instead. Unlike a
        crash, a request upstream at the halt is still answered when its response comes:
        its streams end with ``session-closed``, since the halt closed its session."""
        self._halted = True
        self._http = None
        for session in [*self._sessions.values(), *self._provisional]:
            self._close(session)

    @property
    def sessions(self) -> int:
        """Sessions held now (each accepted by the upstream)."""
        return len(self._sessions)

    @property
    def in_flight(self) -> int:
        """Client requests being served now (event streams being relayed included)."""
        return len(self._flights)

    def session_guard(self, session_id: str) -> ObservedGuard | None:
        """The observed guard of a held session (its decisions, monitor, violations)."""
        held = self._sessions.get(session_id)
        return held.engine.og if held is not None else None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """The ASGI entry: ``lifespan`` and ``http`` scopes are served; a ``websocket``
        scope (a server with WebSocket support on; :func:`~fsm.gateway.edge.uvicorn_settings`
        turns it off) is refused before its handshake completes (``websocket.close``,
        code 1008: the server answers the upgrade ``403``)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http_request(scope, receive, send)
        elif scope["type"] == "websocket":  # MCP has no WebSocket transport here
            await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:  # say which phase failed to the server
            phase = "shutdown" if started else "startup"
            await send({"type": f"lifespan.{phase}.failed", "message": repr(exc)})
            raise
        with contextlib.suppress(Exception):
            await self.store.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    # -- one request ---------------------------------------------------------------

    async def _http_request(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope.get("path")
        if path in (HEALTH_PATH, READY_PATH):
            await self._health(path == READY_PATH, send)
            return
        if self._http is None:
            why = b"gateway failed" if self.failure is not None else b"gateway not started"
            await _reply(send, 503, why + b" (lifespan off?)", "text/plain")
            return
        if path != self.path:
            await _reply(send, 404, b"not found", "text/plain")
            return
        method = scope["method"]
        if method != method.upper():  # methods are case-sensitive: the upstream connection
            # would send it upper-cased, as the MCP method it is not
            why = _rpc_error(None, -32600, f"method {method!r} not implemented")
            await _reply(send, 501, why)
            return
        try:
            headers = _headers(scope, self._single)
        except ValueError as exc:
            await _reply(send, 400, _rpc_error(None, -32600, f"bad header: {exc}"))
            return
        try:
            url = _with_query(self._upstream_url, scope.get("query_string", b""))
        except ValueError as exc:
            await _reply(send, 400, _rpc_error(None, -32600, f"bad query: {exc}"))
            return
        if self.host_policy is not None:
            refusal = self.host_policy.refusal(headers)
            if refusal is not None:
                status, message = refusal
                await _reply(send, status, _rpc_error(None, -32600, message))
                return
        if self._cutting:  # the drain's bound passed: nothing new is begun
            why = _rpc_error(None, ENDED_CODE, "gateway draining: retry")
            await _reply(send, 503, why, close=True)
            return
        flight = _Flight()
        self._flights.add(flight)

        async def sent(message: Message) -> None:  # what the drain must know of it
            if message["type"] == "http.response.start":
                flight.started, flight.clean = True, False
                await send(message)
            else:
                await send(message)
                flight.complete = not message.get("more_body", False)

        try:
            with flight.scope:
                await self._handle(scope, url, headers, receive, sent, flight)
            if flight.scope.cancelled_caught and not flight.complete:  # by the drain
                if not flight.started:
                    why = _rpc_error(None, ENDED_CODE, "gateway draining: retry")
                    await _reply(send, 503, why, close=True)
                elif flight.clean:  # the events passed on so far end the stream
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                # else cut mid-body: the response stays incomplete, the connection closes
        finally:
            self._flights.discard(flight)
            self._notify()

    async def _health(self, ready: bool, send: Any) -> None:
        """Answer a health (``ready=False``) or readiness probe; no session is touched."""
        why = ""
        if self._http is None or self._halted or self.failure is not None:
            why = "not serving"
        elif ready and self.draining:
            why = "draining"
        elif ready:
            try:
                with anyio.fail_after(5):
                    await self._store.ping()
            except (StoreUnavailableError, TimeoutError):
                why = "store unavailable"
        body = json.dumps({"status": why or "ok"}).encode()
        await _reply(send, 503 if why else 200, body, extra=((b"cache-control", b"no-store"),))

    async def _handle(
        self,
        scope: Scope,
        url: httpx2.URL,
        headers: dict[str, str],
        receive: Any,
        send: Any,
        flight: _Flight,
    ) -> None:
        method = scope["method"]
        client = scope.get("client")
        peer = str(client[0]) if client else ""  # no address: one shared peer
        try:
            with anyio.fail_after(self.limits.body_timeout_s):
                body = await _read_body(receive, headers, self.limits.max_body, self._bodies, peer)
        except TimeoutError:  # the rest of the body may still come: the connection ends
            why = _rpc_error(None, -32600, "request body not received in time")
            await _reply(send, 408, why, close=True)
            return
        except BodiesFull as exc:  # max_receiving_bytes(_per_peer): the rest is not read
            why = _rpc_error(None, -32000, str(exc))
            await _reply(send, 503, why, close=True, extra=((b"retry-after", b"1"),))
            return
        except anyio.EndOfStream:  # the client left mid-body: nothing to forward nor answer
            return
        if body is None:
            await _reply(send, 413, _rpc_error(None, -32600, "request body too large"))
            return
        sid = headers.get("mcp-session-id")
        if sid is not None and method == "POST" and _is_initialize(body):
            sid = None  # it begins a session: filed as new, whatever id it names
        try:
            session = await self._session_for(sid)
        except StoreUnavailableError as exc:
            await _store_unavailable(send, method, headers, body, exc, self.id_keys)
            return
        except _Full as exc:
            await _reply(send, 503, _rpc_error(_request_id(body), -32000, str(exc)))
            return
        if session is None:  # the session ended (here or on another replica)
            await _reply(send, 404, SESSION_GONE_BODY)
            return
        session.busy += 1
        try:
            await self._serve(session, scope, url, headers, body, receive, send, flight)
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()
            self._recheck(session)
            if session.held:
                await self._after(session)
            elif session.busy == 0:  # never accepted, or merged into the held one
                self._forget(session)

    async def _serve(
        self,
        session: _Session,
        scope: Scope,
        url: httpx2.URL,
        headers: dict[str, str],
        body: bytes,
        receive: Any,
        send: Any,
        flight: _Flight,
    ) -> None:
        e = session.engine
        method = scope["method"]
        # the client's request as it came: no default header of the gateway's HTTP client
        # added (merging them, build_request, took a sixth of a forwarded request's CPU)
        request = httpx2.Request(
            method,
            url,
            headers=_upstream_headers(headers, scope),
            content=body,
            extensions={"timeout": self._timeouts},
        )
        resume = headers.get("last-event-id")
        upstream = functools.partial(self._upstream_response, session, request, body, resume)
        parsed = json_body(request)  # None: no JSON Python reads (another reader may)
        if method == "POST" and parsed is not None and not asks(method, parsed):
            resp = await upstream()  # answers and notifications: handled whole, as the
        else:  # upstream handles a body that arrived whole
            resp = await _unless_client_leaves(receive, upstream)
            if resp is None:
                return
        if e.session is not None and not (session.held or session.closed) and session.proven:
            await self._accept(session)
        if session.closed:  # it ended while this request was upstream: a stream opened since
            self._end_streams(session)  # ends as those open then, before its client reads it
        if not 200 <= resp.status_code <= 599:  # a status no edge can send as a final one
            await resp.aclose()
            resp = _unreachable(httpx2.RemoteProtocolError(f"status {resp.status_code}"), body)
        if method == "POST" and resp.status_code < 300 and is_initialized(parsed):
            await self._open_ahead(session, request)
        await self._respond(session, resp, receive, send, flight)
        if method == "DELETE" and resp.status_code < 300 and e.session and session.trusts(request):
            e.expired = InteractionFailed("the client ended the session", reason="deleted")

    async def _upstream_response(
        self, session: _Session, request: Any, body: bytes, last_event_id: str | None
    ) -> Any:
        """The response to the client's ``request`` (``body``: its body; ``last_event_id``:
        the ``Last-Event-ID`` it came with): from the upstream through the session's
        transport core, or made here (a resume of a stream that ended here, a refusal, a
        stand-in for an upstream that could not be reached)."""
        method = request.method
        try:
            if method == "GET" and last_event_id is not None:
                resp = await self._client_resume(session, request, last_event_id)
            elif method == "GET":
                resp = await self._fresh_get(session, request)
            else:
                resp = await session.transport.handle_async_request(request)
        except httpx2.TransportError as exc:  # no response to pass on
            return _unreachable(exc, body)
        failed = request.extensions.get(_FAILED)
        if failed is not None and resp.headers.get(LOCAL_HEADER):  # the core's stand-in
            await resp.aclose()
            return _unreachable(failed, body)
        return resp

    async def _fresh_get(self, session: _Session, request: Any) -> Any:
        """A client's fresh standalone ``GET``: the stream opened ahead for the session
        if its credentials are proven here (:mod:`fsm.gateway.standalone`), else sent
        upstream."""
        held = None
        if session.trusts(request):
            held = await session.ahead.take(session.credentials(request))
        if held is not None:
            return await session.transport.adopt_standalone(request, held)
        resp = await session.transport.handle_async_request(request)
        if opens_stream(resp):  # a GET is attached: none is opened ahead
            session.ahead.seen_get()
        return resp

    async def _open_ahead(self, session: _Session, request: Any) -> None:
        """The upstream accepted ``request``, the session's ``notifications/initialized``
        (read from its parsed body, :func:`~fsm.gateway.standalone.is_initialized`): with
        proven credentials, open the session's standalone ``GET`` upstream before the
        client is answered."""
        hold_s = self.standalone_hold_s
        if not (hold_s > 0 and session.held and session.ahead.wanted()):
            return
        if not session.trusts(request):
            return
        assert self._http is not None
        http, e = self._http, session.engine
        get = httpx2.Request(
            "GET",
            request.url,
            headers=ahead_headers(request.headers, e.carry(request)),
            extensions={"timeout": self._timeouts},
        )

        async def send() -> Any:
            return await http.send(get, stream=True)

        if not e.closing:
            await session.ahead.open(send, e.spawn, hold_s, session.credentials(request))

    async def _accept(self, session: _Session) -> None:
        """The upstream accepted a request of ``session``: hold it, room made for it now
        (:meth:`_make_room`). It is held even with no room (every held session got work
        under way since its request was let in): the table then passes ``max_sessions``
        by it until sessions can be let go (the bound: :attr:`GatewayLimits.max_sessions`).
        Every session with a proven credential is thus held, so its answers taken, its
        prompts' leases and its store record are kept as any held session's. A session
        that began here (its ``initialize`` was answered) is recorded in the store before
        the client learns its id, so no claim of it can come first."""
        sid = session.engine.session
        assert sid is not None
        held = self._sessions.get(sid)
        if held is not None and held is not session:  # a concurrent request won: merge
            held.proven.update(session.proven)
            return
        if held is session:
            return
        self._make_room()  # with no room, held over the bound all the same
        session.held = True
        self._unfile(session)
        self._hold(sid, session)
        if session.began_here:
            session.kept_at = time.monotonic()
            try:
                await self._store.begin_session(sid)
            except StoreUnavailableError as exc:  # its claims will fail closed
                logger.warning("a new session was not recorded: %s", exc)

    async def _client_resume(self, session: _Session, request: Any, value: str) -> Any:
        """A client's resume ``GET`` with ``Last-Event-ID`` ``value``: ``400`` for an id
        this gateway did not issue in the session; relayed as it came for credentials the
        upstream does not accept; else the stream is taken over and resumed upstream from
        the newest event the gateway passed on that this replica can prove: its own
        cursor, the client's id if newer (another replica carried the stream since), and
        then the store's cursor if newer still. A cursor never moves back."""
        e = session.engine
        got = parse_event_id(value, e.session or "", self.id_keys)
        if got is None:
            return _response(
                400, _rpc_error(None, -32600, "Last-Event-ID was not issued by this gateway")
            )
        if not session.trusts(request) and not await self._probe(session, request):
            # credentials the upstream did not accept for this session: its answer alone
            request.headers["last-event-id"] = got.upstream_id
            return await session.transport._send(request)
        stream, origin = got.stream, origin_of(got.stream)
        known = e.guard.stream_state(stream) is not None
        if not known and ((session, stream) in self._kept or stream in e.failures):
            return self._ended_here(session, stream, origin)  # its guard record forgotten
        ids = session.rewriter(stream)
        # positions never go back: the client's signed id moves this replica's cursor
        # only forward, and an id past it means another replica carried the stream since
        seen = [got] if not known or got.position > ids.position else []
        if seen and e.session is not None:  # another replica carried it: its cursor?
            try:
                stored = await self._store.cursor_of(e.session, store_name(stream))
            except StoreUnavailableError as exc:  # the client's id then; claims still hold
                logger.warning("no stored cursor for a resumed stream: %s", exc)
                stored = None
            if stored is not None and stored.position > got.position:
                seen.append(GatewayEventId(stream, stored.position, stored.event_id))
        for item in seen:
            ids.advance_to(item.position, item.upstream_id)
        resp = session.transport.reconnect(
            request, stream, origin, tuple(item.upstream_id for item in seen)
        )
        if resp is not None:
            if ids.position > got.position:  # resumed from a newer event than the client's
                self.metrics.cursor_rewrites.inc()
            if seen:  # taken over here: the prompts other replicas passed on in it
                e.spawn(self._watch_stream_claims, (session, stream))
            return resp
        return self._ended_here(session, stream, origin)

    def _ended_here(self, session: _Session, stream: str, origin: Any) -> Any:
        """The answer to a resume of a stream that ended here: its kept result, else the
        error that ended it (or ``result-not-kept``)."""
        e = session.engine
        kept = self._kept.get(session, stream)
        final = None if kept is None else _final_event(kept)
        if final is None:  # dead here (the error was sent), or done with no result kept
            err = e.failures.get(stream) or InteractionFailed(
                f"{stream} ended before this resume; its result was not kept",
                stream=stream,
                reason="result-not-kept",
            )
            final = encode_event(None, json.dumps(ending_error(origin, err)))
        return _response(200, final, "text/event-stream")

    async def _vouch(self, session: _Session, request: Any) -> bool:
        """The transport core's voucher (:attr:`SessionIO.vouch`): :meth:`_probe` for a
        session held here; ``False``, asking nothing, for one that is not (a session id
        this replica does not hold, made up or held elsewhere, has no state here that a
        stranger could change, and a flood of made-up ids must cost the upstream one
        request each, not two: such a session is held once a request of it proves its
        credentials, one the upstream opened an event stream for or an answer it took,
        by the probe asked then: :meth:`_vouch_opened`, :meth:`_vouch_answer`)."""
        return session.held and await self._probe(session, request)

    async def _vouch_opened(self, session: _Session, request: Any) -> bool:
        """The transport core's :attr:`SessionIO.vouch_opened`: :meth:`_probe` for a
        session not held here whose request the upstream opened an event stream for (a
        session held elsewhere failing over: a made-up id gets no stream), so it is held
        here rather than waiting, stream open, among those not yet accepted; ``False``
        for a held one (asked before its request was sent)."""
        return not session.held and await self._probe(session, request)

    async def _vouch_answer(self, session: _Session, request: Any) -> bool:
        """The transport core's :attr:`SessionIO.vouch_answer`: :meth:`_probe`, whether
        or not the session is held here, for an answer with unproven credentials the
        upstream took (``202``) and the guard would record (answering a prompt it
        presented, or kept in the store for the replica that did): the ``202`` says
        nothing of them, and a stranger's answer a server dropped after it must not
        end the owner's prompt. Held elsewhere, it is the owner's answer after a
        failover that the probe proves (and the session is held here). A made-up id the
        upstream refuses (``404``) gets no ``202`` and costs it nothing more."""
        return await self._probe(session, request)

    async def _probe(self, session: _Session, request: Any) -> bool:
        """Whether the upstream accepts ``request``'s credentials for its session, asked
        with a ``ping`` carrying them (a request with no effect) and answered only by the
        ping's JSON-RPC result (:func:`~fsm.adapters._transport.http.holds_result`: a
        2xx carrying a JSON-RPC error is a refusal), within ``probe_timeout_s``; proven,
        they are the session's. Asked before a request with unproven credentials changes
        or asks anything of the session (a resume takes over a stream, a new stream at
        the cap abandons one no client reads, a request's 2xx proves nothing by its
        status) and before the guard records an answer the upstream took with them (a
        ``202`` proves nothing either), at most once per request: its verdict is kept
        on the request.
        ``False`` once the replica halted or the session closed: nobody is asked."""
        known = request.extensions.get(_PROBED)
        if known is not None:
            return bool(known)
        if self._http is None or session.closed:
            return False
        e = session.engine
        headers = e.headers(e.carry(request))
        version = request.headers.get("mcp-protocol-version")
        if version:
            headers["mcp-protocol-version"] = version
        ping = {"jsonrpc": "2.0", "id": f"fsm-gateway-probe-{secrets.token_hex(6)}"}
        ping["method"] = "ping"
        probe = self._http.build_request("POST", request.url, json=ping, headers=headers)
        proven = False
        with anyio.move_on_after(self.limits.probe_timeout_s):
            try:
                resp = await self._http.send(probe, stream=True)
            except httpx2.HTTPError:
                resp = None
            if resp is not None:
                try:
                    proven = await holds_result(resp, ping["id"])
                finally:
                    await resp.aclose()
        request.extensions[_PROBED] = proven
        if proven:
            session.prove(request)
        return proven

    async def _respond(
        self, session: _Session, resp: Any, receive: Any, send: Any, flight: _Flight
    ) -> None:
        """Pass ``resp`` on: a tracked stream's events with their ids rewritten (no
        ``Content-Length``: the ids change its length), the upstream's response as it came
        (its fields, its bytes, its ``Content-Length`` and ``Content-Encoding``), or a
        response made here (its length). Hop-by-hop fields are dropped; a ``Date`` is
        added when there is none."""
        body = resp.stream
        tracked = isinstance(body, GuardedBody)
        ids = session.rewriter(body.stream) if tracked else None
        source, content = _source(resp)
        out = _response_headers(source.headers.raw, tracked, content)
        await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
        flight.clean = tracked  # a body is whole only at its end; a stream between events
        last = _LastEvents(self.limits.max_final)  # a tracked stream's newest events
        if tracked:
            self._streams += 1

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        async def relay() -> None:
            line_start = True
            async for piece in _pieces(source, content):
                if ids is not None:
                    piece = ids.rewrite(piece, line_start)
                    line_start = piece.endswith((b"\n", b"\r"))
                    last.add(piece)
                    if len(piece) > LARGE_EVENT:  # the rewrite was one pass over it
                        await anyio.lowlevel.checkpoint()
                flight.sending = True
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                flight.sending = False
                if tracked:
                    flight.clean = last.at_boundary
                    if flight.ending and flight.clean:  # the drain's bound passed
                        flight.scope.cancel()
                        await anyio.lowlevel.checkpoint()

        async def pump() -> None:
            try:
                await relay()
            except httpx2.TransportError as exc:  # the upstream cut its body short: the
                logger.warning("upstream response cut short: %r", exc)  # client's is cut
                tg.cancel_scope.cancel()  # short too (left incomplete, the connection
                return  # closes), as a relay passes the cut on
            flight.sending = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            flight.sending = False
            tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                tg.start_soon(pump)
        finally:
            with anyio.CancelScope(shield=True):
                if tracked:
                    self._streams -= 1
                await resp.aclose()
                if ids is not None:
                    self._connection_ended(session, body.stream, ids, last)

    def _connection_ended(
        self, session: _Session, stream: str, ids: IdRewriter, last: _LastEvents
    ) -> None:
        """A client connection of ``stream`` ended: keep the stream's final events if the
        origin's response arrived and the session is still held (a resume that lost it
        gets it again), and record the newest event passed on as the stream's cursor in
        the store."""
        done = session.engine.guard.stream_state(stream) == "done"
        keep = done and session.held and not session.closed and (session, stream) not in self._kept
        kept = last.value() if keep else None
        if kept is not None:
            self._kept.keep(session, stream, kept)
        self._forget_ended(session)
        if ids.last is not None and session.engine.session and session.held:
            cursor = Cursor(ids.position, ids.last)
            name = store_name(stream)
            self._spawn(self._store.save_cursor, session.engine.session, name, cursor)

    def _forget_ended(self, session: _Session) -> None:
        """Drop what a session keeps per stream for the streams that ended and whose
        result is not kept (their id tables, the credentials they acted with): a
        session's memory does not grow with its calls."""
        e = session.engine
        for stream in [s for s in session.ids if (session, s) not in self._kept]:
            if e.guard.stream_state(stream) in (None, "done", "dead") and stream not in e.tees:
                del session.ids[stream]
                e.forget_stream(stream)

    # -- sessions ------------------------------------------------------------------

    async def _session_for(self, sid: str | None) -> _Session | None:
        """The held session ``sid``; for an id not held here (another replica, or an
        earlier process, began it; or it is made up) one that is kept only if the
        upstream accepts a request of it; for ``None`` (an ``initialize``) a new one,
        kept once the upstream answers it with a session id. ``None`` when the session
        ended. Raises :class:`_Full` when there is no room: ``max_sessions`` are held and
        none could be let go (:meth:`_droppable`). It lets go only sessions held over
        ``max_sessions`` (accepted when no room could be made): a request that may never
        be held (a made-up id, an ``initialize`` the upstream refuses) must not cost a
        session within the bound its guard; room is made once the upstream accepts the
        session (:meth:`_accept`)."""
        if sid is not None:
            known, session = self._known(sid)
            if known:
                return session
            if await self._store.session_ended(sid) is not None:
                return None
            # the store's answer took a round trip: a request of the same id may have
            # been filed or held meanwhile, and others counted against max_unaccepted
            known, session = self._known(sid)
            if known:
                return session
        if len(self._sessions) > self.limits.max_sessions and self._room_possible():
            # sessions held over the bound (accepted with no room) go first: let in only
            # with the table within it, held sessions pass it by no more than the
            # sessions not yet accepted at once; asked first, so that a trim is made
            # only when one can be let go
            self._make_room(room=0)
        if not self._room_possible():  # refused before anything is sent upstream
            raise _Full(f"gateway full: {self.limits.max_sessions} sessions in use")
        session = self._new_session(sid)
        self._provisional.add(session)
        if sid is None:
            session.began_here = True
        else:
            self._unaccepted[sid] = session
            session.waiting_as = sid
        return session

    def _known(self, sid: str) -> tuple[bool, _Session | None]:
        """Whether session ``sid`` is held or filed here, and the session that serves a
        request of it (``None``: held and expired); :class:`_Full` when it is neither and
        ``max_unaccepted`` ids are filed. Asked again after every wait before a new
        session is filed, so that requests of one id arriving together share one session
        and no burst of ids passes ``max_unaccepted``."""
        held = self._sessions.get(sid)
        if held is not None:
            self._sessions.move_to_end(sid)
            self._moves += 1
            held.place = self._moves
            return True, (None if held.engine.expired is not None else held)
        waiting = self._unaccepted.get(sid)
        if waiting is not None:
            return True, waiting
        unaccepted = len(self._unaccepted)
        if unaccepted >= self.limits.max_unaccepted:
            raise _Full(f"gateway busy: {unaccepted} sessions not held here have work under way")
        return False, None

    def _unfile(self, session: _Session) -> None:
        """``session`` is counted among the sessions not yet accepted no more (held,
        merged into the held one of its id, or forgotten): it leaves their table by the id
        it was filed under, whatever id the upstream gave it."""
        self._provisional.discard(session)
        sid, session.waiting_as = session.waiting_as, None
        if sid is not None and self._unaccepted.get(sid) is session:
            del self._unaccepted[sid]

    def _forget(self, session: _Session) -> None:
        """Drop a session not held here (its guard, its engine) once its last request
        ended: one for which the upstream accepted no credential (its requests refused,
        or relayed as a stranger's: its guard took no answer and presented no prompt),
        or one merged into the held session of its id (:meth:`_accept`)."""
        self._unfile(session)
        self._close(session)

    @staticmethod
    def _end_streams(session: _Session) -> None:
        """End every stream of ``session`` still open, as the session ended: expired when
        the upstream ended it (a trusted ``404``: the guard fails what is open), closed
        when its client did (a DELETE) or this replica let it go (the streams end without
        a failure). Idempotent: a stream already ended is left alone, so a stream opened
        by a request that was upstream as the session ended is ended the same way."""
        e = session.engine
        if e.expired is not None and e.expired.reason != "deleted":
            e.feed(events.SessionExpired())
        else:
            e.end_session()

    def _close(self, session: _Session) -> None:
        """End a session's engine (its streams, its background IO) and let the results
        kept for it go: every way a session stops being held ends here."""
        session.closed = True
        session.engine.close()
        self._kept.forget(session)
        self._unsure.pop(session, None)

    def _new_session(self, sid: str | None) -> _Session:
        assert self._http is not None and self._tg is not None
        limits = self.limits
        observed = _CountedGuard(
            Guard(clock=time.monotonic, config=self.config),
            self.metrics,
            log_limit=limits.observations,
            retain=limits.remembered,
        )
        engine = SessionIO(
            observed, self._http, self._tg, self.upstream, _BINDING, remembered=limits.remembered
        )
        session = _Session(
            engine,
            bind(httpx2).transport(engine),
            self.id_keys,
            limits.max_credentials,
            self.credential_headers,
        )
        if sid is not None:  # a session another replica (or an earlier process) began
            engine.session = sid
            engine.feed(events.SessionStarted(sid))
        engine.carried = self.credential_headers
        engine.acts_for_clients = True
        # each replica numbers the standalone streams it opens from a point of its own:
        # another replica's fresh GET of the session is never named as one of these
        engine.get_generations = secrets.randbelow(_GENERATIONS)
        engine.trusted = session.trusts
        engine.accepted = session.prove
        engine.vouch = functools.partial(self._vouch, session)
        engine.vouch_opened = functools.partial(self._vouch_opened, session)
        engine.vouch_answer = functools.partial(self._vouch_answer, session)
        engine.max_event = limits.max_event_bytes
        engine.max_pending_refusals = limits.max_pending_refusals
        engine.upstream_slots = anyio.CapacityLimiter(limits.upstream_requests_per_session)
        engine.claim = self._claimer(session)
        engine.on_answer = self._answer_keeper(session)
        engine.on_submitted = self._submission_marker(session)
        engine.changed = functools.partial(self._recheck, session)
        session.last_used = time.monotonic()
        return session

    def _make_room(self, room: int = 1) -> None:
        """Drop the sessions unused past ``session_idle_s`` and, while more than
        ``max_sessions - room`` are held, the least recently used ones, of those that may
        be let go (:meth:`_droppable`): as many as it takes, the table may be over the
        bound (:meth:`_accept`). ``room`` 1 makes room for a session the upstream
        accepted (:meth:`_accept`); 0 only trims the table back to the bound. Only the
        sessions that may be droppable (:meth:`_maybe_droppable`) are looked at, least
        recently used first (:meth:`_oldest_first`), until one is neither idle nor needed
        for the bound: :meth:`_droppable` is never asked of a session found kept and not
        told changed since (:meth:`_recheck`)."""
        now = time.monotonic()
        excess = len(self._sessions) - (self.limits.max_sessions - room)
        going: list[tuple[str, _Session]] = []
        for sid, old in self._oldest_first(self._maybe_droppable(now)):
            if not (now > self._idle_after(old) or len(going) < excess):
                break  # least recently used first: the rest are newer
            if self._still_droppable(old, now):
                going.append((sid, old))
        for sid, old in going:
            del self._sessions[sid]
            self._close(old)

    def _oldest_first(self, sessions: Mapping[_Session, None]) -> Iterator[tuple[str, _Session]]:
        """Held ``sessions``, each with the id it is held under, in the table's order
        (least recently used first): a few of many sorted by :attr:`_Session.place`, the
        others read off the table in one pass, which ends where its reader stops (the
        sessions that may be let go are usually the oldest). The table must not change
        while it is read."""
        if len(sessions) * 8 < len(self._sessions):
            by_id = {held.engine.session or "": held for held in sessions}
            for sid in sorted(by_id, key=lambda each: by_id[each].place):
                if self._sessions.get(sid) is by_id[sid]:  # held under its id, never replaced
                    yield sid, by_id[sid]
            return
        for sid, held in self._sessions.items():
            if held in sessions:
                yield sid, held

    def _room_possible(self) -> bool:
        """Whether :meth:`_make_room` would find room now, letting nothing go: fewer
        than ``max_sessions`` held, or one of them droppable (the table held within the
        bound: :meth:`_session_for` trims it first). :meth:`_droppable` is asked only of
        the sessions that may be droppable (:meth:`_maybe_droppable`), each found kept
        leaving them (:meth:`_still_droppable`): a request refused while nothing changed
        costs no scan of the table, and a session that may be let go is found by the
        very next request. One found droppable stays first, asked first next."""
        if len(self._sessions) < self.limits.max_sessions:
            return True
        now = time.monotonic()
        unsure = self._maybe_droppable(now)
        while unsure:
            if self._still_droppable(next(iter(unsure)), now):
                return True
        return False

    def _maybe_droppable(self, now: float) -> dict[_Session, None]:
        """The held sessions that may be let go at ``now``, for :meth:`_droppable` to
        tell: :attr:`_unsure` (held, or told changed, since last found kept), made every
        held one again (in the table's order) once :attr:`_idle_at` passed, as a session
        kept by a prompt alone may have gone idle. Every other held session is kept."""
        if now > self._idle_at:
            self._unsure = dict.fromkeys(self._sessions.values())
            self._idle_at = math.inf
        return self._unsure

    def _still_droppable(self, session: _Session, now: float) -> bool:
        """Whether ``session``, one of :meth:`_maybe_droppable`'s, may be let go at
        ``now`` (:meth:`_droppable`). One found kept leaves :attr:`_unsure` until told
        changed (:meth:`_recheck`); if a prompt presented here alone keeps it, the time
        it goes idle is noted in :attr:`_idle_at` (the ends of a request and of a
        submission are told, time is not)."""
        if self._droppable(session, now):
            return True
        self._unsure.pop(session, None)
        if session.busy == 0 and session.engine.submissions == 0:
            self._idle_at = min(self._idle_at, self._idle_after(session))
        return False

    def _recheck(self, session: _Session) -> None:
        """What keeps ``session`` may be over (a request of it ended, an answer
        submission of its guard ended, its guard was fed an event: a prompt presented
        may have ended): :meth:`_room_possible` asks :meth:`_droppable` about it again.
        Every change that can make a held session droppable, but time, is told here."""
        if session.held and not session.closed:
            self._unsure[session] = None

    def _idle_after(self, session: _Session) -> float:
        """When ``session`` goes idle: ``session_idle_s`` past its last use (after it,
        a prompt no longer keeps it: :meth:`_droppable`)."""
        return session.last_used + self.limits.session_idle_s

    def _droppable(self, session: _Session, now: float) -> bool:
        """Whether held ``session`` may be let go (its guard, its kept results): nothing
        of it is under way. A request of it in flight, and an answer submission of its
        guard not ended (the client was told ``202``: letting the session go would
        cancel it; a survivor's send of a stored answer counts too), and an answer whose
        mark has not landed (:attr:`_Session.marking`, :attr:`_Session.unmarked`), keep
        it. So does a prompt this replica presented (claimed, its lease
        renewed here) still awaiting its answer, until the session has had no request
        for ``session_idle_s``: its client is gone, and the prompt's lease then lapses.
        Sessions with work under way are bounded as held sessions are (a new one is
        refused ``503`` while none can be let go: :attr:`GatewayLimits.max_sessions`)."""
        e = session.engine
        if session.busy > 0 or e.submissions > 0 or session.marking or session.unmarked:
            return False
        if now > self._idle_after(session):
            return True
        sid = e.session or ""
        return not any(e.guard.state_of((sid, rid)) == "presented" for rid in session.claimed)

    def _hold(self, sid: str, session: _Session) -> None:
        """Hold ``session`` as the most recently used (its :attr:`_Session.place` the
        table's last; :meth:`_room_possible` and :meth:`_make_room` ask about it: it was
        never found kept)."""
        self._sessions[sid] = session
        self._sessions.move_to_end(sid)
        self._moves += 1
        session.place = self._moves
        self._unsure[session] = None

    async def _after(self, session: _Session) -> None:
        """After a request: a session that ended (the server said 404 to credentials it
        had accepted, or the client's DELETE was answered) is recorded as ended in the
        store and no longer held (its streams end); later requests of it are answered
        ``404`` from the store."""
        e = session.engine
        if e.expired is None or not e.session or session.ended_recorded:
            return
        session.ended_recorded = True
        if self._sessions.get(e.session) is session:
            del self._sessions[e.session]
        self._end_streams(session)
        self._close(session)
        try:
            await self._store.end_session(e.session, e.expired.reason)
        except StoreUnavailableError as exc:  # other replicas learn it from the server
            logger.warning("session end not recorded: %s", exc)

    def _claimer(self, session: _Session) -> Claim:
        """The engine's claim: the store's compare-and-set, held under this replica's
        lease. A lost claim whose request has an answer kept in the store (the client
        answered through another replica) is settled as :meth:`_stored_answer` says: the
        person is not asked again, and the answer goes upstream once (this replica's
        guard submits it only when the replica that was to submit it died). Otherwise the
        claim is watched (:meth:`_watch_claim`)."""
        store = self._store

        async def claim(key: RequestKey, stream: str, event_id: str | None) -> bool:
            e = session.engine
            sid = e.session or ""
            ids = session.ids.get(stream)
            lease: dict[str, Any] = {"owner": self.replica, "lease_s": self.limits.lease_s}
            try:
                if ids is not None and ids.last is not None:  # the newest event passed on
                    cursor = Cursor(ids.position, ids.last)
                    name = store_name(stream)
                    won = await store.claim(sid, key[1], stream=name, cursor=cursor, **lease)
                else:
                    won = await store.claim(sid, key[1], **lease)
            except InteractionFailed as err:  # blanked, and its stream fails with err
                self.metrics.blanked("claim-failed")
                self.metrics.failed(err.reason)
                raise
            if won:
                self.metrics.presentations.inc()
                session.claimed.add(key[1])
                return True
            self.metrics.blanked("claimed-elsewhere")
            status = await store.claim_status(sid, key[1])
            if status.answer is None or not await self._stored_answer(session, key, stream, status):
                self._watch(session, key, stream)
            return False

        return claim

    async def _watch_stream_claims(self, args: tuple[_Session, str]) -> None:
        """A stream this replica took over (the client resumed here; another replica
        carried it): watch every prompt another replica claimed on it, as
        :meth:`_watch_claim` does (the stored cursor is past them, so no replay brings
        them here)."""
        session, stream = args
        e = session.engine
        try:
            claimed = await self._store.open_claims(e.session or "", store_name(stream))
        except StoreUnavailableError as exc:
            logger.warning("open claims not read: %s", exc)
            return
        for rid in claimed:
            if rid not in session.claimed:
                self._watch(session, (e.session or "", rid), stream)

    def _watch(self, session: _Session, key: RequestKey, stream: str) -> None:
        """Watch the claim of ``key`` (:meth:`_watch_claim`) unless this session already
        does: each replay that loses the claim and each take-over of its stream asks, and
        one watcher polling the store is enough."""
        if key[1] in session.watching:
            return
        if session.engine.spawn(self._watch_claim, (session, key, stream)):
            session.watching.add(key[1])

    async def _watch_claim(self, args: tuple[_Session, RequestKey, str]) -> None:
        """Watch a request another replica claimed (and so presented) until the client's
        answer in the store is settled (:meth:`_stored_answer`: submitted once, by the
        replica that took it while it lives, else by this one) or the holder's lease
        lapses with no answer: the holder died with the prompt, and the call ends with
        one :class:`~fsm.gateway.store.ClaimLapsedError` (the request is never presented
        twice). Ends early when the request or its stream ends, or the claim is this
        replica's, marked submitted, or gone. Started through :meth:`_watch` only."""
        session, key, stream = args
        try:
            await self._watching(session, key, stream)
        finally:
            session.watching.discard(key[1])

    async def _watching(self, session: _Session, key: RequestKey, stream: str) -> None:
        """The loop of :meth:`_watch_claim`."""
        e = session.engine
        period = self.limits.lease_s / 3
        while True:
            await anyio.sleep(period)
            state = e.guard.state_of(key)
            if state not in (None, "presented") or e.guard.stream_state(stream) in (
                "done",
                "dead",
                None,
            ):
                return
            try:
                status = await self._store.claim_status(e.session or "", key[1])
            except StoreUnavailableError:
                continue
            if status.owner == self.replica:
                return
            if status.answer is not None:
                if await self._stored_answer(session, key, stream, status):
                    return
                continue  # its holder lives: the submission is its, or under way elsewhere
            if status.submitted:  # submitted by a replica that could not keep it ahead
                return
            err: InteractionFailed
            if status.lapsed:
                err = ClaimLapsedError(
                    f"{stream}: request {key[1]!r} was presented through a replica that "
                    f"stopped before its answer arrived (lease {self.limits.lease_s:g} s)",
                    key=key,
                    stream=stream,
                )
            elif not status.claimed:  # the store lost it: presented or not is unknown
                err = StoreStateLostError(
                    f"{stream}: the store no longer holds the claim of request {key[1]!r}, "
                    "which another replica presented",
                    key=key,
                    stream=stream,
                )
            else:
                continue
            e.feed(events.StreamAbandoned(stream, err.reason, str(err)))
            e.failures[stream] = err
            return

    async def _stored_answer(
        self, session: _Session, key: RequestKey, stream: str, status: ClaimStatus
    ) -> bool:
        """Settle the answer ``status`` holds for ``key``, a request another replica
        claimed; whether it is settled (``False``: watch on). A stored answer goes upstream
        from the replica whose client gave it (the holder, or one whose guard was
        replayed the request), or was relayed from one: that replica marks it submitted
        once its submission ended. So: marked, nobody sends it again (a guard that was
        replayed the request records it as answered upstream, so that the origin's
        response resolves it); unmarked while the holder's lease holds, its submission is
        under way or to come, and this replica waits; unmarked once the lease lapsed,
        the holder died before its submission ended, and this replica submits it once it
        took the claim over (:meth:`_take_over`: of every survivor watching it, one wins;
        the others see a live lease again and wait on): through its guard if the request
        was replayed here (which marks it when that ends, the lease renewed meanwhile by
        :meth:`_renew`), else as it is unless this replica relayed it
        (:meth:`_send_stored`, retried as the guard retries; the lease held meanwhile by
        :meth:`_holding`). From the take-over on, the work counts among the session's
        answer submissions: the session is not let go for room meanwhile
        (:meth:`_droppable`). A replica that dies between its POST and its mark
        leaves the answer to be sent again: at least once, never for another client. (A
        claim won without a lease has no holder to wait for, and none to take over.)"""
        e = session.engine
        answer = status.answer
        assert answer is not None
        state = e.guard.state_of(key)
        if status.submitted:
            if state == "presented":
                e.answered_upstream(key, answer, SubmissionResult(202, None), tell=False)
            return True
        if status.owner is not None and not status.lease_lapsed:
            return False
        if state not in ("presented", None) or (state is None and key[1] in e.relayed_answers):
            return True  # answered or relayed here: that submission sends it, and marks it
        # from the take-over's round trip until the send ended, this is an answer
        # submission of the session: letting the session go for room (which cancels its
        # background work, this included) would lose an answer the client was told ``202``
        e.submissions += 1
        try:
            if status.owner is not None and not await self._take_over(session, key):
                return False  # another survivor took it over (or the store failed): watch on
            state = e.guard.state_of(key)  # again: the take-over took a round trip
            if state not in ("presented", None):
                return True  # answered here meanwhile: that submission sends it, and marks it
            if state == "presented":
                session.claimed.add(key[1])  # renewed while its guard submits (_renew)
                e.feed(events.UserAnswered(key, answer))  # the guard's own Submit counts on
                return True
            await self._send_stored(session, key, stream, answer)
            return True
        finally:
            e.submissions -= 1
            e.changed()

    async def _send_stored(
        self, session: _Session, key: RequestKey, stream: str, answer: Mapping[str, Any]
    ) -> None:
        """Send ``answer``, stored for ``key`` (a request this replica's guard never saw,
        whose claim it took over), upstream as it is, and mark it submitted once that
        submission ended: accepted, or failed for good. Each result is judged as the
        guard judges its own submissions (its config's ``classifier``): a retryable one
        is sent again after the guard's backoff (or the server's ``Retry-After``), up to
        ``max_submit_attempts`` in all. The lease is renewed meanwhile (:meth:`_holding`):
        a survivor watching the claim must not take it over while this send is under way.
        Cancelled (the session closed), nothing is marked, and the lease lapses: a
        survivor then sends it."""
        e = session.engine
        cfg = e.guard.config
        body = {"jsonrpc": "2.0", "id": key[1], "result": dict(answer)}
        async with anyio.create_task_group() as tg:  # the guard does not track this one
            tg.start_soon(self._holding, e.session or "", key[1])
            attempts = 0
            while True:
                attempts += 1
                result = await e._post(body, *e.acting_for(stream=stream))
                verdict = cfg.classifier.classify(result)
                if (
                    verdict.outcome is not OutcomeClass.RETRYABLE
                    or attempts >= cfg.max_submit_attempts
                ):
                    break  # accepted, or failed for good
                await anyio.sleep(cfg.resubmit_delay(attempts, verdict.retry_after))
            await self._mark_submitted(session, key)  # marked while the lease still holds
            tg.cancel_scope.cancel()

    async def _take_over(self, session: _Session, key: RequestKey) -> bool:
        """Take the claim of ``key`` over from a holder whose lease lapsed
        (:meth:`StateStore.take_over`): whether this replica now holds it, under a lease of
        its own (which the caller keeps renewed while its submission is under way). Not
        taken when another replica took it first, it was marked, or the store cannot
        answer (logged): a watcher then looks again at its next turn."""
        sid = session.engine.session
        if not sid:
            return False
        try:
            return await self._store.take_over(sid, key[1], self.replica, self.limits.lease_s)
        except StoreUnavailableError as exc:
            logger.warning("claim not taken over: %s", exc)
            return False

    async def _holding(self, sid: str, rid: RequestId) -> None:
        """Renew this replica's lease of ``rid`` every third of the lease until cancelled:
        for a submission its guard does not track (a taken-over answer to a request never
        replayed here, sent as it is), which :meth:`_renew` does not see. The POST may
        take up to the upstream's read timeout, longer than a lease: were the lease let
        lapse meanwhile, another survivor would take the claim over and send it again."""
        period = self.limits.lease_s / 3
        while True:
            await anyio.sleep(period)
            try:
                await self._store.renew(sid, rid, self.replica, self.limits.lease_s)
            except StoreUnavailableError as exc:
                logger.warning("lease not renewed: %s", exc)

    async def _keep_alive(self) -> None:
        """Every third of the lease: renew the lease of every request this replica
        claimed that still awaits its answer, and extend the store record of every held
        session in use since its last extension (a request of it served, or being served:
        an event stream of it open) once ``session_keepalive_s`` passed since then. Held
        sessions only: every session with a proven credential is held (:meth:`_accept`),
        and requests of one id share one session (:meth:`_known`); one without presents
        no prompt (its streams are relayed untracked)."""
        period = self.limits.lease_s / 3
        while not self._halted:
            await anyio.sleep(period)
            await self._keep_alive_once(time.monotonic())

    async def _keep_alive_once(self, now: float) -> None:
        """One pass of :meth:`_keep_alive`, at ``now`` (``time.monotonic``): every lease
        first, then the session records (a store round trip each, which must not hold
        a lease's renewal back)."""
        sessions = list(self._sessions.values())
        for session in sessions:
            await self._renew(session)
        for session in sessions:
            sid = session.engine.session
            used = session.busy > 0 or session.last_used > session.kept_at
            if sid and used and now - session.kept_at >= self.limits.session_keepalive_s:
                session.kept_at = now
                try:
                    await self._store.keep_session(sid)
                except StoreUnavailableError as exc:
                    logger.warning("session record not extended: %s", exc)

    async def _renew(self, session: _Session) -> None:
        """Renew the lease of each request of ``session`` this replica claimed (or took
        over: :meth:`_take_over`) that still awaits its answer, or whose answer's
        submission is under way here (awaiting a retry's backoff, or in flight): while
        the lease holds, a replica watching the claim leaves a stored answer to this one
        (:meth:`_stored_answer`), so it must not lapse before the submission ended and
        was marked: one whose mark is in flight (:attr:`_Session.marking`) is renewed,
        one whose mark failed (:attr:`_Session.unmarked`) is marked again here, its
        lease (if this replica holds it) renewed until the mark lands. Forget the
        others. A renewal refused because another replica holds the claim now (it took
        the client's answer and submits it under its own lease:
        :meth:`StateStore.hold_answer`) is no fault: the request is forgotten here (no
        more renewals) and its claim watched (:meth:`_watch`), so that this replica
        sends the stored answer should that submitter die before its submission ended.
        Nothing of a closed session (let go for room, or ended, before or during the
        pass): its prompts are served here no more."""
        e, sid = session.engine, session.engine.session
        for rid in list(session.unmarked):
            if session.closed or not sid:
                return
            try:
                await self._store.mark_submitted(sid, rid)
            except StoreUnavailableError as exc:
                logger.warning("answer submission not marked, retried: %s", exc)
                try:  # held until the mark lands (a no-op for a lease held elsewhere)
                    await self._store.renew(sid, rid, self.replica, self.limits.lease_s)
                except StoreUnavailableError as err:
                    logger.warning("lease not renewed: %s", err)
                continue
            session.unmarked.discard(rid)
            session.claimed.discard(rid)
            self._recheck(session)  # it kept the session: it may be let go now
        for rid in list(session.claimed):
            if session.closed:
                return
            if rid in session.unmarked:
                continue  # ended, its mark failed: renewed above
            awaiting = rid in session.marking or e.guard.state_of((sid or "", rid)) in _AWAITING
            if not awaiting or not sid:
                session.claimed.discard(rid)
                continue
            try:
                if await self._store.renew(sid, rid, self.replica, self.limits.lease_s):
                    continue
                status = await self._store.claim_status(sid, rid)
            except StoreUnavailableError as exc:
                logger.warning("lease not renewed: %s", exc)
                continue
            if status.owner is None or status.owner == self.replica:
                continue  # this replica's own lease lapsed (kept as it was), or no lease
            # its answer was taken on another replica, which holds the claim while it
            # submits it: renewed here no more; watched, in case that replica dies
            session.claimed.discard(rid)
            stream = e.guard.stream_of((sid, rid))
            if stream is not None:
                self._watch(session, (sid, rid), stream)

    def _answer_keeper(self, session: _Session) -> Any:
        async def keep(key: RequestKey, answer: Mapping[str, Any]) -> None:
            """Write ``answer`` to the store. One this guard never saw (relayed: the
            upstream accepted it and the credentials it came with) is kept only for a
            request some replica claimed, so presented: an answer sent before the server
            asks is never kept to answer the question when it comes (the upstream takes
            such an answer, and drops it). One this guard takes for a request another
            replica claimed (a replay brought it here) is stored with the claim's lease
            handed to this replica in the same step (:meth:`StateStore.hold_answer`),
            whether its holder lives or its lease lapsed: this replica's guard submits
            it under a lease of its own, renewed meanwhile (:meth:`_renew`) and marked
            when the submission ended, so a survivor watching the claim sees a live
            lease, never a stored answer whose holder's lease lapsed while this
            submission is under way; should this replica die, its lease lapses and a
            survivor takes over and sends the answer. The old holder's renewals fail
            from then, and it watches the claim (:meth:`_renew`). A hold whose reply was
            lost (the store unreachable) is renewed all the same: had it not landed, the
            renewal is refused and this replica watches the claim instead. One relayed
            from here whose mark failed (:attr:`_Session.unmarked`) is not kept: it went
            upstream already."""
            sid = session.engine.session
            if not sid:
                return
            handing = False
            try:
                unseen = session.engine.guard.state_of(key) is None
                if unseen and key[1] in session.unmarked:
                    # relayed, its mark not landed (SessionIO.relayed marks first): kept
                    # unmarked, a survivor would send it again once the holder's lease
                    # lapsed; not kept, it finds it marked (once _renew marks it)
                    return
                if unseen and not (await self._store.claim_status(sid, key[1])).claimed:
                    return
                held_here = key[1] in session.claimed  # this replica's claim already
                handing = not (unseen or held_here)  # the hold may land, its reply lost
                if unseen or held_here:
                    await self._store.save_answer(sid, key[1], answer)
                elif await self._store.hold_answer(
                    sid, key[1], answer, self.replica, self.limits.lease_s
                ):
                    session.claimed.add(key[1])  # renewed while its guard submits
            except StoreUnavailableError as exc:  # this replica still submits it
                logger.warning("answer not written ahead: %s", exc)
                if handing:  # renewed in case it landed (else refused: _renew watches)
                    session.claimed.add(key[1])

        return keep

    def _submission_marker(self, session: _Session) -> Callable[[RequestKey], Awaitable[None]]:
        """The engine's :attr:`~SessionIO.on_submitted`: the submission of ``key``'s
        answer from this replica ended (or an answer relayed from here was taken with
        proven credentials), so it is marked submitted in the store."""

        async def mark(key: RequestKey) -> None:
            await self._mark_submitted(session, key)

        return mark

    async def _mark_submitted(self, session: _Session, key: RequestKey) -> None:
        """Mark ``key``'s answer submitted in the store (:meth:`StateStore.mark_submitted`;
        a request never claimed is not marked). Unmarked (the store unreachable), a
        watcher of the claim sends it again once this replica's lease lapses: at least
        once."""
        sid = session.engine.session
        if not sid:
            return
        # until the mark lands, _renew holds the lease (a lease let lapse before it is a
        # survivor's cue to send the answer again) and marks it again if this one
        # failed; the session is kept meanwhile
        session.marking.add(key[1])
        try:
            await self._store.mark_submitted(sid, key[1])
        except StoreUnavailableError as exc:
            logger.warning("answer submission not marked, retried: %s", exc)
            session.unmarked.add(key[1])
        finally:
            session.marking.discard(key[1])
            self._recheck(session)

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._tg is None or self._halted:
            return

        async def run() -> None:
            try:
                await fn(*args)
            except StoreUnavailableError as exc:
                logger.warning("store write failed: %s", exc)
            except Exception:  # contained: a store defect never ends the gateway
                logger.exception("store write failed")
            finally:
                self._writes -= 1
                self._notify()

        self._writes += 1
        self._tg.start_soon(run)

    def _notify(self) -> None:
        """Wake :meth:`drain`: a request or a spawned write ended."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _until(self, done: Callable[[], bool], seconds: float) -> bool:
        """Wait until ``done()`` holds, at most ``seconds``; whether it holds."""
        with anyio.move_on_after(seconds):
            while not done():
                if self._changed is None:
                    self._changed = anyio.Event()
                await self._changed.wait()
        return done()

    async def drain(self, seconds: float) -> int:
        """Drain before a stop: readiness answers ``503`` from now on; the requests being
        served (their event streams included) are given ``seconds`` to end; then each
        still open is ended at its next clean point (an event stream after its last whole
        event: its client sees the stream end and resumes, on another replica, from
        there; a request whose response has not begun gets ``503``), one caught in the
        middle of an event or a body :data:`DRAIN_GRACE_S` later is cut; then the store
        writes they left (each stream's cursor) are given :data:`DRAIN_GRACE_S`. Returns
        the number of requests the bound ended (0: all ended by themselves). At most
        ``seconds + 3 * DRAIN_GRACE_S`` (and the cleanup of a cancelled request).

        It stops nothing else: the server that runs the app stops taking connections
        (``python -m fsm gateway`` does, on ``SIGTERM``, before it drains), and
        :meth:`running` ends the rest when the app shuts down. Requests that arrive while
        it drains are served until the bound passes, then get ``503`` at once."""
        problem = seconds_problem(seconds, positive=False)
        if problem is not None:
            raise ValueError(f"drain: {seconds!r} {problem}")
        self.draining = True
        if await self._until(lambda: not self._flights, seconds):
            ended = 0
        else:
            ended = len(self._flights)
            self._cutting = True
            for flight in list(self._flights):
                flight.end()
            if not await self._until(lambda: not self._flights, DRAIN_GRACE_S):
                for flight in list(self._flights):
                    flight.scope.cancel()
                await self._until(lambda: not self._flights, DRAIN_GRACE_S)
        await self._until(lambda: self._writes == 0, DRAIN_GRACE_S)
        return ended


# --------------------------------------------------------------------------- helpers


def _redacted(url: str) -> str:
    """``url`` without a password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing. The upstream client is shared by sessions: a
    cookie it kept from one session's response would go out with the other sessions'
    requests (the gateway's own resumes and answer submissions, which it builds). The
    upstream's ``Set-Cookie`` reaches the client, whose requests carry it or not."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


_EVENT_ENDS = (b"\n\n", b"\r\r", b"\n\r", b"\r\n\r\n", b"\r\n\n")
"""How a piece that ends an event ends: a line end, then an empty line."""


class _LastEvents:
    """The pieces a tracked stream passed on since the start of the newest piece that
    began at an event boundary: they hold its newest events whole (an event passed on
    in many pieces included), at most ``limit`` bytes (beyond it, nothing is kept until
    the next boundary). What a resume that lost a finished stream's result gets again
    (:func:`_final_event`)."""

    __slots__ = ("_at_boundary", "_pieces", "_size", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pieces: list[bytes] | None = []
        """``None``: over ``limit`` since the last boundary."""
        self._size = 0
        self._at_boundary = True

    def add(self, piece: bytes) -> None:
        if self._at_boundary:
            self._pieces, self._size = [], 0
        self._at_boundary = piece.endswith(_EVENT_ENDS)
        if self._pieces is None:
            return
        self._size += len(piece)
        if self._size > self.limit:
            self._pieces = None
        else:
            self._pieces.append(piece)

    @property
    def at_boundary(self) -> bool:
        """Whether what was passed on ends with a whole event (or nothing was)."""
        return self._at_boundary

    def value(self) -> bytes | None:
        """The newest events passed on whole, or ``None`` (none, or over the limit)."""
        if not self._pieces or not self._at_boundary:
            return None
        return b"".join(self._pieces)


def _final_event(piece: bytes) -> bytes:
    """The last event of ``piece`` (whole events, as passed on): a finished stream's
    response. One read of the upstream can carry several events; a resume that lost the
    result gets the result alone, not the events before it again (a request among them
    would reach the client twice). ``piece`` comes from mid-stream, so a mark it begins
    with is data (the guard read it so), and the response it begins never starts with
    one: an empty comment line goes first (see :class:`GuardedBody`)."""
    events = SseParser(mid_stream=True).feed(piece)
    final = events[-1].raw if events else piece
    return b":\n" + final if final.startswith(BOM[:1]) else final


class _CountedGuard(ObservedGuard):
    """A session's observed guard that also counts, into the gateway's metrics, the
    decisions with actions (never the hot path's, which has none to count): each
    interaction failed, by its reason (a session closed by its client is no failure),
    and each server request passed on blank (the guard did not present it: its
    ``Ignore`` reason, or ``refused``)."""

    def __init__(self, guard: Guard, metrics: GatewayMetrics, **kwargs: Any) -> None:
        super().__init__(guard, **kwargs)
        self._metrics = metrics

    def feed(self, event: events.Event) -> tuple[act.Action, ...]:
        actions = super().feed(event)
        if actions:
            self._count(event, actions)
        return actions

    def _count(self, event: events.Event, actions: tuple[act.Action, ...]) -> None:
        presented, blank = False, "other"
        for a in actions:
            if isinstance(a, act.Fail):
                if a.error.reason != events.SESSION_CLOSED:
                    self._metrics.failed(a.error.reason)
            elif isinstance(a, act.Present):
                presented = True
            elif isinstance(a, act.Refuse):
                blank = "refused"
            elif isinstance(a, act.Ignore) and blank == "other":
                blank = a.reason
        if not presented and isinstance(event, events.SseEvent):
            msg = event.data
            if isinstance(msg, Mapping) and "method" in msg and "id" in msg:
                self._metrics.blanked(blank)


class _Full(Exception):
    """Every held session is busy and ``max_sessions`` are held: no room for another."""


def _source(resp: Any) -> tuple[Any, bytes | None]:
    """What goes to the client for ``resp``: the response whose fields and bytes are
    passed on (the upstream's own for a body forwarded unchanged: its bytes as they came,
    still encoded) and its whole content if it was made here (else ``None``)."""
    body = resp.stream
    if isinstance(body, Passthrough):
        return body.resp, None
    try:
        return resp, resp.content
    except httpx2.ResponseNotRead:
        return resp, None


async def _pieces(resp: Any, content: bytes | None = None) -> AsyncIterator[bytes]:
    """The body of ``resp``: ``content`` if it was made here, else its stream as read."""
    if content is not None:
        yield content
        return
    unyielded = 0
    async for piece in resp.aiter_raw():
        yield piece
        unyielded += len(piece)
        if unyielded >= YIELD_EVERY and not isinstance(resp.stream, GuardedBody):
            unyielded = 0  # a guarded body hands the loop over itself
            await anyio.lowlevel.checkpoint()


class _Flight:
    """A client request being served, as :meth:`Gateway.drain` sees it."""

    __slots__ = ("clean", "complete", "ending", "scope", "sending", "started")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.started = False
        """The response's head was sent."""
        self.clean = True
        """Ending now leaves the client whole messages: before the head; for an event
        stream, after a whole event."""
        self.sending = False
        """A piece of the response is being written."""
        self.ending = False
        """The drain's bound passed: end at the next clean point."""
        self.complete = False
        """The response was sent whole."""

    def end(self) -> None:
        """End now if at a clean point, else at the next one."""
        self.ending = True
        if self.clean and not self.sending and not self.complete:
            self.scope.cancel()


_GENERATIONS = 1 << 31
"""Where a session's standalone generations are numbered from on a replica: a number
below this, drawn at random (two replicas whose numbers land within a session's
generations of each other: about one session in 10**8 that opens a dozen)."""

_AWAITING = frozenset({"presented"}) | SUBMITTING
"""Liveness states of a request this replica claimed whose lease it renews: awaiting its
answer, or its answer's submission not over (a retry awaiting its backoff, or in flight)."""

_FAILED = "fsm_gateway_failed"
"""The extension under which :class:`_Watched` leaves an upstream request's failure."""


class _Watched(httpx2.AsyncBaseTransport):
    """The upstream transport, each failure without a response counted by kind and left
    on its request (``request.extensions[_FAILED]``): the core answers some of them
    itself (a JSON-RPC error with ``200``, a ``202``), and the gateway answers the
    client ``502`` or ``504`` instead."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, metrics: GatewayMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            request.extensions[_FAILED] = exc
            self._metrics.upstream_error(_error_kind(exc))
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


def _error_kind(exc: httpx2.TransportError) -> str:
    """The ``kind`` label of an upstream failure."""
    if isinstance(exc, httpx2.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx2.ConnectError):
        return "connect"
    if isinstance(exc, httpx2.ProtocolError):
        return "protocol"
    if isinstance(exc, httpx2.NetworkError):
        return "network"
    return "other"


def _unreachable(exc: httpx2.TransportError, body: bytes) -> Any:
    """The answer to a request the upstream gave no response to (or one no edge can send
    on: a status outside 200-599): ``504`` when it timed out, else ``502``; a JSON-RPC
    error for the request's id (``null`` when it has none), ``data.reason``
    ``upstream-timeout`` or ``upstream-unreachable``. The message names the failure's
    type only (its text may hold the upstream's address or URL)."""
    timeout = isinstance(exc, httpx2.TimeoutException)
    reason = "upstream-timeout" if timeout else "upstream-unreachable"
    logger.warning("upstream request failed without a response: %s", type(exc).__name__)
    message = f"{reason}: no response from the upstream ({type(exc).__name__})"
    error = _rpc_error(_request_id(body), ENDED_CODE, message, {"reason": reason})
    return _response(504 if timeout else 502, error)


@functools.lru_cache(maxsize=64)
def _listed(connection: bytes) -> frozenset[bytes]:
    """The field names ``Connection`` values, joined as ``connection``, list (lower case)."""
    return frozenset(name.strip().lower() for name in connection.split(b",")) - {b""}


def _hop_by_hop(connection: bytes) -> frozenset[bytes]:
    """The fields not forwarded of a message whose ``Connection`` values, joined, are
    ``connection``: :data:`_HOP_BY_HOP` and the names it lists."""
    return frozenset(name.encode() for name in _HOP_BY_HOP) | _listed(connection)


def _connection(fields: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The values of a message's ``Connection`` fields, joined (lower-case names)."""
    return b",".join(value for name, value in fields if name == b"connection")


def _response_headers(
    raw: list[tuple[bytes, bytes]], tracked: bool, content: bytes | None
) -> list[tuple[bytes, bytes]]:
    """The fields a response goes to the client with (lower-case names): the source's,
    less hop-by-hop ones and the core's own marker; its ``Content-Length`` kept when its
    bytes pass as they came, set when it was made here (``content``), dropped for a
    tracked stream; a ``Date`` added when it has none."""
    fields = [(name.lower(), value) for name, value in raw]
    drop = _hop_by_hop(_connection(fields)) | _LOCAL
    if tracked or content is not None:
        drop = drop | {b"content-length"}
    out = [(name, value) for name, value in fields if name not in drop]
    if content is not None:
        out.append((b"content-length", b"%d" % len(content)))
    if not any(name == b"date" for name, _ in out):
        out.append((b"date", _http_date()))
    return out


_CLAIMANT = "fsm.claimant"
"""The key of a client request's extensions that keeps its credentials' digest."""

_PROBED = "fsm.probed"
"""The key of a client request's extensions that keeps its credentials probe's verdict."""

_LOCAL = frozenset({LOCAL_HEADER.encode()})


def _upstream_headers(headers: Mapping[str, str], scope: Scope) -> list[tuple[str, str]]:
    """The fields a client's request goes upstream with: its own (lower-case names,
    repeated ones joined), less hop-by-hop ones (:data:`_HOP_BY_HOP` and those its
    ``Connection`` names) and those the upstream connection writes (:data:`_REFRAMED`),
    its ``Accept-Encoding`` less the codings the gateway's HTTP library cannot decode
    (:func:`~fsm.adapters._transport.http.decodable_accept`: an event stream in one could
    not be tracked), with the client's address appended to ``X-Forwarded-For`` and an
    element for this hop appended to ``Forwarded`` (RFC 7239: ``for``, ``host``,
    ``proto``). A header the gateway reads is never among those its ``Connection``
    names: :func:`_headers` refused such a request."""
    drop = _hop_by_hop(headers.get("connection", "").encode("latin-1"))
    out = {
        name: value
        for name, value in headers.items()
        if name not in _REFRAMED and name.encode("latin-1") not in drop
    }
    codings = out.get("accept-encoding")
    if codings is not None:  # none at all stays none: the client's headers only
        out["accept-encoding"] = decodable_accept(httpx2, codings)
    client = scope.get("client")
    address = str(client[0]) if client else "unknown"
    xff = out.get("x-forwarded-for")
    out["x-forwarded-for"] = f"{xff}, {address}" if xff else address
    node = f"[{address}]" if ":" in address else address
    element = f"for={_forwarded_value(node)}"
    host = headers.get("host")
    if host:
        element += f";host={_forwarded_value(host)}"
    element += f";proto={_forwarded_value(str(scope.get('scheme') or 'http'))}"
    forwarded = out.get("forwarded")
    out["forwarded"] = f"{forwarded}, {element}" if forwarded else element
    return list(out.items())


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An RFC 9110 token: a ``Forwarded`` value written without quotes."""


def _forwarded_value(value: str) -> str:
    """``value`` as a ``Forwarded`` parameter value: a token, else a quoted string."""
    if _TOKEN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_DATE: list[Any] = [-1, b""]
"""The ``Date`` value of the current second, and that second."""


def _http_date() -> bytes:
    """Now as an HTTP date (RFC 9110 section 5.6.7), made once a second."""
    now = int(time.time())
    if _DATE[0] != now:
        _DATE[0], _DATE[1] = now, formatdate(now, usegmt=True).encode("ascii")
    value: bytes = _DATE[1]
    return value


async def _store_unavailable(
    send: Any,
    method: str,
    headers: Mapping[str, str],
    body: bytes,
    exc: StoreUnavailableError,
    keys: EventIdKeys,
) -> None:
    """Fail closed when the store cannot say whether the session ended: a resume of a
    call's stream (with an id this gateway issued for the session) gets that call's
    ending error (one outcome for it), anything else ``503`` with a JSON-RPC error for
    its request id."""
    value, sid = headers.get("last-event-id"), headers.get("mcp-session-id") or ""
    got = parse_event_id(value, sid, keys) if method == "GET" and value else None
    origin = origin_of(got.stream) if got is not None else None
    if origin is not None:
        ending = encode_event(None, json.dumps(ending_error(origin, exc)))
        await _reply(send, 200, ending, "text/event-stream")
    else:
        await _reply(send, 503, _rpc_error(_request_id(body), ENDED_CODE, str(exc)))


_READ = ("mcp-session-id", "last-event-id", "mcp-protocol-version")
"""Headers the gateway reads itself: visible ASCII, not empty, at most once."""


def _single(credentials: Iterable[str]) -> frozenset[str]:
    """Headers a request may carry at most once, with ``credentials`` its credential
    headers (two would be read differently by the gateway and the upstream), and that
    its ``Connection`` may not name (the gateway would read one the upstream never
    sees)."""
    return frozenset((*_READ, *credentials, "host", "origin"))


_FORWARDABLE = re.compile(rb"[\x20-\x7e\t]*")
"""A header value the upstream connection sends as it came: visible ASCII, spaces and
tabs (obs-text, bytes >= 0x80, is refused: it could not be forwarded byte for byte)."""


def _spaced(name: str, value: str) -> bool:
    """Whether ``value`` holds a space where ``name`` allows none (a ``Last-Event-ID``
    may: an upstream's event id may hold spaces, and the gateway's carries it)."""
    return " " in value and name != "last-event-id"


def _headers(scope: Scope, single: frozenset[str]) -> dict[str, str]:
    """The request's headers, lower-case names; ``ValueError`` (the request gets
    ``400`` before anything is stored or forwarded) for a value with a byte the gateway
    cannot forward as it came (a control character or a byte >= 0x80), a header it reads
    that is empty or not visible ASCII, a repeated header of ``single`` (:func:`_single`),
    or a ``Connection`` that names one (it would be dropped as hop-by-hop:
    the gateway would file the request under a session id, or credentials, the upstream
    never sees). Other repeated headers are joined with ``", "`` (RFC 9110's list
    form)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        if _FORWARDABLE.fullmatch(raw_value) is None:
            raise ValueError(f"{name} holds a byte that cannot be forwarded")
        value = raw_value.decode("ascii")
        if name in _READ and (not value or not value.isprintable() or _spaced(name, value)):
            raise ValueError(f"{name} must be visible ASCII")
        if name in out:
            if name in single:
                raise ValueError(f"{name} given more than once")
            value = f"{out[name]}, {value}"
        out[name] = value
    named = {name.decode() for name in _listed(out.get("connection", "").encode())} & single
    if named:
        raise ValueError(f"connection names {', '.join(sorted(named))}, which must be forwarded")
    return out


async def _read_body(
    receive: Any, headers: Mapping[str, str], limit: int, budget: BodyBudget, peer: str = ""
) -> bytes | None:
    """The whole request body, or ``None`` if it is longer than ``limit`` bytes (a
    declared ``Content-Length`` over it: before any of it is read). The bytes it holds
    are counted in ``budget`` (for ``peer``, the client's address) as they arrive and
    given back when it returns or raises (the caller's timeout included);
    :class:`BodiesFull` (its message says which bound) when a declared length does not
    fit ``budget`` now (before any of the body is read) or the next piece received would
    take it past its limit or past ``peer``'s share; :class:`anyio.EndOfStream` when the
    client disconnects before the body is whole (a cut body is never returned)."""

    def full(n: int) -> BodiesFull:
        if budget.over(n, peer) == "peer":
            return BodiesFull("gateway busy receiving this client's request bodies: retry")
        return BodiesFull("gateway busy receiving request bodies: retry")

    declared = headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > limit:
            return None
        if not budget.fits(int(declared), peer):
            raise full(int(declared))
    data = bytearray()
    taken = 0
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise anyio.EndOfStream
            piece = message.get("body", b"")
            if len(data) + len(piece) > limit:
                return None
            if not budget.take(len(piece), peer):
                raise full(len(piece))
            taken += len(piece)
            data += piece
            if not message.get("more_body", False):
                return bytes(data)
    finally:
        budget.give(taken, peer)


def _json_object(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object, or ``None`` (not JSON, nested deeper than the parser
    recurses, or not an object)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


async def _unless_client_leaves(receive: Any, respond: Callable[[], Awaitable[Any]]) -> Any:
    """``respond()``'s response, or ``None`` if the client disconnects first (its body was
    read whole: ``receive`` has nothing more to give but the disconnect). The work is then
    cancelled, the request upstream with it, as the client's going would end it there: a
    client that left before the response's head can neither read nor resume it, and
    waiting for it held a task, an upstream connection and a place under the edge's
    connection cap for up to the upstream read timeout. A disconnect read here is read
    again by the response's own watch (ASGI repeats ``http.disconnect``)."""
    got: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        async def run() -> None:
            got.append(await respond())
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(run)
    return got[0] if got else None


def _request_id(body: bytes) -> Any:
    """The id of the JSON-RPC message ``body`` holds, for the gateway's own error
    answering it: ``None`` for one that is not a JSON-RPC id (``NaN``, ``Infinity``, a
    float, an array: echoing it would make the error no JSON, or a reply no client
    matches)."""
    message = _json_object(body)
    rid = message.get("id") if message is not None else None
    return rid if valid_id(rid) else None


def _rpc_error(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()


def _response(status: int, body: bytes, ctype: str = "application/json") -> Any:
    return httpx2.Response(status, headers={"content-type": ctype}, content=body)


async def _reply(
    send: Any,
    status: int,
    body: bytes,
    ctype: str = "application/json",
    *,
    close: bool = False,
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """A whole response made here (``extra``: more fields); ``close``: the connection
    ends after it."""
    headers = [
        (b"content-type", ctype.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"date", _http_date()),
        *extra,
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
