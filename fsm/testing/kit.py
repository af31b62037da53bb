"""The conformance machine: a hypothesis ``RuleBasedStateMachine`` that plays server,
network and user against any client speaking the guard's event/action vocabulary.

Contract
--------
* The client under test is built by ``client_factory(clock)`` once per example; ``clock``
  returns the kit's fake time (seconds, only moves forward). The client must have
  ``feed(event) -> Sequence[Action]`` (:class:`ClientUnderTest`).
* The kit feeds ``SessionStarted("s1")`` and opens the standalone GET stream ``"get"``
  first; tool calls open POST streams ``"post:1"``, ``"post:2"``, ... bound to origin
  request ids ``1``, ``2``, ... Server request ids count from 1 (keys ``("s1", id)``).
* What the kit feeds and what the client answers become :mod:`fsm.properties`
  observations, checked by the one shared monitor after every feed. The kit computes
  the observations from its own ground truth (it knows what it replayed, whether it added
  :data:`fsm.sse.guard.LIVE_MARKER`, the method of every request), never from the client.
* A ``ReplayBatch`` is judged as a whole: everything it tells (each delivery, each
  cancellation) is observed before anything the client does in answer to it. A request
  cancelled anywhere in the batch, after it included, is dead for every action the
  client returns for that batch (P1).
* The kit respects the client: it resumes only a stream the client asked to ``Resume``,
  fires a timer only after a ``Wait``, answers only prompts that are showing (presented,
  not withdrawn, not answered yet), completes only answer POSTs the client issued, and
  never feeds a stream whose interaction the client ended.
* Besides single steps the kit plays three *hazard steps*, each a short run of ordinary
  steps that ends at the decision a property judges: a request and its cancellation
  replayed in one batch (P1), an answer rejected as terminal then the stream cut (P3),
  an old event duplicated then the stream cut (P7). They make those hazards frequent in
  short programs; they reach nothing the single steps cannot.
* Teardown *drains*: the network stops failing, every pending POST is accepted, every
  resume succeeds, every timer fires and the server completes every tool call (or, once
  the session is gone, refuses everything with 404). After the drain every interaction
  (each POST stream) must have ended exactly once (P5), within ``drain_rounds`` rounds
  (bounded L1). The budgets of the bounded L1 are :class:`fsm.properties.Budgets`.

Limits
------
* One session (``"s1"``): after it expires the kit only drains. Idempotent requests
  (``ping``) are delivered as ``interactive=False``: presenting them again is allowed.
* The kit's server is truthful about the marker: it adds :data:`~fsm.sse.guard.LIVE_MARKER`
  only to replayed copies of requests it still waits an answer for.
* Event ids are ``e1``, ``e2``, ... (unique in the session). Live events carry
  ``replayed=None`` (the client infers it, as a real one must); same-id duplicates carry
  ``replayed=True``; replays come after ``StreamResumed``, as one ``ReplayBatch`` or
  event by event. Observations read ``None`` as the guard does: replayed iff the
  connection is a resumed one.
* The kit checks the properties of :mod:`fsm.properties`, nothing else: a client that
  never presents anything passes P1-P7 (only P5 at the drain holds it to ending its
  interactions). Pair the kit with your own functional tests.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from hypothesis import HealthCheck, Phase, currently_in_test_context, note, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.errors import RequestKey
from fsm.fields import FieldRule, field_problem
from fsm.outcomes import Classifier, OutcomeClass, SubmissionResult
from fsm.sse.guard import LIVE_MARKER
from fsm.sse.observe import did, told

SESSION = "s1"
GET = "get"


class ClientUnderTest(Protocol):
    """What the kit drives: the guard's own vocabulary (see :mod:`fsm.events`,
    :mod:`fsm.actions`). A client that does IO implements a thin shim to this."""

    def feed(self, event: ev.Event) -> Sequence[act.Action]:
        """Apply one event; return the actions the client takes, in order."""
        ...


ClientFactory = Callable[[Callable[[], float]], ClientUnderTest]
"""``factory(clock) -> client``: build a fresh client that reads time from ``clock``."""


class ConformanceFailure(AssertionError):
    """A property was violated; ``name`` is ``P1``..``P7`` or ``L1``."""

    def __init__(self, name: str, why: str, context: str = "") -> None:
        text = f"{name} violated: {P.PROPERTIES.get(name, name)}\n  why: {why}"
        if context:
            text += f"\n  {context}"
        super().__init__(text)
        self.name, self.why = name, why


_FAILURES: dict[str, type[ConformanceFailure]] = {
    name: type(f"{name}Violation", (ConformanceFailure,), {"__module__": __name__})
    for name in P.PROPERTIES
}


def failure(name: str, why: str, context: str = "") -> ConformanceFailure:
    """The failure for property ``name``: one subclass per property, so hypothesis
    reports each violated property as a distinct bug with its own shortest program."""
    return _FAILURES.get(name, ConformanceFailure)(name, why, context)


def out_of_range(least: Mapping[str, int], values: Mapping[str, object]) -> list[str]:
    """The kits' one check of their bound arguments: ``"name=value (what it must be)"``
    for each of ``values`` refused (in their order). A name in ``least`` is a count: an
    ``int`` (not a ``bool``, never NaN or a float) of at least ``least[name]``
    (:func:`fsm.fields.field_problem`'s ``count``, then the minimum); any other is a
    duration in seconds: a finite number > 0 (``positive``: an ``int`` or a ``float``,
    not a ``bool``, never NaN; nor an infinity, which no TTL a kit states can be: a
    task's ``ttlMs`` is an integer). A bound that passes ``< 0`` but is not a count
    (NaN, 1.5) would make every precondition comparing with it false or fractional: the
    kit would silently test less, or nothing."""
    wrong: list[str] = []
    for name, value in values.items():
        if name in least:
            minimum = least[name]
            if isinstance(value, int) and not field_problem(_COUNT, value) and value >= minimum:
                continue
            what = "" if type(value) is int else "an integer "
            wrong.append(f"{name}={value!r} ({what}>= {minimum})")
        elif field_problem(_DURATION, value) is not None or value == math.inf:
            number = type(value) in (int, float) and value != math.inf
            wrong.append(f"{name}={value!r} ({'> 0' if number else 'a finite number > 0'})")
    return wrong


_COUNT = FieldRule("count")
_DURATION = FieldRule("positive")


# ------------------------------------------------------------------ settings profiles

FAST = "fsm-fast"
"""The default profile: 300 examples of up to 20 steps, stopping at the first violation
and shrinking it (docs/testing.md gives its measured found-rates)."""
THOROUGH = "fsm-thorough"
"""The CI profile: 2,000 examples of up to 100 steps, every violated property reported."""
PROFILES = (FAST, THOROUGH)
"""The kit's profiles, registered with hypothesis when the kit is imported."""
_PROFILE_ENV = "FSM_CONFORMANCE_PROFILE"

# Hypothesis's explain phase replays a failing program with every step varied to annotate
# it; against a stateful client that took minutes for a few comments, so neither profile
# runs it. The fast profile stops at the first violation, shrinks it and reports it (fix
# it, run again); the thorough one keeps searching and reports each violated property.
#
# The fast profile's programs are short and many: the hazard steps (below) reach the
# hazards of P1, P3 and P7 within a few steps, so depth buys little there, while the
# time to a report is mostly shrinking, which grows with the length of the failing
# program. 300 examples of 20 steps cost about what 100 of 40 did.
_PHASES = tuple(p for p in Phase if p is not Phase.explain)
_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much]
settings.register_profile(
    FAST,
    max_examples=300,
    stateful_step_count=20,
    deadline=None,
    phases=_PHASES,
    report_multiple_bugs=False,
    suppress_health_check=_QUIET,
)
settings.register_profile(
    THOROUGH,
    max_examples=2000,
    stateful_step_count=100,
    deadline=None,
    phases=_PHASES,
    suppress_health_check=_QUIET,
)

_chosen: str | None = None  # use_profile's choice: --fsm-profile


def use_profile(name: str | None) -> None:
    """Make ``name`` (one of :data:`PROFILES`) the profile :func:`kit_settings` returns
    when it is not given one, for the rest of this process; ``None`` undoes it. The
    pytest plugin's ``--fsm-profile NAME`` calls it. Raises ``ValueError`` for a name
    that is not one of the kit's profiles."""
    global _chosen
    if name is not None and name not in PROFILES:
        raise ValueError(f"unknown kit profile {name!r}: choose from {', '.join(PROFILES)}")
    _chosen = name


def kit_settings(profile: str | None = None) -> settings:
    """The settings the kit runs with.

    ``profile`` if given, else the one chosen with :func:`use_profile` (pytest's
    ``--fsm-profile``), else ``$FSM_CONFORMANCE_PROFILE``, else the active hypothesis
    profile when it is one of the kit's (``--hypothesis-profile=fsm-thorough``), else
    ``fsm-fast``. An unknown name raises hypothesis's ``InvalidArgument``.
    """
    name = profile or _chosen or os.environ.get(_PROFILE_ENV)
    if name is None:
        current = getattr(settings, "_current_profile", None)
        name = current if current in PROFILES else FAST
    return settings.get_profile(name)


# ------------------------------------------------------------------ the kit's world

INTERACTIVE = ("elicitation/create", "sampling/createMessage")
IDEMPOTENT = ("ping",)
METHODS = ("elicitation/create", "elicitation/create", "sampling/createMessage", "ping")

NO_SUCH_REQUEST = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32602, "message": "Request not found"},
}

