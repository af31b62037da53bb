"""What a client did in a wire scenario, judged by P1-P7: :class:`Verdict`.

The verdict reads only what any client leaves on the wire and with the user, never the
client's own account: the proxy's traffic log (what the client was told, what it sent)
and the scripted user's presentations and answers, merged in the order the proxy saw
them (each presentation is stamped with the proxy log's sequence number). From them
:func:`observations` builds the observations of :mod:`fsm.properties`, and
:class:`fsm.properties.Monitor` judges them: the rules are that module's, and how a
submission's or a resume's HTTP outcome counts is :mod:`fsm.outcomes`' default table.

How the wire maps to observations:

- a ``tools/call`` POST begins an interaction (its stream, named ``call:<rpc id>``);
  the call under test (the first) ends when the client's ``call_tool`` returned or
  raised (:attr:`~fsm.wire.rig.ScenarioResult.ended_seq`);
- every relayed SSE event id is an ``EventSeen`` on its stream (a resume GET belongs to
  the stream its ``Last-Event-ID`` was seen on); a relayed server request is a
  ``Delivered`` (``replayed`` on a resume; ``elicitation/create`` and
  ``sampling/createMessage`` are interactive), a relayed ``notifications/cancelled`` a
  ``Cancelled``; a resume GET is a ``Resumed`` with its cursor;
- a resume that follows a refusal the resume table calls patient (a server still
  holding the old connection) is ``held`` (it spends no budget of the bounded L1);
- a presentation is a ``Presented``, the user's answer an ``Answered``, an answer POST
  (a JSON-RPC result; an error reply answers nothing) a ``Submitted``; a terminal answer
  outcome is a ``Rejected`` (``session`` for a session-scoped row), a session-scoped
  terminal outcome of any other request of the session a ``SessionGone``.

An MRTR scenario's traffic (:data:`~fsm.wire.rig.MRTR_PROTOCOL`) is read in MRTR terms,
by the MRTR world's own mapping (:func:`fsm.worlds.mrtr.round_seen`, ``retry_seen``,
``rejection_seen``): the first ``tools/call`` begins the call (``call:<rpc id>``); an
``InputRequiredResult`` is an event whose id is its ``requestState`` and a delivery of
each question, keyed ``(call, question identity)`` (:func:`fsm.questions.question_id`:
method and canonical params, so a question re-asked under a new round-local key is one
question); a ``tools/call`` echoing ``requestState`` or carrying ``inputResponses`` is a
retry (a submission of each answer under its question's key, then a resume with the
echoed state as cursor); an error reply to a retry that :data:`fsm.mrtr.outcomes.MRTR_CLASSIFIER`
calls terminal is a rejection of the answers it carried. A presentation is matched to
the question on the wire with its message. P6 as the era restates it is judged on the
scenario's clock (:attr:`~fsm.wire.rig.ScenarioResult.question_age_s`): a retry that
carries an answer the user gave later than that age after the question was shown
breaks it (:func:`fsm.worlds.mrtr.late_answer_sent` says why).

Limits: an event the proxy relayed counts as delivered even when an abrupt cut lost it
before the client read it (the proxy cannot see the client's socket buffer); time is
not on the wire, so in the SSE era P6 (the stale rule, which needs the client's
recorded deadline) is not judged; keys are (session id, request id as a string).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fsm.errors import RequestKey
from fsm.mrtr.outcomes import MRTR_CLASSIFIER
from fsm.outcomes import Classifier, OutcomeClass, SubmissionResult
from fsm.properties import (
    PROPERTIES,
    Answered,
    Began,
    Budgets,
    Cancelled,
    Delivered,
    Ended,
    EventSeen,
    Monitor,
    Observation,
    Presented,
    Rejected,
    Resumed,
    SessionGone,
    Submitted,
    Violation,
)
from fsm.questions import question_id
from fsm.wire.proxy import TrafficEvent
from fsm.wire.rig import MRTR_PROTOCOL, Outcome, ScenarioResult
from fsm.worlds.mrtr import late_answer_sent, rejection_seen, retry_seen, round_seen

__all__ = ["INTERACTIVE", "Verdict", "judge", "observations"]

INTERACTIVE = frozenset({"elicitation/create", "sampling/createMessage"})
"""The server request methods that put a question to a person (the others, ``ping`` and
``roots/list``, may be answered again freely)."""


@dataclass(frozen=True)
class Verdict:
    """How a client fared in one scenario.

    ``broken`` maps each property it broke (``"P2"``) to why, once per violation, in
    order; ``violations`` is the same as :class:`fsm.properties.Violation` records.
    ``presentations`` counts presentations per (session id, request id);
    ``answer_statuses`` is each answer POST's HTTP status (or the fault that replaced
    it); ``outcome`` is how the call ended. ``result`` holds everything observed.
    """

    scenario: str
    broken: Mapping[str, tuple[str, ...]]
    violations: tuple[Violation, ...]
    outcome: Outcome
    presentations: Mapping[tuple[str | None, str], int]
    answer_statuses: tuple[int | str | None, ...]
    result: ScenarioResult

    @property
    def passed(self) -> bool:
        """No property broken."""
        return not self.violations

    def summary(self) -> str:
        """A few lines for a person: the verdict, each broken property with its meaning
        and first reason, the presentations and answers, the outcome."""
        head = f"{self.scenario}: " + (
            "passed" if self.passed else "broke " + ", ".join(sorted(self.broken))
        )
        lines = [head]
        for name in sorted(self.broken):
            lines.append(f"  {name} ({PROPERTIES[name]}): {self.broken[name][0]}")
        shown = ", ".join(str(n) for n in self.presentations.values()) or "0"
        lines.append(f"  presented: {shown}; answer POSTs: {list(self.answer_statuses)}")
        o = self.outcome
        ended = (
            f"result {o.text!r}"
            if o.kind == "result"
            else f"{o.kind} {o.code if o.code is not None else ''} {o.text!r}".replace("  ", " ")
        )
        lines.append(f"  outcome: {ended}")
        return "\n".join(lines)


def judge(result: ScenarioResult, budgets: Budgets | None = None) -> Verdict:
    """The verdict of ``result`` (P5 at the end included: a call that never ended);
    ``budgets``: what the monitor assumes of the client (:class:`fsm.properties.Budgets`,
    its defaults when ``None``)."""
    monitor = Monitor(budgets if budgets is not None else Budgets())
    read, late = _read(result)
    for obs in read:
        monitor.observe(obs)
    monitor.finish()
    found = tuple(v for _, _, v in monitor.violations) + tuple(late)
    broken: dict[str, tuple[str, ...]] = {}
    for v in found:
        broken[v.name] = (*broken.get(v.name, ()), v.why)
    return Verdict(
        scenario=result.name,
        broken=broken,
        violations=found,
        outcome=result.outcome,
        presentations=result.presentation_counts,
        answer_statuses=tuple(result.answer_statuses),
        result=result,
    )


def observations(result: ScenarioResult) -> list[Observation]:
    """The observations of ``result``, in the order the proxy saw them (see the module
    docstring for the mapping)."""
    return _read(result)[0]


def _read(result: ScenarioResult) -> tuple[list[Observation], list[Violation]]:
    """The observations of ``result`` and the violations of the MRTR era's P6 (which
    no observation carries: it needs the scenario's clock)."""
    wire: _Wire | _Rounds = _Rounds() if result.protocol == MRTR_PROTOCOL else _Wire()
    timed: list[tuple[float, int, Observation]] = []
    for event in result.traffic:
        for obs in wire.read(event):
            timed.append((event.seq, len(timed), obs))
    for p in result.presentations:
        key = wire.key_of(p.request.session_id, p.request.request_id, p.request.message)
        timed.append((p.seq + 0.5, len(timed), Presented(key, 0.0)))
        if p.answer is not None and p.answered_seq is not None:
            answer: dict[str, Any] = {"action": p.answer.action}
            if p.answer.content is not None:
                answer["content"] = p.answer.content
            timed.append((p.answered_seq + 0.5, len(timed), Answered(key, answer)))
    if wire.call is not None and result.outcome.kind != "pending":
        ended = Ended(wire.call, "completed" if result.outcome.kind == "result" else "failed")
        at = result.ended_seq if result.ended_seq is not None else float("inf")
        timed.append((at + 0.5, len(timed), ended))
    read = [obs for _, _, obs in sorted(timed, key=lambda t: (t[0], t[1]))]
    late: list[Violation] = []
    if isinstance(wire, _Rounds) and result.question_age_s is not None:
        age = result.question_age_s
        given_late = {
            wire.key_of(None, p.request.request_id, p.request.message): p.request.message
            for p in result.presentations
            if p.answered_at is not None and p.answered_at - p.at > age
        }
        for carried in wire.carried.values():
            if sent := [repr(given_late[q]) for q in carried if q in given_late]:
                late.append(Violation("P6", late_answer_sent(sent)))
    return read, late


