"""Audit a recorded client event log: ``python -m fsm audit LOG.jsonl [--json]``.

The log is JSON Lines in the :mod:`fsm.trace` schema (what :class:`fsm.sse.observe.ObservedGuard`
writes). Every record is replayed, in order, through the one property monitor
(:func:`fsm.properties.step`, P1-P7 and the bounded L1) and through a lifecycle check
against the declared machines (:data:`fsm.machines.resumption.LIVENESS` per request key,
:data:`fsm.machines.resumption.TRANSPORT` per stream), reported as property ``M``.

Exit codes: ``0`` the log conforms; ``1`` a violation -- the FIRST violating record is
reported with its line number, the property, the monitor state before it and why;
``2`` the log is malformed or unreadable (one message naming the line, no traceback), or
empty: a log without a single record proves nothing, so it is not reported as conforming.

Limits
------
* The lifecycle check follows the machines only as far as the log allows: transitions a
  log never shows (an answer accepted, a retry, the origin completing) are assumed to
  happen whenever the declared machine permits them, so only what no run of the machine
  could produce is flagged (e.g. an answer submitted for a request already rejected, a
  prompt answered-and-submitted before it was presented, a stream resumed after it ended).
  Inputs the client was *told* (deliveries, cancellations, rejections, user answers) are
  never flagged: they constrain the states, the client's own actions are checked.
* P5 "never ended" is checked only with ``--complete`` (``complete=True``): a log may be
  cut off while interactions are legitimately still running.
* Budgets default to :class:`fsm.properties.Budgets` (``--ttl``, ``--max-resumes``,
  ``--max-submissions`` override them): use the audited client's configuration.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fsm import properties as P
from fsm.errors import RequestKey
from fsm.machines.resumption import LIVENESS, TRANSPORT
from fsm.machines.spec import MachineSpec
from fsm.trace import TraceFormatError, loads, to_record

MACHINE = "M"
DESCRIPTIONS: dict[str, str] = {
    **P.PROPERTIES,
    MACHINE: "each request and stream follows the declared machines (fsm.machines.resumption)",
}

# Transitions a log never shows: they may happen between any two records.
_SILENT = frozenset({"accept", "retry", "complete"})


def _step_set(spec: MachineSpec, states: frozenset[str], triggers: Iterable[str]) -> frozenset[str]:
    wanted = set(triggers)
    return frozenset(t.dest for t in spec.transitions if t.source in states and t.trigger in wanted)


def _closure(spec: MachineSpec, states: frozenset[str], triggers: frozenset[str]) -> frozenset[str]:
    seen: set[str] = set(states)
    frontier: set[str] = set(states)
    while frontier:
        new = set(_step_set(spec, frozenset(frontier), triggers)) - seen
        seen |= new
        frontier = new
    return frozenset(seen)


@dataclass
class Lifecycle:
    """Possible machine states per request key and per stream, as far as the log shows."""

    requests: dict[RequestKey, frozenset[str]] = field(default_factory=dict)
    ended_streams: set[str] = field(default_factory=set)
    idempotent: set[RequestKey] = field(default_factory=set)

    def _of(self, key: RequestKey) -> frozenset[str]:
        return _closure(LIVENESS, self.requests.get(key, frozenset({LIVENESS.initial})), _SILENT)

    def _fire(self, key: RequestKey, *triggers: str) -> frozenset[str]:
        return _step_set(LIVENESS, self._of(key), triggers)

    def observe(self, obs: P.Observation) -> str | None:
        """Apply ``obs``; return why it is impossible for the machines, or ``None``."""
        key = getattr(obs, "key", None)
        if isinstance(obs, P.Delivered) and not obs.interactive:
            self.idempotent.add(obs.key)
        if key in self.idempotent:
            return None  # idempotent requests are not tracked by the liveness machine
        if isinstance(obs, P.Presented):
            nxt = self._fire(obs.key, "present")
            if not nxt:
                was = sorted(self._of(obs.key))
                return f"liveness of {obs.key!r}: 'present' impossible from {was}"
            self.requests[obs.key] = nxt
        elif isinstance(obs, P.Submitted):
            nxt = self._fire(obs.key, "submit", "resubmit")
            if not nxt:
                return (
                    f"liveness of {obs.key!r}: a submission is impossible from "
                    f"{sorted(self._of(obs.key))}"
                )
            self.requests[obs.key] = nxt
        elif isinstance(obs, P.Answered):
            nxt = self._fire(obs.key, "answer")
            if nxt:
                self.requests[obs.key] = nxt | (self._of(obs.key) & LIVENESS.terminal)
        elif isinstance(obs, P.Rejected):
            if obs.session:
                self._expire()
            else:
                self._told(obs.key, "reject")
        elif isinstance(obs, P.Cancelled):
            self._told(obs.key, "cancel")
        elif isinstance(obs, P.DeclaredDead):
            now = self._of(obs.key)
            live = frozenset({"dead"}) if now - LIVENESS.terminal else frozenset()
            self.requests[obs.key] = (now & LIVENESS.terminal) | live
        elif isinstance(obs, P.SessionGone):
            self._expire()
        elif isinstance(obs, P.Resumed):
            if obs.stream in self.ended_streams:
                return (
                    f"transport of {obs.stream}: 'resume' impossible once it ended "
                    f"(terminal {sorted(TRANSPORT.terminal)})"
                )
        elif isinstance(obs, P.Ended):
            self.ended_streams.add(obs.interaction)
        return None

    def _told(self, key: RequestKey, trigger: str) -> None:
        now = self._of(key)
        nxt = _step_set(LIVENESS, now, (trigger,))
        if nxt:
            self.requests[key] = nxt | (now & LIVENESS.terminal)

    def _expire(self) -> None:
        for key in list(self.requests):
            now = self._of(key)
            self.requests[key] = _step_set(LIVENESS, now, ("expire",)) | (now & LIVENESS.terminal)


def summary(state: P.MonitorState) -> dict[str, Any]:
    """A JSON-ready summary of the monitor state (what a violation is judged against)."""

    def keys(ks: Iterable[RequestKey]) -> list[list[Any]]:
        return sorted(([k[0], k[1]] for k in ks), key=repr)

    return {
        "presented": keys(state.presented),
        "dead": keys(state.dead),
        "stale_delivery": keys(state.stale_delivery),
        "deadlines": {f"{k[0]}/{k[1]}": t for k, t in state.deadlines.items()},
        "newest_event": dict(state.newest),
        "no_resume": sorted(state.no_resume),
        "session_gone": state.session_gone,
        "resumes_without_progress": dict(state.stalls),
        "submissions": {f"{k[0]}/{k[1]}": n for k, n in state.submissions.items()},
        "begun": sorted(state.begun),
        "ended": sorted(state.ended),
    }


@dataclass(frozen=True)
class Finding:
    """The first violation: where (1-based ``line``), which property (``name``), the
    monitor state before it, and why."""

    line: int
    name: str
    why: str
    record: dict[str, Any]
    state_before: dict[str, Any]
    also: tuple[tuple[str, str], ...] = ()
    """Other ``(property, why)`` the same record violates (e.g. P6 with P2)."""

    @property
    def description(self) -> str:
        """The property's one-line statement."""
        return DESCRIPTIONS.get(self.name, self.name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form of this finding."""
        return {
            "line": self.line,
            "property": self.name,
            "description": self.description,
            "why": self.why,
            "record": self.record,
            "state_before": self.state_before,
            "also": [{"property": n, "why": w} for n, w in self.also],
        }


@dataclass(frozen=True)
class AuditResult:
    """The verdict on one log: ``finding`` is ``None`` when it conforms."""

    records: int
    finding: Finding | None
    final_state: dict[str, Any]

    @property
    def ok(self) -> bool:
        """Whether the log conforms."""
        return self.finding is None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form of this result (what ``--json`` prints)."""
        return {
            "ok": self.ok,
            "records": self.records,
            "violation": self.finding.to_json() if self.finding is not None else None,
            "final_state": self.final_state,
        }


def audit_text(
    text: str, *, budgets: P.Budgets | None = None, complete: bool = False
) -> AuditResult:
    """Audit the JSON Lines ``text``; stop at the first violation.

    Raises :class:`fsm.trace.TraceFormatError` (with ``.line``) for a malformed log: the
    log is validated up to the first violation, records after it are not read.
    ``complete=True`` also reports interactions that began and never ended (P5) at the
    end of the log.
    """
    budgets = budgets or P.Budgets()
    state = P.MonitorState()
    life = Lifecycle()
    count = 0
    last_line = 0
    for line, obs, t in loads(text):
        count += 1
        last_line = line
        before = state
        state, bad = P.step(state, obs, budgets)
        why: tuple[str, str] | None = (bad[0].name, bad[0].why) if bad else None
        machine_why = life.observe(obs)
        if why is None and machine_why is not None:
            why = (MACHINE, machine_why)
        if why is not None:
            also = tuple((v.name, v.why) for v in bad[1:])
            finding = Finding(line, why[0], why[1], to_record(obs, t), summary(before), also)
            return AuditResult(count, finding, summary(state))
    if complete:
        unfinished = P.unfinished(state)
        if unfinished:
            v = unfinished[0]
            finding = Finding(
                last_line, v.name, f"{v.why} by the end of the log", {}, summary(state)
            )
            return AuditResult(count, finding, summary(state))
    return AuditResult(count, None, summary(state))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsm audit",
        description="Audit a client event log (JSON Lines, fsm.trace schema) against P1-P7, "
        "the bounded L1 and the declared machines.",
        epilog="exit status: 0 conforms, 1 a violation (the first one is reported), "
        "2 a malformed, empty or unreadable log, or bad arguments",
    )
    p.add_argument("log", help="the JSONL event log ('-' reads standard input)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--complete", action="store_true", help="the log is complete: check P5")
    d = P.Budgets()
    p.add_argument("--ttl", type=float, default=d.ttl, help="request TTL in seconds")
    p.add_argument("--max-resumes", type=int, default=d.max_resumes_without_progress)
    p.add_argument("--max-submissions", type=int, default=d.max_submissions)
    return p


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str, *, err: bool = False) -> None:
    if args.json:
        print(json.dumps(obj, sort_keys=True, default=repr))
    else:
        print(text, file=sys.stderr if err else sys.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m fsm audit``; returns the exit code."""
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse already printed the usage
        return 0 if exc.code == 0 else 2
    try:
        if args.log == "-":
            text = sys.stdin.read()
        else:
            with open(args.log, encoding="utf-8") as fh:
                text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"{args.log}: {why}"
        _emit(args, {"ok": False, "error": message}, f"audit: {message}", err=True)
        return 2
    budgets = P.Budgets(
        ttl=args.ttl,
        max_resumes_without_progress=args.max_resumes,
        max_submissions=args.max_submissions,
    )
    try:
        result = audit_text(text, budgets=budgets, complete=args.complete)
    except TraceFormatError as exc:
        _emit(
            args,
            {"ok": False, "error": str(exc), "line": exc.line},
            f"audit: {args.log}: malformed log, {exc}",
            err=True,
        )
        return 2
    if result.records == 0:
        message = f"{args.log}: empty log (no records to audit)"
        _emit(args, {"ok": False, "error": message, "records": 0}, f"audit: {message}", err=True)
        return 2
    f = result.finding
    if f is None:
        _emit(args, result.to_json(), f"{args.log}: conforms ({result.records} records)")
        return 0
    text_out = "\n".join(
        [
            f"{args.log}:{f.line}: {f.name} violated: {f.description}",
            f"  why: {f.why}",
            *(f"  also {n} violated: {DESCRIPTIONS.get(n, n)} ({w})" for n, w in f.also),
            f"  record: {json.dumps(f.record, sort_keys=True)}",
            "  monitor state before it:",
            *(
                f"    {k}: {json.dumps(v, sort_keys=True)}"
                for k, v in f.state_before.items()
                if v not in ([], {}, False)
            ),
        ]
    )
    _emit(args, result.to_json(), text_out)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