OUTCOMES: dict[str, SubmissionResult] = {
    "202": SubmissionResult(202),
    "200": SubmissionResult(200, {"jsonrpc": "2.0", "result": {}}),
    "404-session": SubmissionResult(404),
    "400": SubmissionResult(400),
    "410": SubmissionResult(410),
    "500-no-such-request": SubmissionResult(500, NO_SUCH_REQUEST),
    "500": SubmissionResult(500),
    "503": SubmissionResult(503),
    "429-retry-after": SubmissionResult(429, retry_after=2.0),
    "transport-error": SubmissionResult(None, error="ConnectError"),
}
"""Every class of answer-POST outcome the kit plays (keys are what the program prints)."""

REJECTIONS = tuple(
    name
    for name, result in OUTCOMES.items()
    if (verdict := Classifier().classify(result)).outcome is OutcomeClass.TERMINAL
    and verdict.scope == "request"
)
"""The answer outcomes the default table judges terminal for the request alone (400,
410, HTTP 500 with JSON-RPC "Request not found"): what the P3 hazard step plays."""

PROGRESS: dict[str, Any] = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progress": 1},
}

RESUME_OUTCOMES = (
    "ok-batch",
    "ok-events",
    "ok-batch",
    "ok-from-start",
    "404",
    "405",
    "500",
    "503",
    "error",
)
"""``ok-*`` replay after the cursor (one batch, or event by event); ``ok-from-start``
replays the whole buffer (a server that lost the cursor); the rest refuse the GET."""