class _Wire:
    """Reads the proxy log event by event into observations (one pass, bounded by the
    log: the proxy's log is bounded)."""

    def __init__(self) -> None:
        self.call: str | None = None
        self.stream_of_exchange: dict[int, str] = {}
        self.stream_of_event: dict[str, str] = {}
        self.session_of_exchange: dict[int, str] = {}
        self.answer_key: dict[int, tuple[str, str]] = {}
        self.resumes: set[int] = set()
        self.resume_stream: dict[int, str] = {}
        self.patient: set[str] = set()  # streams whose last resume was refused patiently
        self.status: dict[int, int] = {}
        self.body: dict[int, Any] = {}
        self.answers = Classifier()
        self.others = Classifier.for_resumes()

    def key_of(self, session_id: str | None, request_id: str | int, message: str) -> RequestKey:
        """The key of a presentation: (session id, request id)."""
        return (session_id or "", str(request_id))

    def read(self, e: TrafficEvent) -> Sequence[Observation]:
        if e.kind == "request":
            return self._request(e)
        if e.kind == "response" and e.status is not None:
            self.status[e.exchange] = e.status
        elif e.kind == "body":
            self.body[e.exchange] = e.json
        elif e.kind == "sse_event":
            return self._event(e)
        elif e.kind == "end":
            return self._end(e)
        return ()

    def _request(self, e: TrafficEvent) -> Sequence[Observation]:
        sid = e.session_id
        if sid:
            self.session_of_exchange[e.exchange] = sid
        body = e.json if isinstance(e.json, dict) else {}
        if e.method == "GET":
            cursor = e.last_event_id
            if cursor is None:
                self.stream_of_exchange[e.exchange] = f"get:{e.exchange}"
                return ()
            stream = self.stream_of_event.get(cursor, f"get:{e.exchange}")
            self.stream_of_exchange[e.exchange] = stream
            self.resumes.add(e.exchange)
            self.resume_stream[e.exchange] = stream
            held = stream in self.patient
            self.patient.discard(stream)
            return (Resumed(stream, cursor, held),)
        if e.method != "POST":
            return ()
        if body.get("method") == "tools/call":
            interaction = f"call:{body.get('id')}"
            self.stream_of_exchange[e.exchange] = interaction
            if self.call is None:  # the call under test; later ones (pings, probes) are
                self.call = interaction  # the scenario's, not judged for P5
                return (Began(interaction),)
            return ()
        if "method" not in body and "id" in body and isinstance(body.get("result"), Mapping):
            key = (sid or "", str(body["id"]))
            self.answer_key[e.exchange] = key
            return (Submitted(key, body["result"]),)
        return ()  # an error reply (a handler cancelled, a request refused) is no answer

    def _event(self, e: TrafficEvent) -> Sequence[Observation]:
        stream = self.stream_of_exchange.get(e.exchange, f"post:{e.exchange}")
        out: list[Observation] = []
        if e.event_id:
            self.stream_of_event[e.event_id] = stream
        message = _json(e.data)
        sid = self.session_of_exchange.get(e.exchange, "")
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            key = (sid, str(message["id"]))
            replayed = e.exchange in self.resumes
            out.append(Delivered(key, stream, 0.0, replayed, interactive=method in INTERACTIVE))
        elif method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and "requestId" in params:
                out.append(Cancelled((sid, str(params["requestId"]))))
        if e.event_id:
            out.append(EventSeen(stream, e.event_id))
        return out

    def _end(self, e: TrafficEvent) -> Sequence[Observation]:
        status = self.status.get(e.exchange)
        if status is None:
            return ()
        body = self.body.get(e.exchange)
        text = body if isinstance(body, str) else None
        outcome = SubmissionResult(status, body if isinstance(body, Mapping) else None, text=text)
        key = self.answer_key.get(e.exchange)
        if key is not None:
            c = self.answers.classify(outcome)
            if c.outcome is OutcomeClass.TERMINAL:
                return (Rejected(key, session=c.scope == "session"),)
            return ()
        if e.exchange in self.session_of_exchange:
            c = self.others.classify(outcome)
            stream = self.resume_stream.get(e.exchange)
            if c.patient and stream is not None:
                self.patient.add(stream)
            if c.outcome is OutcomeClass.TERMINAL and c.scope == "session":
                return (SessionGone(),)
        return ()


