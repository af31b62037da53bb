"""The third machine: the rounds of one multi round-trip (MRTR) call, and its product.

Protocol 2026-07-28 has no server-to-client requests and no SSE resumption. A
``tools/call`` (or ``prompts/get``, ``resources/read``) may answer with an
``InputRequiredResult``: questions (``inputRequests``: key -> ``{method, params}``) and an
opaque ``requestState``. The client answers, then re-sends the same method and params
with ``inputResponses`` and the echoed state under a new JSON-RPC id; the server may ask
again, answer with state only (polling), complete, or reject the state (JSON-RPC -32602,
``invalid_request_state``: expired, minted before a restart, or by another worker).

``ROUNDS`` is one call's rounds, one instance per call. Each distinct *question* of the
call (identity: method plus canonical params, not the round-local key) is one instance
of :data:`fsm.machines.resumption.LIVENESS`, read in MRTR terms:

=============  ==============================================================
liveness row   meaning for a question of an MRTR call
=============  ==============================================================
``present``    first time this question is asked in this call: show it once
``answer``     the user answered; the answer is stored
``submit``     the retry carrying the answer is sent
``accept``     the retry came back with a result, not an error
``retry``      the retry was lost in transit: resend the stored answer
``resubmit``   the server asked the same question again: resubmit the stored
               answer (bounded), never ask the user again
``reject``     the retry carrying the answer was rejected as terminal
               (``invalid_request_state`` and the other terminal rows)
``stale``      the question's client-side age passed before the user answered:
               its state has surely expired, take the prompt down
``complete``   the call completed (resolved if answered, dead otherwise)
``orphan``     the call failed: nobody reads the answer any more
=============  ==============================================================

``MRTR_PRODUCT`` composes the two by declared rows, like :data:`fsm.machines.resumption.PRODUCT`:
the call's result completes the call and its questions; a dead question fails the call
once; a failed call orphans its questions. Its scope ``origin`` is the call.
"""

from __future__ import annotations

from fsm.machines.resumption import LIVENESS, LIVENESS_LIVE
from fsm.machines.spec import MachineSpec, Transition, each, origin_product

_T = Transition

_ONGOING = ("sent", "input_required", "answering", "retrying")
ROUNDS_LIVE = frozenset(_ONGOING)
"""The round states of an MRTR call that is not over."""

ROUNDS = MachineSpec.documented(
    "rounds",
    doc="The rounds of one MRTR call (InputRequiredResult, requestState).",
    states=(
        ("sent", "the request (or a retry under a new id) is in flight"),
        ("input_required", "an InputRequiredResult arrived: its questions are being sorted"),
        ("answering", "new questions are shown, waiting for the user"),
        ("retrying", "every input is ready: backing off before the retry"),
        ("complete", "the final result arrived"),
        ("failed", "one typed error, no retry that could re-prompt"),
    ),
    initial="sent",
    terminal=frozenset({"complete", "failed"}),
    transitions=(
        _T("complete", "sent", "complete", doc="a result with resultType complete (or none)"),
        _T(
            "ask",
            "sent",
            "input_required",
            guard="inputRequests present, rounds left",
            doc="questions and (maybe) state to echo",
        ),
        _T(
            "poll",
            "sent",
            "retrying",
            guard="requestState only, rounds left",
            doc="a state-only round: retry after a growing backoff",
        ),
        _T(
            "lose",
            "sent",
            "retrying",
            guard="retryable, attempts left",
            doc="transport error: resend the same retry, never re-prompt",
        ),
        _T(
            "present",
            "input_required",
            "answering",
            guard="a question not asked before in this call",
            doc="show each new question once",
        ),
        _T(
            "reuse",
            "input_required",
            "retrying",
            guard="every question answered before, re-asks left",
            doc="a re-ask: resubmit the stored answers, never ask the user again",
        ),
        _T("answered", "answering", "retrying", doc="every question of the round has an answer"),
        _T(
            "send",
            "retrying",
            "sent",
            doc="same method and params, inputResponses, the state echoed byte-exact, new id",
        ),
        _T(
            "reject",
            "sent",
            "failed",
            guard="terminal row of the MRTR table",
            doc="invalid_request_state or another terminal error: one typed error",
        ),
        _T(
            "exhaust",
            "sent",
            "failed",
            guard="round cap, resend attempts or malformed result",
            doc="bounded: fail once instead of looping",
        ),
        _T(
            "exhaust",
            "input_required",
            "failed",
            guard="re-ask budget spent",
            doc="the server keeps asking an answered question: fail naming the re-ask",
        ),
        *each("abort", _ONGOING, "failed", doc="a question of the call died (aged out, rejected)"),
        *each("cancel", _ONGOING, "failed", doc="the application cancelled the call"),
    ),
)
"""The rounds of one MRTR call: sent, asked for input, answering, retrying, complete or failed."""

MRTR_PRODUCT = origin_product(
    "mrtr-product",
    "MRTR call rounds x question liveness, synchronised by the rows below.",
    ROUNDS,
    ROUNDS_LIVE,
    frozenset({"failed"}),
    LIVENESS,
    LIVENESS_LIVE,
    completes=(
        "call_result",
        "the final result: the call complete, its questions resolved or dead",
    ),
    aborts=(
        "dead_question_fails_call",
        "a question the call needs died: fail the call with one typed error",
    ),
    orphans=("failed_call_orphans_questions", "nobody reads the answers of a failed call"),
)
"""An MRTR call's rounds times each question's liveness, synchronised by declared rows."""
