"""The conformance kit for MRTR clients (protocol 2026-07-28): hypothesis plays a
sealing server, the network, the user and the clock against one call of any client that
speaks the MRTR vocabulary (:mod:`fsm.mrtr.call`: ``feed(MrtrEvent) -> Sequence[MrtrAction]``).

Contract
--------
* The client under test is built by ``client_factory(clock)`` once per example and
  drives one call; the call's first request is in flight when the example starts.
* The kit's server is stateless the official way: each ``InputRequiredResult`` carries a
  fresh state token recording the answers it has seen; it completes once every question
  of the call (``questions``) has an answer in a verifiable state. Hypothesis may make it
  re-ask answered questions (a re-asking tool), answer with state only, reject an
  unverifiable state with -32602 ``invalid_request_state`` or ask again instead, lose a
  request, restart (every state unverifiable), and let the server TTL (``server_ttl_s``)
  lapse as the clock moves. It may also send malformed results.
* The kit respects the client: it responds only to a request the client sent (the
  first one, or a :class:`~fsm.mrtr.call.Retry`), the user answers only prompts that are
  showing, and nothing is fed after the client ended the call (except the user's race).
  When the clock moves the kit feeds :class:`~fsm.mrtr.call.Tick` (the client's timer).
* Observations go to the one shared monitor (:mod:`fsm.properties`), read in MRTR terms
  as in :mod:`fsm.worlds.mrtr`; restated P6 also fails a retry that carries an answer the
  user gave more than ``server_ttl_s`` after the question was shown (an answer sent into
  a state that expired). Teardown drains: the server stops misbehaving, the user answers
  everything, and the call must end exactly once within ``drain_rounds`` responses.

Limits: one call per example; questions are ``elicitation/create`` with distinct
messages (the kit maps a ``Present`` back to its question by the message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.errors import RequestKey
from fsm.mrtr.call import MrtrAction, MrtrEvent, Retry, RoundFailed, RoundResult, Tick
from fsm.mrtr.outcomes import STATE_REJECTED
from fsm.outcomes import SubmissionResult
from fsm.testing.call_kit import OneCallMachine, bind, question

CALL = "call"
MALFORMED: tuple[Any, ...] = (
    {"resultType": "input_required"},
    {"resultType": "later"},
    {"resultType": "input_required", "inputRequests": ["x"]},
    "not an object",
)


class MrtrClientUnderTest(Protocol):
    """What the kit drives: one call's ``feed`` in the MRTR vocabulary."""

    def feed(self, event: MrtrEvent) -> Sequence[MrtrAction]:
        """Apply one event; return the actions the client takes, in order."""
        ...


MrtrClientFactory = Callable[[Callable[[], float]], MrtrClientUnderTest]
"""``factory(clock) -> client``: build a fresh MRTR client that reads time from ``clock``."""


@dataclass
class _Server:
    states: dict[int, tuple[frozenset[int], float]] = field(default_factory=dict)
    """token -> (answers it records, minted at)."""
    restarted_before: float = -1.0