@dataclass
class _SrvRequest:
    rid: int
    stream: str
    method: str
    live: bool = True  # the server still waits for an answer
    delivered: bool = False  # the client saw at least one copy


@dataclass
class _Stream:
    name: str
    origin: int | None
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # replay buffer
    delivered: list[str] = field(default_factory=list)  # event ids the client was sent
    conn: str = "open"  # open | down | finished (server closed it) | closed (client ended)
    resumed_conn: bool = False
    wait: float | None = None  # client asked Wait(delay)
    resume: str | None = None  # client asked Resume(cursor)
    origin_done: bool = False  # the server answered the origin
    ended: bool = False  # the client ended the interaction


def _request_payload(r: _SrvRequest, marker: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"message": f"question {r.rid}"}
    if marker:
        params["_meta"] = {LIVE_MARKER: True}
    return {"jsonrpc": "2.0", "id": r.rid, "method": r.method, "params": params}


def _number(event_id: str) -> int:
    """The kit's event ids are ``e1``, ``e2``, ...: their order is the session's."""
    return int(event_id[1:])


def _answer(key: RequestKey) -> dict[str, Any]:
    return {"action": "accept", "content": {"answer": f"answer to {key[1]}"}}


class ConformanceMachine(RuleBasedStateMachine):
    """The kit's state machine. Use :func:`conformance_machine` to bind a client."""

    client_factory: ClassVar[ClientFactory | None] = None
    budgets: ClassVar[P.Budgets] = P.Budgets()
    classifier: ClassVar[Classifier] = Classifier()
    max_tool_calls: ClassVar[int] = 3
    max_requests: ClassVar[int] = 6
    drain_rounds: ClassVar[int] = 60
    reject_get_answers: ClassVar[bool] = True
    checked: ClassVar[frozenset[str]] = frozenset(P.PROPERTIES)
    coverage: ClassVar[Counter[str] | None] = None

    def __init__(self) -> None:
        super().__init__()
        factory = type(self).client_factory
        if factory is None:
            raise TypeError("bind a client with conformance_machine(client_factory)")
        self.now = 0.0
        self.client = factory(lambda: self.now)
        self.monitor = P.Monitor(self.budgets)
        self.reached: Counter[str] = Counter()
        self.streams: dict[str, _Stream] = {}
        self.requests: dict[int, _SrvRequest] = {}
        self.session_alive = True
        self.showing: set[RequestKey] = set()
        self.answered: set[RequestKey] = set()
        self.posts: dict[RequestKey, list[act.Submit]] = {}
        self.steps = 0
        self.next_eid = 0
        self.busy = False  # a feed raised: teardown must not drain
        self.feed(ev.SessionStarted(SESSION))
        self.streams[GET] = _Stream(GET, None)
        self.feed(ev.StreamOpened(GET))
        self._prime(self.streams[GET])

    # ---------------------------------------------------------------- plumbing

    def feed(self, event: ev.Event) -> tuple[act.Action, ...]:
        """Feed ``event``: observe what the client was told and did, check P1-P7/L1."""
        self.busy = True
        told = self._told(event)
        actions = tuple(self.client.feed(event))
        if self._noting():
            note(f"  {event!r}\n    -> {list(actions)!r}")
        for obs in told:
            self._observe(obs, event, actions)
        for action in actions:
            for obs in self._did(action):
                self._observe(obs, event, actions)
        self.busy = False
        return actions

    @staticmethod
    def _noting() -> bool:
        """Whether notes are shown: only while replaying the final (failing) example."""
        return currently_in_test_context() and bool(
            getattr(current_build_context(), "is_final", True)
        )

    def _note(self, text: str) -> None:
        """Add to the failing example's transcript (a no-op outside a hypothesis test)."""
        if self._noting():
            note(text)

    def _observe(self, obs: P.Observation, event: ev.Event, actions: Sequence[act.Action]) -> None:
        bad = [v for v in self.monitor.observe(obs) if v.name in self.checked]
        if bad:
            v = bad[0]
            raise failure(
                v.name, v.why, f"while feeding {event!r}\n  the client answered {list(actions)!r}"
            )

    def _hit(self, what: str) -> None:
        self.reached[what] += 1
        if self.coverage is not None:
            self.coverage[what] += 1

    def _method(self, rid: object) -> str | None:
        r = self.requests.get(rid) if isinstance(rid, int) else None
        return r.method if r is not None else None

    def _told(self, event: ev.Event) -> list[P.Observation]:
        return told(
            event,
            session=SESSION,
            now=self.now,
            replayed=lambda stream: self.streams[stream].resumed_conn,
            idempotent=IDEMPOTENT,
            classifier=self.classifier,
        )

    def _did(self, a: act.Action) -> list[P.Observation]:
        """Book-keep the client's action; its observations come from :func:`fsm.sse.observe.did`."""
        if isinstance(a, act.Present):
            self._hit("present")
            if self._method(a.key[1]) not in IDEMPOTENT:  # pings are answered by the client
                self.showing.add(a.key)
        elif isinstance(a, act.Withdraw):
            self._hit("withdraw")
            self._hit(f"withdraw:{a.reason}")
            self.showing.discard(a.key)
        elif isinstance(a, act.Submit):
            self._hit("submit")
            if a.attempt > 1:
                self._hit("resubmit")
            self.posts.setdefault(a.key, []).append(a)
        elif isinstance(a, act.Resume):
            self._hit("resume")
            s = self.streams.get(a.stream)
            if s is not None:
                s.resume, s.wait = a.cursor, None
        elif isinstance(a, act.Wait):
            self._hit("wait")
            s = self.streams.get(a.stream)
            if s is not None:
                s.wait = max(0.0, a.delay_s)
        elif isinstance(a, act.Fail | act.Complete):
            self._hit("complete" if isinstance(a, act.Complete) else "fail")
            if isinstance(a, act.Fail):
                self._hit(f"fail:{a.error.reason}")
                if a.error.key is not None:
                    self.showing.discard(a.error.key)
            s = self.streams.get(a.interaction)
            if s is not None:
                s.ended, s.conn, s.wait, s.resume = True, "closed", None, None
        else:
            self._hit(f"{type(a).__name__.lower()}:{getattr(a, 'reason', '')}")
        return did(a, now=self.now)

    # ------------------------------------------------------------- server side

    def _eid(self) -> str:
        self.next_eid += 1
        return f"e{self.next_eid}"

    def _emit(self, s: _Stream, payload: dict[str, Any]) -> None:
        """The server writes an event to ``s``: buffered, and sent if connected."""
        if s.conn in ("closed", "finished"):
            return
        eid = self._eid()
        s.log.append((eid, payload))
        if s.conn == "open":
            s.delivered.append(eid)
            self.feed(ev.SseEvent(s.name, payload, eid))
            self._after_delivery(s, [payload])

    def _after_delivery(self, s: _Stream, payloads: Sequence[Mapping[str, Any]]) -> None:
        for p in payloads:
            if "method" in p and "id" in p and isinstance(p["id"], int):
                r = self.requests.get(p["id"])
                if r is not None:
                    r.delivered = True
            if "result" in p and s.conn == "open":
                s.conn = "finished"  # the response ends the POST's SSE stream
                s.wait = s.resume = None

    def _post_streams(self) -> list[_Stream]:
        return [s for s in self.streams.values() if s.origin is not None]

    def _can_send_on(self) -> list[_Stream]:
        return [
            s
            for s in self.streams.values()
            if s.conn not in ("closed", "finished") and not s.origin_done
        ]

    def _open(self) -> list[_Stream]:
        return [s for s in self.streams.values() if s.conn == "open"]

    def _waiting(self) -> list[_Stream]:
        return [s for s in self.streams.values() if s.wait is not None and s.conn == "down"]

    def _resuming(self) -> list[_Stream]:
        return [s for s in self.streams.values() if s.resume is not None and s.conn == "down"]

    def _live_server_requests(self) -> list[_SrvRequest]:
        return [r for r in self.requests.values() if r.live and r.method not in IDEMPOTENT]

    def _duplicates(self) -> list[tuple[_Stream, str, dict[str, Any]]]:
        out = []
        for s in self._open():
            sent = set(s.delivered)
            out += [(s, eid, p) for eid, p in s.log if eid in sent and "id" in p and "method" in p]
        return out

    def _kill_session(self) -> None:
        self.session_alive = False
        for r in self.requests.values():
            r.live = False

    def _finish_origin(self, s: _Stream, how: str) -> None:
        s.origin_done = True
        for r in self.requests.values():
            if r.stream == s.name:
                r.live = False
        if how == "json":
            s.conn = "finished" if s.conn == "open" else s.conn
            self.feed(ev.OriginResponse(s.name))
        else:
            self._emit(s, {"jsonrpc": "2.0", "id": s.origin, "result": {"content": []}})

    def _resume_answer(self, s: _Stream, outcome: str, marker: bool) -> None:
        cursor = s.resume
        assert cursor is not None
        s.resume = None
        if not self.session_alive:
            outcome = "404"
        if outcome.startswith("ok"):
            s.conn, s.resumed_conn = "open", True
            self.feed(ev.StreamResumed(s.name))
            ids = [eid for eid, _ in s.log]
            start = ids.index(cursor) + 1 if cursor in ids and outcome != "ok-from-start" else 0
            items = []
            for eid, p in s.log[start:]:
                r = self.requests.get(p["id"]) if "method" in p and "id" in p else None
                if r is not None and marker and r.live:
                    p = _request_payload(r, marker=True)
                    self._hit("marker")
                items.append(ev.SseEvent(s.name, p or "", eid))
                s.delivered.append(eid)
            if not items:
                return
            self._hit("replay")
            if outcome in ("ok-batch", "ok-from-start") and s.conn == "open":
                self._hit("replay-batch")
                datas = [i.data for i in items if isinstance(i.data, Mapping)]
                if any("id" in d and "method" in d for d in datas) and any(
                    d.get("method") == "notifications/cancelled" for d in datas
                ):
                    self._hit("cancel-in-batch")
                self.feed(ev.ReplayBatch(s.name, tuple(items)))
                self._after_delivery(s, [i.data for i in items if isinstance(i.data, Mapping)])
            else:
                for i in items:
                    if s.conn != "open":
                        break
                    self.feed(i)
                    if isinstance(i.data, Mapping):
                        self._after_delivery(s, [i.data])
            return
        if outcome == "error":
            self.feed(ev.ResumeRefused(s.name, error="ConnectError"))
            return
        status = int(outcome)
        if status == 404:
            self._kill_session()
            self._hit("resume-404")
        self.feed(ev.ResumeRefused(s.name, status=status))

    def _send_request(self, s: _Stream, method: str) -> _SrvRequest:
        r = _SrvRequest(len(self.requests) + 1, s.name, method)
        self.requests[r.rid] = r
        self._emit(s, _request_payload(r))
        return r

    def _give_up(self, r: _SrvRequest, cancel: bool) -> None:
        """The server stops waiting for ``r``: silently, or with notifications/cancelled."""
        r.live = False
        if cancel:
            self._hit("cancel")
            self._emit(
                self.streams[r.stream],
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": r.rid, "reason": "deadline"},
                },
            )

    def _duplicate(self, s: _Stream, eid: str, payload: dict[str, Any], marker: bool) -> None:
        r = self.requests[payload["id"]]
        if marker and r.live:
            payload = _request_payload(r, marker=True)
            self._hit("marker")
        self._hit("duplicate")
        self.feed(ev.SseEvent(s.name, payload, eid, replayed=True))

    def _cut(self, s: _Stream, clean: bool) -> None:
        s.conn, s.resumed_conn = "down", False
        self._hit("cut-clean" if clean else "cut-abrupt")
        self.feed(ev.StreamLost(s.name, clean))

    def _fire_timer(self, s: _Stream) -> None:
        assert s.wait is not None
        self.now += s.wait
        s.wait = None
        self.feed(ev.TimerFired(s.name))

    def _next_resume(self, s: _Stream) -> None:
        """After a cut: the backoff the client asked for elapses (if it asked)."""
        if s.wait is not None and s.conn == "down":
            self._fire_timer(s)

    def _post_outcome(self, key: RequestKey, outcome: str) -> None:
        pending = self.posts[key]
        submit = pending.pop(0)
        if not pending:
            del self.posts[key]
        if not self.session_alive:
            outcome = "404-session"
        self.now += max(0.0, submit.delay_s)
        r = self.requests.get(key[1]) if isinstance(key[1], int) else None
        if not self.reject_get_answers and r is not None and r.stream == GET:
            verdict = self.classifier.classify(OUTCOMES[outcome])
            if verdict.outcome is OutcomeClass.TERMINAL and verdict.scope == "request":
                self._note(
                    f"  (answer on {GET}: {outcome} replaced by 202, reject_get_answers=False)"
                )
                outcome = "202"
        result = OUTCOMES[outcome]
        verdict = self.classifier.classify(result)
        self._hit(f"post:{verdict.outcome.value}")
        if verdict.outcome is OutcomeClass.TERMINAL and verdict.scope == "session":
            self._kill_session()
        elif r is not None and verdict.outcome is not OutcomeClass.RETRYABLE:
            r.live = False  # accepted (answered) or refused: the server waits no more
        self.feed(ev.SubmissionOutcome(key, result))

    # ------------------------------------------------------------------- rules

    def _prime(self, s: _Stream) -> None:
        """A priming event: an event id with empty data (2025-11-25 servers send one)."""
        eid = self._eid()
        s.log.append((eid, {}))
        s.delivered.append(eid)
        self.feed(ev.SseEvent(s.name, "", eid))

    @rule(prime=st.sampled_from((True, True, False)))
    @precondition(
        lambda self: self.session_alive and len(self._post_streams()) < self.max_tool_calls
    )
    def open_tool_call(self, prime: bool) -> None:
        """The user starts a tool call: a POST whose response is an SSE stream, primed
        with an event id (or not: then an early cut leaves nothing to resume from)."""
        self._open_call(prime)

    def _open_call(self, prime: bool) -> _Stream:
        origin = len(self._post_streams()) + 1
        name = f"post:{origin}"
        s = self.streams[name] = _Stream(name, origin)
        self.feed(ev.StreamOpened(name, origin=origin))
        if prime:
            self._prime(s)
        return s

    @rule(pick=st.integers(0, 3), method=st.sampled_from(METHODS))
    @precondition(
        lambda self: (
            self.session_alive
            and len(self.requests) < self.max_requests
            and bool(self._can_send_on())
        )
    )
    def server_sends_request(self, pick: int, method: str) -> None:
        """The server sends a request on a stream (buffered if the stream is down)."""
        cands = self._can_send_on()
        self._send_request(cands[pick % len(cands)], method)

    @rule(pick=st.integers(0, 3))
    @precondition(lambda self: self.session_alive and bool(self._can_send_on()))
    def server_sends_progress(self, pick: int) -> None:
        """A progress notification: a new event id (progress for the resume budget)."""
        cands = self._can_send_on()
        s = cands[pick % len(cands)]
        self._emit(s, PROGRESS)

    @rule(pick=st.integers(0, 7), marker=st.booleans())
    @precondition(lambda self: self.session_alive and bool(self._duplicates()))
    def duplicate_delivery(self, pick: int, marker: bool) -> None:
        """The same request event again on a connected stream (same event id), with the
        liveness marker when ``marker`` and the server still waits for it."""
        cands = self._duplicates()
        self._duplicate(*cands[pick % len(cands)], marker)

    @rule(pick=st.integers(0, 7), cancel=st.booleans())
    @precondition(lambda self: bool(self._live_server_requests()))
    def server_deadline_fires(self, pick: int, cancel: bool) -> None:
        """The server gives up on a request: silently, or with notifications/cancelled."""
        cands = self._live_server_requests()
        self._give_up(cands[pick % len(cands)], cancel)

    @rule(pick=st.integers(0, 7))
    @precondition(lambda self: any(r.live and r.delivered for r in self.requests.values()))
    def liveness_asserted(self, pick: int) -> None:
        """An out-of-band liveness assertion for a request the server still waits for."""
        cands = [r for r in self._live_server_requests() if r.delivered]
        if cands:
            self.feed(ev.LivenessAsserted((SESSION, cands[pick % len(cands)].rid)))

    @rule(big=st.booleans())
    def clock_passes(self, big: bool) -> None:
        """The client's clock moves: a little, or past every recorded deadline."""
        self.now += self.budgets.ttl + 1.0 if big else 5.0

    @rule(pick=st.integers(0, 3), clean=st.booleans())
    @precondition(lambda self: bool(self._open()))
    def cut(self, pick: int, clean: bool) -> None:
        """The connection of a stream ends, cleanly or abruptly."""
        cands = self._open()
        self._cut(cands[pick % len(cands)], clean)

    @rule(pick=st.integers(0, 3))
    @precondition(lambda self: bool(self._waiting()))
    def timer_fires(self, pick: int) -> None:
        """The backoff the client asked for elapses (the clock moves by its delay)."""
        cands = self._waiting()
        self._fire_timer(cands[pick % len(cands)])

    @rule(pick=st.integers(0, 3), outcome=st.sampled_from(RESUME_OUTCOMES), marker=st.booleans())
    @precondition(lambda self: self.session_alive and bool(self._resuming()))
    def resume_answered(self, pick: int, outcome: str, marker: bool) -> None:
        """The resume GET the client asked for: accepted (replay after the cursor, as a
        batch or event by event, with the marker on live requests when ``marker``) or
        refused (404 session gone, 405 not resumable, 5xx, connection error)."""
        cands = self._resuming()
        self._resume_answer(cands[pick % len(cands)], outcome, marker)

    @rule(pick=st.integers(0, 3))
    @precondition(lambda self: not self.session_alive and bool(self._resuming()))
    def resume_refused_session_gone(self, pick: int) -> None:
        """A resume GET after the session expired: HTTP 404."""
        cands = self._resuming()
        self._resume_answer(cands[pick % len(cands)], "404", False)

    @rule(pick=st.integers(0, 7))
    @precondition(lambda self: bool(self.showing - self.answered))
    def user_answers(self, pick: int) -> None:
        """The user answers a prompt that is showing."""
        cands = sorted(self.showing - self.answered, key=repr)
        key = cands[pick % len(cands)]
        self.answered.add(key)
        self.showing.discard(key)
        self.feed(ev.UserAnswered(key, _answer(key)))

    @rule(
        pick=st.integers(0, 7),
        outcome=st.sampled_from(["202", "202", "200", *OUTCOMES]),
    )
    @precondition(lambda self: self.session_alive and bool(self.posts))
    def answer_post_returns(self, pick: int, outcome: str) -> None:
        """An answer POST the client issued comes back (after its ``delay_s``)."""
        cands = sorted(self.posts, key=repr)
        self._post_outcome(cands[pick % len(cands)], outcome)

    @rule(pick=st.integers(0, 7))
    @precondition(lambda self: not self.session_alive and bool(self.posts))
    def answer_post_refused_session_gone(self, pick: int) -> None:
        """An answer POST comes back after the session expired: HTTP 404."""
        cands = sorted(self.posts, key=repr)
        self._post_outcome(cands[pick % len(cands)], "404-session")

    @rule(pick=st.integers(0, 3), early=st.booleans(), json=st.booleans())
    @precondition(
        lambda self: (
            self.session_alive
            and any(not s.origin_done and not s.ended for s in self._post_streams())
        )
    )
    def server_completes_tool_call(self, pick: int, early: bool, json: bool) -> None:
        """The origin's response: on the SSE stream (buffered if down) or as a plain JSON
        response (``json``). Unless ``early``, only a call none of whose requests the
        server still waits for."""
        cands = [s for s in self._post_streams() if not s.origin_done and not s.ended]
        if not early:
            waiting = {r.stream for r in self._live_server_requests()}
            cands = [s for s in cands if s.name not in waiting] or cands
        s = cands[pick % len(cands)]
        self._hit("origin-early" if early else "origin")
        self._finish_origin(s, "json" if json and s.conn == "open" else "sse")

    @rule(when=st.sampled_from(("now", *("later",) * 7)))
    @precondition(lambda self: self.session_alive)
    def session_expires(self, when: str) -> None:
        """The server reaps the session; the client sees HTTP 404. (``later`` does
        nothing: it makes this absorbing step rarer.)"""
        if when != "now":
            return
        self._kill_session()
        self._hit("session-expired")
        self.feed(ev.SessionExpired())

    # ------------------------------------------------------------ hazard steps
    #
    # Each hazard step puts what the client is told next to the decision that must
    # change because of it, in one step: a violation of P1, P3 or P7 needs little else (a
    # failing program shrinks to the hazard step and the one step it may need first,
    # though hypothesis's shrinker sometimes leaves a few idle ``clock_passes`` in).
    # Every part is an ordinary step of the kit (the same bookkeeping, the same respect
    # for the client: a timer fires only after its Wait, a resume is answered only after
    # its Resume), so a hazard step reaches nothing the other rules cannot; it makes the
    # juxtaposition likely instead of rare. Apart, the parts are seldom adjacent in a
    # random program, and other steps come between (the origin completing, the prompt
    # answered and accepted first, another stream cut) that take the decision away.

    @rule(
        pick=st.integers(0, 3),
        method=st.sampled_from(INTERACTIVE),
        clean=st.booleans(),
        replay=st.sampled_from(("ok-batch", "ok-from-start")),
    )
    @precondition(
        lambda self: (
            self.session_alive
            and len(self.requests) < self.max_requests
            and bool(self._can_send_on())
        )
    )
    def request_cancelled_within_a_replay(
        self, pick: int, method: str, clean: bool, replay: str
    ) -> None:
        """Hazard (P1, the batch rule): while a stream is down the server sends a request
        and cancels it; the client's next resume is answered with one ``ReplayBatch``
        holding both, the request before its cancellation. In order: the stream is cut
        (if connected), both are buffered, the client's backoff elapses, its resume is
        answered (``replay``: after the cursor, or the whole buffer)."""
        cands = self._can_send_on()
        s = cands[pick % len(cands)]
        if s.conn == "open":
            self._cut(s, clean)
        if s.conn != "down":  # the client ended the interaction at the cut
            return
        self._hit("hazard:cancel-in-replay")
        self._give_up(self._send_request(s, method), cancel=True)
        self._next_resume(s)
        if s.resume is not None and s.conn == "down":
            self._resume_answer(s, replay, marker=False)

    @rule(
        pick=st.integers(0, 7),
        method=st.sampled_from(INTERACTIVE),
        outcome=st.sampled_from(REJECTIONS),
        clean=st.booleans(),
    )
    @precondition(
        lambda self: (
            self.session_alive
            and bool(
                self._rejectable()
                or (
                    len(self.requests) < self.max_requests
                    and (self._calls_open() or len(self._post_streams()) < self.max_tool_calls)
                )
            )
        )
    )
    def answer_rejected_then_cut(self, pick: int, method: str, outcome: str, clean: bool) -> None:
        """Hazard (P3): the answer to a request on a running tool call's stream comes back
        with an outcome the default table judges terminal for that request
        (``REJECTIONS``: 400, 410, HTTP 500 with JSON-RPC "Request not found"), then the
        connection of that stream ends and the client's backoff elapses: the stream of an
        interaction must not be resumed after that. The request is one whose answer is
        pending or whose prompt is showing; if there is none, the server sends one
        (``method``) on a connected tool call (the user starts a primed one if none is
        running), and the user answers it if the client presents it."""
        cands = self._rejectable()
        if cands:
            key = cands[pick % len(cands)]
        else:
            calls = self._calls_open() or [self._open_call(prime=True)]
            s = calls[pick % len(calls)]
            if s.conn != "open":  # the client ended the call it was opened with
                return
            key = (SESSION, self._send_request(s, method).rid)
        if key not in self.posts:
            if key not in self.showing or key in self.answered:
                return  # the client did not present it
            self.answered.add(key)
            self.showing.discard(key)
            self.feed(ev.UserAnswered(key, _answer(key)))
            if key not in self.posts or not self.session_alive:
                return  # the client sent no answer
        self._post_outcome(key, outcome)
        assert isinstance(key[1], int)  # the kit's request ids
        s = self.streams[self.requests[key[1]].stream]
        self._hit("hazard:rejected-then-cut")
        if s.conn == "open":
            self._cut(s, clean)
        self._next_resume(s)

    def _calls_open(self) -> list[_Stream]:
        """Tool calls running on a connected stream."""
        return [
            s
            for s in self._post_streams()
            if s.conn == "open" and not s.ended and not s.origin_done
        ]

    def _rejectable(self) -> list[RequestKey]:
        """Requests on running tool calls whose answer could be rejected now: pending
        answer POSTs and prompts showing unanswered."""
        keys = sorted(set(self.posts) | (self.showing - self.answered), key=repr)
        return [
            k
            for k in keys
            if isinstance(k[1], int)
            and (r := self.requests.get(k[1])) is not None
            and (s := self.streams[r.stream]).origin is not None
            and not s.ended
        ]

    @rule(pick=st.integers(0, 7), marker=st.booleans(), clean=st.booleans())
    @precondition(lambda self: self.session_alive and bool(self._duplicates()))
    def duplicate_then_cut(self, pick: int, marker: bool, clean: bool) -> None:
        """Hazard (P7): a request event again on a connected stream (same event id),
        older than the newest the stream carried (a progress notification goes first
        if it was the newest), then the connection ends and the client's backoff
        elapses: the resume must name the newest event id, not the duplicate's."""
        cands = self._duplicates()
        s, eid, payload = cands[pick % len(cands)]
        if _number(eid) == max(map(_number, s.delivered)):
            self._emit(s, PROGRESS)
        if s.conn != "open":
            return
        self._hit("hazard:duplicate-then-cut")
        self._duplicate(s, eid, payload, marker)
        if s.conn == "open":
            self._cut(s, clean)
        self._next_resume(s)

    # Weights: hypothesis picks uniformly among enabled rules, and a rule bound to two
    # names counts twice. The reactive steps (the server talks, the user answers, the
    # network answers the client) go twice, so runs get deep instead of absorbed early.
    server_sends_request_ = server_sends_request
    user_answers_ = user_answers
    answer_post_returns_ = answer_post_returns
    timer_fires_ = timer_fires
    resume_answered_ = resume_answered

    @invariant()
    def properties_hold(self) -> None:
        """P1-P7 and the bounded L1, checked by the shared monitor after every step."""
        self.steps += 1
        for _, obs, v in self._violations():
            raise failure(v.name, v.why, f"observation {obs!r}")

    def _violations(self) -> list[tuple[int, P.Observation, P.Violation]]:
        return [t for t in self.monitor.violations if t[2].name in self.checked]

    # ------------------------------------------------------------------ teardown

    def drain(self) -> None:
        """Finish pending work (see the module docstring), then check P5 and bounded L1."""
        for _ in range(self.drain_rounds):
            if not self._drain_round():
                break
        else:
            if "L1" not in self.checked:
                return
            raise failure(
                "L1", f"the client still asks for work after {self.drain_rounds} drain rounds"
            )
        bad = [v for v in self.monitor.finish() if v.name in self.checked]
        if bad:
            raise failure(
                "P5", "; ".join(v.why for v in bad), "after the drain (every pending step done)"
            )

    def _drain_round(self) -> bool:
        moved = False
        for key in sorted(self.posts, key=repr):
            if key in self.posts:
                self._post_outcome(key, "202")
                moved = True
        for s in self._resuming():
            self._resume_answer(s, "ok-batch", False)
            moved = True
        for s in self._waiting():
            self._fire_timer(s)
            moved = True
        if self.session_alive:
            for s in self._post_streams():
                if not s.origin_done and not s.ended:
                    self._finish_origin(s, "sse")
                    moved = True
        else:
            for s in self._open():
                s.conn, s.resumed_conn = "down", False
                self.feed(ev.StreamLost(s.name, False))
                moved = True
        return moved

    def teardown(self) -> None:
        if not self.busy and not self._violations():
            self.drain()
            self._hit("drained")


