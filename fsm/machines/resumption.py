"""The two machines and their product, declared once.

``TRANSPORT`` is transport resumption, one instance per SSE stream (a POST's response
stream bound to its *origin* request, or the standalone GET stream). ``LIVENESS`` is
session liveness, one instance per server-to-client request, keyed by
``(session id, request id)``. ``PRODUCT`` composes them with declared broadcasts and
couplings (see :mod:`fsm.machines.spec`).

Dead, in the sense of the properties P1 and P6, means either terminal failure state of
``LIVENESS``: ``cancelled`` (the server withdrew the request explicitly, so the origin
still owns the outcome) or ``dead`` (the request died without the server saying so, or
its answer was rejected: the interaction cannot complete and must fail once).
"""

from __future__ import annotations

from fsm.machines.spec import Broadcast, MachineSpec, Transition, each, origin_product

_T = Transition

_STREAMING = ("open", "broken", "waiting", "resuming")
TRANSPORT_LIVE = frozenset(_STREAMING)
"""The transport states in which a stream is not over (it may still deliver or resume)."""

TRANSPORT = MachineSpec.documented(
    "transport",
    doc="Transport resumption of one SSE stream (Last-Event-ID).",
    states=(
        ("open", "connection up, events flowing"),
        ("broken", "connection lost, clean or abrupt"),
        ("waiting", "backing off before a resume (honours retry:)"),
        ("resuming", "GET with Last-Event-ID in flight"),
        ("done", "the origin's response arrived"),
        ("dead", "must not be resumed"),
    ),
    initial="open",
    terminal=frozenset({"done", "dead"}),
    transitions=(
        _T("lose", "open", "broken", doc="connection lost, clean or abrupt"),
        _T("lose", "resuming", "broken", doc="resume GET failed or was cut"),
        _T(
            "schedule",
            "broken",
            "waiting",
            guard="cursor known, budget left",
            doc="back off for retry: or the configured delay",
        ),
        _T("resume", "waiting", "resuming", doc="GET with Last-Event-ID = newest id seen"),
        _T("reopen", "resuming", "open", doc="resume accepted, events flow again"),
        *each("complete", _STREAMING, "done", doc="the origin's response arrived"),
        _T(
            "give_up",
            "broken",
            "dead",
            guard="no cursor, budget spent, or not resumable",
            doc="stop resuming",
        ),
        *each("abort", _STREAMING, "dead", doc="a request the origin needs is dead"),
        *each("expire", _STREAMING, "dead", doc="session gone (HTTP 404)"),
        *each("abandon", _STREAMING, "dead", doc="the application stopped following it"),
    ),
)
"""Transport resumption: one instance per SSE stream (``Last-Event-ID`` resumes)."""

LIVENESS_LIVE = frozenset({"new", "presented", "answered", "submitting", "submitted"})
"""The liveness states of a server request that may still be answered."""
LIVENESS_DEAD = frozenset({"cancelled", "dead"})
"""The liveness states of a server request that ended without its answer counting."""

LIVENESS = MachineSpec.documented(
    "liveness",
    doc="Session liveness of one server-to-client request, keyed by (session, request id).",
    states=(
        ("new", "delivered, not yet shown"),
        ("presented", "handed to the user or handler, exactly once"),
        ("answered", "the user's answer is stored"),
        ("submitting", "answer POST in flight"),
        ("submitted", "the transport accepted the answer (202 proves no liveness)"),
        ("resolved", "the origin completed after the answer was submitted"),
        ("cancelled", "the server cancelled it explicitly"),
        ("dead", "died unannounced or its answer was rejected: the interaction fails"),
    ),
    initial="new",
    terminal=frozenset({"resolved", "cancelled", "dead"}),
    transitions=(
        _T(
            "present",
            "new",
            "presented",
            guard="first delivery",
            doc="show it once; record its deadline",
        ),
        _T("answer", "presented", "answered", doc="the user answered"),
        _T(
            "reuse",
            "new",
            "answered",
            guard="its question answered before in this origin call, re-asks left",
            doc="a re-ask under a new id: store the question's answer, never ask the user again",
        ),
        _T(
            "reask",
            "new",
            "dead",
            guard="its question answered before in this origin call, re-asks spent",
            doc="the server keeps asking an answered question: fail once naming the re-ask",
        ),
        _T("submit", "answered", "submitting", doc="POST the stored answer"),
        _T("accept", "submitting", "submitted", doc="200/202: accepted, not proof of liveness"),
        _T(
            "retry",
            "submitting",
            "answered",
            guard="retryable, attempts left",
            doc="5xx/429/connection error: resubmit the same answer, never re-prompt",
        ),
        _T(
            "reject",
            "submitting",
            "dead",
            guard="terminal or attempts spent",
            doc="no such pending request / 400 / 410, or retries exhausted",
        ),
        _T(
            "resubmit",
            "submitted",
            "submitting",
            guard="redelivered with liveness assertion",
            doc="resubmit the stored answer; never ask the user again",
        ),
        *each(
            "complete",
            ("submitting", "submitted"),
            "resolved",
            doc="origin completed after the answer was sent",
        ),
        *each(
            "complete",
            ("new", "presented", "answered"),
            "dead",
            doc="origin completed before the answer was sent",
        ),
        *each("cancel", sorted(LIVENESS_LIVE), "cancelled", doc="notifications/cancelled"),
        *each(
            "stale",
            ("new", "presented", "answered"),
            "dead",
            guard="replayed, no liveness assertion, past deadline",
            doc="the stale rule",
        ),
        *each("orphan", sorted(LIVENESS_LIVE), "dead", doc="the origin's stream is dead"),
        *each("expire", sorted(LIVENESS_LIVE), "dead", doc="session gone (HTTP 404)"),
    ),
)
"""Session liveness: one instance per server-to-client request, keyed ``(session, id)``."""

PRODUCT = origin_product(
    "product",
    "Transport resumption x session liveness, synchronised by the rows below.",
    TRANSPORT,
    TRANSPORT_LIVE,
    frozenset({"dead"}),
    LIVENESS,
    LIVENESS_LIVE,
    completes=(
        "origin_response",
        "the origin's response: stream done, its requests resolved or dead",
    ),
    aborts=(
        "dead_request_aborts_stream",
        "a request the origin needs died: abort with one terminal error",
    ),
    orphans=(
        "dead_stream_orphans_requests",
        "nobody reads the outcome of a dead stream's requests",
    ),
    broadcasts=(
        Broadcast(
            "session_expired",
            "session",
            (("transport", "expire"), ("liveness", "expire")),
            doc="HTTP 404 on the session: every stream and request terminal",
        ),
    ),
)
"""``TRANSPORT`` x ``LIVENESS``, synchronised by the declared broadcasts and couplings."""