class MrtrConformanceMachine(OneCallMachine):
    """See the module docstring; build one with :func:`mrtr_conformance_machine`."""

    subject = "call"
    client_factory: ClassVar[MrtrClientFactory]
    questions: ClassVar[int] = 2
    server_ttl_s: ClassVar[float] = 600.0
    drain_rounds: ClassVar[int] = 30
    budgets: ClassVar[P.Budgets] = P.Budgets(ttl=540.0, counters=False)

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.client = type(self).client_factory(lambda: self.now)
        self.server = _Server()
        self.inflight: tuple[int | None, dict[int, Any]] | None = (None, {})
        self.showing: dict[int, RequestKey] = {}
        self.shown_at: dict[int, float] = {}
        self.keys: dict[RequestKey, int] = {}
        self.answered_at: dict[int, float] = {}
        self._observe(P.Began(CALL))

    # ------------------------------------------------------------ plumbing

    def _observe(self, obs: P.Observation) -> None:
        self._judge(obs, type(self).budgets)

    def _key(self, q: int) -> tuple[str, int]:
        return (CALL, q)

    def feed(self, event: MrtrEvent, carried: Sequence[int] = ()) -> None:
        """Feed ``event``, observe what the client was told and what it did."""
        if isinstance(event, RoundResult) and isinstance(event.result, dict):
            token, asked = event.result.get("requestState"), event.result.get("inputRequests")
            if isinstance(token, str) and (asked is None or isinstance(asked, dict)):
                self._observe(P.EventSeen(CALL, token))
                for entry in (asked or {}).values():
                    q = _number(entry)
                    replayed = self._key(q) in self.monitor.presented
                    self._observe(P.Delivered(self._key(q), CALL, self.now, replayed=replayed))
        if isinstance(event, RoundFailed) and event.outcome is STATE_REJECTED:
            for q in carried:
                self._observe(P.Rejected(self._key(q)))
        if isinstance(event, ev.UserAnswered):
            self._observe(P.Answered(self._key(self.keys[event.key]), dict(event.answer)))
        for a in self.client.feed(event):
            self._did(a)

    def _did(self, a: MrtrAction) -> None:
        if isinstance(a, act.Present):
            q = _number({"params": a.params})
            self.keys[a.key] = q
            self.showing[q] = a.key
            self.shown_at.setdefault(q, self.now)
            self._observe(P.Presented(self._key(q), self.now))
        elif isinstance(a, act.Withdraw):
            gone = self.keys.get(a.key)
            if gone is not None:
                self.showing.pop(gone, None)
                self._observe(P.DeclaredDead(self._key(gone)))
        elif isinstance(a, Retry):
            if self.inflight is not None:
                self._violation("P5", "a retry while a request is still in flight")
            answers = {self.keys[a.questions[k]]: v for k, v in (a.input_responses or {}).items()}
            for q, answer in answers.items():
                self._observe(P.Submitted(self._key(q), answer))
                late = self.answered_at.get(q, 0.0) - self.shown_at.get(q, 0.0)
                if late > type(self).server_ttl_s:
                    why = f"question {q} answered {late:.0f}s after it was shown"
                    self._violation("P6", why)
            if a.request_state is not None:
                self._observe(P.Resumed(CALL, a.request_state))
            token = None if a.request_state is None else int(a.request_state[1:])
            self.inflight = (token, answers)
        elif isinstance(a, act.Complete | act.Fail):
            self.ended += 1
            self._observe(P.Ended(CALL, "completed" if isinstance(a, act.Complete) else "failed"))
            self.showing.clear()
            self.inflight = None

    def _mint(self, known: frozenset[int]) -> str:
        token = len(self.server.states)
        self.server.states[token] = (known, self.now)
        return f"t{token}"

    def _respond(self, *, reask: bool, poll: bool, reject: bool) -> None:
        assert self.inflight is not None
        token, answers = self.inflight
        self.inflight = None
        known: frozenset[int] = frozenset()
        if token is not None:
            recorded, minted = self.server.states[token]
            valid = (
                self.now - minted <= type(self).server_ttl_s
                and minted > self.server.restarted_before
            )
            if not valid and reject:
                return self.feed(RoundFailed(STATE_REJECTED), carried=sorted(answers))
            known = recorded if valid else frozenset()
            if not valid:
                answers = {}
        if reask and answers:
            asks = {f"k{q}": question(q) for q in sorted(answers)}
            return self.feed(
                RoundResult(
                    {
                        "resultType": "input_required",
                        "inputRequests": asks,
                        "requestState": self._mint(known),
                    }
                )
            )
        known |= frozenset(answers)
        missing = [q for q in range(type(self).questions) if q not in known]
        if missing:
            asks = {f"k{q}": question(q) for q in missing}
            return self.feed(
                RoundResult(
                    {
                        "resultType": "input_required",
                        "inputRequests": asks,
                        "requestState": self._mint(known),
                    }
                )
            )
        if poll:
            return self.feed(
                RoundResult({"resultType": "input_required", "requestState": self._mint(known)})
            )
        self.feed(RoundResult({"content": [{"type": "text", "text": "done"}]}))

    # ------------------------------------------------------------ rules

    @rule(reask=st.booleans(), poll=st.booleans(), reject=st.booleans())
    @precondition(lambda self: self.inflight is not None)
    def server_responds(self, reask: bool, poll: bool, reject: bool) -> None:
        self._respond(reask=reask, poll=poll, reject=reject)

    @rule(pick=st.sampled_from(MALFORMED))
    @precondition(lambda self: self.inflight is not None)
    def server_sends_malformed(self, pick: Any) -> None:
        self.inflight = None
        self.feed(RoundResult(pick))

    @rule()
    @precondition(lambda self: self.inflight is not None)
    def request_lost(self) -> None:
        self.inflight = None
        self.feed(RoundFailed(SubmissionResult(None, error="ReadTimeout")))

    @rule()
    def server_restarts(self) -> None:
        self.server.restarted_before = self.now
        self.now += 0.001

    @rule(pick=st.integers(0, 3))
    @precondition(lambda self: bool(self.showing) and not self.ended)
    def user_answers(self, pick: int) -> None:
        q = sorted(self.showing)[pick % len(self.showing)]
        key = self.showing.pop(q)
        self.answered_at[q] = self.now
        self.feed(ev.UserAnswered(key, {"action": "accept", "content": {"q": q}}))

    @rule(big=st.booleans())
    @precondition(lambda self: not self.ended)
    def clock_passes(self, big: bool) -> None:
        self.now += 700.0 if big else 1.0
        self.feed(Tick())

    def _drain(self, n: int) -> None:
        if self.showing:
            self.user_answers(0)
        elif self.inflight is not None:
            self._respond(reask=False, poll=False, reject=True)
        else:
            self.clock_passes(False)


def _number(entry: Any) -> int:
    message = str(entry.get("params", {}).get("message", "")) if isinstance(entry, dict) else ""
    return int(message.removeprefix("Question ").removesuffix("?") or -1)


def mrtr_conformance_machine(
    client_factory: MrtrClientFactory,
    *,
    questions: int = 2,
    server_ttl_s: float = 600.0,
    check: Iterable[str] | None = None,
) -> type[MrtrConformanceMachine]:
    """A :class:`MrtrConformanceMachine` bound to ``client_factory``; run it with
    ``run_state_machine_as_test(M, settings=kit_settings())``. ``check``: the property
    names that fail a run (default all; narrowing silences, never changes, a verdict).
    ``questions``: how many the call asks (>= 1); ``server_ttl_s``: how long the server
    keeps a state verifiable (> 0). Raises ``ValueError`` for bounds out of range or a
    ``check`` naming no property."""
    return bind(
        MrtrConformanceMachine,
        "MrtrConformance",
        client_factory,
        check,
        questions=questions,
        server_ttl_s=server_ttl_s,
    )