def conformance_machine(
    client_factory: ClientFactory,
    *,
    budgets: P.Budgets | None = None,
    classifier: Classifier | None = None,
    max_tool_calls: int = 3,
    max_requests: int = 6,
    reject_get_answers: bool = True,
    check: Iterable[str] | None = None,
    coverage: Counter[str] | None = None,
    name: str | None = None,
) -> type[ConformanceMachine]:
    """A :class:`ConformanceMachine` subclass bound to ``client_factory``.

    ``budgets`` are the client's declared limits (TTL of a request, resumes without
    progress, submissions per key) that the monitor checks (bounded L1, P6's deadline);
    ``classifier`` the outcome table the kit classifies answer outcomes with (what the
    monitor considers terminal); ``reject_get_answers=False`` never answers a POST for a
    request delivered on the GET stream with a request-scoped terminal outcome (a 202
    instead), for clients that are not meant to handle requests outside a tool call;
    ``check`` the property names
    that fail a run (default: all of P1-P7 and L1; the monitor still tracks every one,
    so narrowing it only silences, never changes, a verdict); ``coverage`` a counter the kit
    adds what it reached to.
    Run it with ``run_state_machine_as_test(M, settings=kit_settings())`` or via its
    ``TestCase`` (unittest/pytest). ``ValueError`` for a ``max_tool_calls`` or
    ``max_requests`` that is not an integer >= 0 (a ``bool``, NaN or 1.5 is not one:
    :func:`out_of_range`), or a ``check`` naming no property
    (:func:`fsm.properties.property_names`).
    """
    counts = {"max_tool_calls": max_tool_calls, "max_requests": max_requests}
    wrong = out_of_range(dict.fromkeys(counts, 0), counts)
    if wrong:
        raise ValueError(
            f"max_tool_calls={max_tool_calls!r} and max_requests={max_requests!r} must be "
            f">= 0: out of range: {', '.join(wrong)}"
        )
    attrs: dict[str, Any] = {
        "client_factory": staticmethod(client_factory),
        "budgets": budgets or P.Budgets(),
        "classifier": classifier or Classifier(),
        "max_tool_calls": max_tool_calls,
        "max_requests": max_requests,
        "reject_get_answers": reject_get_answers,
        "checked": frozenset(P.property_names(check)),
        "coverage": coverage,
    }
    machine: type[ConformanceMachine] = type(name or "Conformance", (ConformanceMachine,), attrs)
    machine.TestCase.settings = kit_settings()
    return machine