class _Rounds:
    """Reads an MRTR scenario's proxy log event by event into observations (see the
    module docstring; bounded by the log)."""

    def __init__(self) -> None:
        self.call: str | None = None
        self.asked: set[RequestKey] = set()
        self.local: dict[str, RequestKey] = {}  # round-local key of the last round -> question
        self.by_message: dict[str, RequestKey] = {}
        self.exchanges: set[int] = set()  # the call's requests
        self.carried: dict[int, list[RequestKey]] = {}  # a retry's exchange -> its answers
        self.status: dict[int, int] = {}

    def key_of(self, session_id: str | None, request_id: str | int, message: str) -> RequestKey:
        """The key of a presentation: the question on the wire with its message."""
        found = self.by_message.get(message)
        return found if found is not None else (self.call or "", str(request_id))

    def read(self, e: TrafficEvent) -> Sequence[Observation]:
        if e.kind == "request" and e.method == "POST":
            return self._request(e)
        if e.kind == "response" and e.status is not None:
            self.status[e.exchange] = e.status
        elif e.exchange in self.exchanges and e.kind == "body" and isinstance(e.json, dict):
            return self._reply(e.exchange, e.json)
        elif e.exchange in self.exchanges and e.kind == "sse_event":
            return self._reply(e.exchange, _json(e.data))
        return ()

    def _request(self, e: TrafficEvent) -> Sequence[Observation]:
        body = e.json if isinstance(e.json, dict) else {}
        params = body.get("params")
        if body.get("method") != "tools/call" or not isinstance(params, dict):
            return ()
        state, responses = params.get("requestState"), params.get("inputResponses")
        if self.call is None and state is None and responses is None:
            self.call = f"call:{body.get('id')}"
            self.exchanges.add(e.exchange)
            return (Began(self.call),)
        if self.call is None or (state is None and responses is None):
            return ()  # a call of the scenario's own
        self.exchanges.add(e.exchange)
        call = self.call
        given = responses if isinstance(responses, Mapping) else {}
        answers = [
            (self.local.get(str(k), (call, str(k))), a if isinstance(a, Mapping) else {})
            for k, a in given.items()
        ]
        self.carried[e.exchange] = [q for q, _ in answers]
        return retry_seen(call, state if isinstance(state, str) else None, answers)

    def _reply(self, exchange: int, message: Mapping[str, Any]) -> Sequence[Observation]:
        assert self.call is not None
        result = message.get("result")
        if isinstance(result, Mapping) and result.get("resultType") == "input_required":
            asked = result.get("inputRequests")
            questions: list[RequestKey] = []
            for local, request in (asked if isinstance(asked, Mapping) else {}).items():
                if not isinstance(request, Mapping):
                    continue
                params = request.get("params")
                params = params if isinstance(params, Mapping) else None
                q = (self.call, question_id(str(request.get("method")), params))
                self.local[str(local)] = q
                if params is not None and isinstance(params.get("message"), str):
                    self.by_message[params["message"]] = q
                questions.append(q)
            state = result.get("requestState")
            seen = round_seen(self.call, str(state), questions, 0.0, self.asked)
            self.asked.update(questions)
            return seen
        if "error" in message:
            outcome = SubmissionResult(self.status.get(exchange), message)
            if MRTR_CLASSIFIER.classify(outcome).outcome is OutcomeClass.TERMINAL:
                return rejection_seen(self.carried.get(exchange, ()))
        return ()


def _json(data: str) -> dict[str, Any]:
    if not data:
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