class ConformanceTests:
    """Pytest base class: ``class TestMine(ConformanceTests): client_factory = ...``.

    Class attributes: ``client_factory`` (required), ``budgets``, ``classifier``,
    ``profile`` (a kit settings profile name, default: see :func:`kit_settings`),
    ``hypothesis_settings`` (explicit settings, overriding ``profile``),
    ``reject_get_answers`` and ``check`` (see :func:`conformance_machine`).
    """

    client_factory: ClassVar[ClientFactory]
    budgets: ClassVar[P.Budgets | None] = None
    classifier: ClassVar[Classifier | None] = None
    profile: ClassVar[str | None] = None
    hypothesis_settings: ClassVar[settings | None] = None
    reject_get_answers: ClassVar[bool] = True
    check: ClassVar[Iterable[str] | None] = None

    def test_conformance(self) -> None:
        """Run the conformance machine against ``client_factory``."""
        factory = type(self).client_factory
        machine = conformance_machine(
            factory,
            budgets=self.budgets,
            classifier=self.classifier,
            reject_get_answers=self.reject_get_answers,
            check=self.check,
            name=f"{type(self).__name__}Machine",
        )
        chosen = self.hypothesis_settings or kit_settings(self.profile)
        run_state_machine_as_test(machine, settings=chosen)
