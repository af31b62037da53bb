"""Audit a recorded client event log: ``python -m fsm audit LOG.jsonl [--json]``.

The log is JSON Lines in the :mod:`fsm.trace` schema (what :class:`fsm.sse.observe.ObservedGuard`
writes). Every record is replayed, in order, through the P1-P7 and bounded-L1 monitor
(:class:`AuditMonitor`, running the rules' one implementation, :class:`fsm.properties.Facts`,
in place) and through a lifecycle check against the declared machines
(:data:`fsm.machines.resumption.LIVENESS` per request key,
:data:`fsm.machines.resumption.TRANSPORT` per stream), reported as property ``M``.

Exit codes: ``0`` the log conforms; ``1`` a violation -- the FIRST violating record is
reported with its line number, the property, the monitor state before it and why;
``2`` the log is malformed or unreadable (one message naming the line, no traceback), or
empty: a log without a single record proves nothing, so it is not reported as conforming.

Cost
----
The audit streams: the log is read in 64 KiB blocks, decoded as strict UTF-8 and split
into lines at line feeds as it goes (:func:`read_lines`, JSON Lines: a U+2028 inside a
string does not end a record; ``-`` reads standard input's bytes the same way), each record
is parsed (strict JSON, every number a finite one: :func:`fsm.trace.read_line`), judged
and dropped. A line spanning many blocks is joined once, when it ends. Every record costs
O(1) amortised: the monitor's sets and maps are updated in place (nothing is copied per
record), a lost session marks only the streams and requests learnt since the previous one,
and forgetting an interaction touches only what was recorded about it. Time is linear in
the log's length, however long its lines. Memory holds the longest line
and the monitor's state, which is bounded as follows, not by the log's length.

Memory bound: what is forgotten
-------------------------------
Judging P2, P5 and the rest exactly for every record would mean remembering every request
and interaction to the end of the log, however long. The audit keeps, instead:

* everything about interactions that have not ended: live streams, the open generation
  of the standalone GET stream, and the requests delivered on them (an interaction that
  never ends stays: with ``--complete`` each one is a P5 violation);
* everything about the last ``retain`` interactions that ended (default
  :data:`DEFAULT_RETAIN`, ``--retain``), with the requests delivered on their streams;
* what is known of request keys never delivered (answered, presented, submitted,
  cancelled or declared dead without a ``delivered`` record): no stream names them, so
  nothing forgets them. A client's log has few: it acts only on requests it was given.

Once more than ``retain`` interactions have ended, the oldest ended one is forgotten with
the requests delivered on its stream, exactly as :func:`fsm.properties.forget` does for the
online :class:`fsm.properties.Monitor` (the lifecycle facts about the same stream and
requests go with it). Forgetting only loses checks about the forgotten interaction: a
record naming it or one of those requests afterwards is judged as one about something
never seen (a second ``ended`` is not P5, a re-presentation not P2, a submission for such
a request is P4, a resume of its stream is neither P3 nor ``M``). So a log in which no
record reaches back past the last ``retain`` ended interactions gets the same finding
(property, line, why) as from a monitor that remembers everything; the states it reports
leave out what was forgotten. ``retain=None`` (``--retain all``) remembers everything:
time stays linear, memory then grows with the log.

Memory is therefore bounded by the live interactions (their requests and event ids), the
``retain`` last ended ones and the never-delivered keys, whatever the number of records.
Measured (``python -m bench audit``): the same peak RSS for 45,000 and 1,000,000 records.

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
* The command reads the whole input even after the first violation, to report an
  undecodable or unreadable log as such wherever the bad bytes are (exit 2), as it did
  when it read the log whole; only the reading continues, nothing is judged.
"""

from __future__ import annotations

import argparse
import codecs
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from fsm import properties as P
from fsm.errors import RequestKey
from fsm.fields import field_problem, field_rules
from fsm.machines.resumption import LIVENESS, TRANSPORT
from fsm.machines.spec import MachineSpec
from fsm.machines.tasks import TASK_INPUT
from fsm.trace import TraceFormatError, header_era, read_line, split_lines, to_record

MACHINE = "M"
DESCRIPTIONS: dict[str, str] = {
    **P.PROPERTIES,
    MACHINE: "each request and stream follows the declared machines (fsm.machines.resumption)",
}

DEFAULT_RETAIN = 4096
"""How many ended interactions the audit remembers by default (see the module docstring)."""

BLOCK = 1 << 16
"""Bytes read from the log at a time."""

# ----------------------------------------------------------------- the declared machines

_States = frozenset[str]


class LifecycleMachine:
    """One request's declared machine as the audit follows it: the transitions a log
    never shows (``silent``, which may happen between any two records) and the triggers
    that a cancellation, a rejection and the end of a session (or task) fire. Its memo
    tables are keyed by sets of the machine's states, so they hold at most a few hundred
    entries."""

    def __init__(
        self,
        machine: MachineSpec,
        *,
        silent: tuple[str, ...],
        cancel: tuple[str, ...],
        reject: tuple[str, ...],
        expire: tuple[str, ...],
        reuse: tuple[str, ...] = (),
    ) -> None:
        self.name = machine.name
        self.terminal: _States = frozenset(machine.terminal)
        self.new: _States = frozenset({machine.initial})
        self.silent, self.cancel, self.reject, self.expire = silent, cancel, reject, expire
        self.reuse = reuse
        """Fired by a delivery that re-asks a question the user answered (tasks)."""
        self._table = {(t.source, t.trigger): t.dest for t in machine.transitions}
        self._steps: dict[tuple[_States, tuple[str, ...]], _States] = {}
        self._closures: dict[_States, _States] = {}
        self._expired: dict[_States, _States] = {}

    def step(self, states: _States, triggers: tuple[str, ...]) -> _States:
        """The states reached from ``states`` by one of ``triggers``."""
        got = self._steps.get((states, triggers))
        if got is None:
            table = self._table
            got = frozenset(table[s, t] for s in states for t in triggers if (s, t) in table)
            self._steps[states, triggers] = got
        return got

    def closure(self, states: _States) -> _States:
        """``states`` and every state the silent transitions reach from them."""
        got = self._closures.get(states)
        if got is None:
            seen, frontier = set(states), set(states)
            while frontier:
                new = self.step(frozenset(frontier), self.silent) - seen
                seen |= new
                frontier = set(new)
            got = self._closures[states] = frozenset(seen)
        return got

    def expired(self, states: _States) -> _States:
        """What the session's (or task's) end makes of a request in ``states``."""
        got = self._expired.get(states)
        if got is None:
            now = self.closure(states)
            got = self.step(now, self.expire) | (now & self.terminal)
            self._expired[states] = got
        return got


SSE_LIFECYCLE = LifecycleMachine(
    LIVENESS,
    silent=("accept", "retry", "complete"),
    cancel=("cancel",),
    reject=("reject",),
    expire=("expire",),
)
"""The SSE and MRTR logs' request machine (:data:`fsm.machines.resumption.LIVENESS`)."""

TASKS_LIFECYCLE = LifecycleMachine(
    TASK_INPUT,
    silent=("accept", "retry", "complete", "consume"),
    cancel=("supersede", "orphan"),
    reject=("reject", "orphan"),
    expire=("orphan",),
    reuse=("reuse",),
)
"""A task log's key machine (:data:`fsm.machines.tasks.TASK_INPUT`): an acknowledged
answer is consumed silently, a key that left the listing was superseded (or orphaned by
the task's end), a re-ask of an answered question is answered from the store."""

LIFECYCLES = {"sse": SSE_LIFECYCLE, "tasks": TASKS_LIFECYCLE}
"""The request machine of each era a log's header may name (:data:`fsm.trace.ERAS`)."""


class Lifecycle:
    """Possible machine states per request key (``machine``: the era's) and per stream,
    as far as the log shows.

    Updated in place; a lost session costs only the requests whose states it changes
    (``_expirable``: those not already at the expiry's fixed point)."""

    __slots__ = ("_expirable", "ended_streams", "idempotent", "machine", "requests")

    def __init__(self, machine: LifecycleMachine = SSE_LIFECYCLE) -> None:
        self.machine = machine
        self.requests: dict[RequestKey, _States] = {}
        self.ended_streams: set[str] = set()
        self.idempotent: set[RequestKey] = set()
        self._expirable: set[RequestKey] = set()

    def _of(self, key: RequestKey) -> _States:
        return self.machine.closure(self.requests.get(key, self.machine.new))

    def _set(self, key: RequestKey, states: _States) -> None:
        self.requests[key] = states
        if self.machine.expired(states) != states:
            self._expirable.add(key)
        else:
            self._expirable.discard(key)

    def observe(self, obs: P.Observation) -> str | None:
        """Apply ``obs``; return why it is impossible for the machines, or ``None``."""
        key = getattr(obs, "key", None)
        if isinstance(obs, P.Delivered) and not obs.interactive:
            self.idempotent.add(obs.key)
        if key in self.idempotent:
            return None  # idempotent requests are not tracked by the liveness machine
        m = self.machine
        if isinstance(obs, P.Delivered) and obs.question is not None and m.reuse:
            now = self._of(obs.key)
            self._set(obs.key, now | m.step(now, m.reuse))
        elif isinstance(obs, P.Presented):
            nxt = m.step(self._of(obs.key), ("present",))
            if not nxt:
                was = sorted(self._of(obs.key))
                return f"{m.name} of {obs.key!r}: 'present' impossible from {was}"
            self._set(obs.key, nxt)
        elif isinstance(obs, P.Submitted):
            nxt = m.step(self._of(obs.key), ("submit", "resubmit"))
            if not nxt:
                return (
                    f"{m.name} of {obs.key!r}: a submission is impossible from "
                    f"{sorted(self._of(obs.key))}"
                )
            self._set(obs.key, nxt)
        elif isinstance(obs, P.Answered):
            now = self._of(obs.key)
            nxt = m.step(now, ("answer",))
            if nxt:
                self._set(obs.key, nxt | (now & m.terminal))
        elif isinstance(obs, P.Rejected):
            if obs.session:
                self._expire()
            else:
                self._told(obs.key, m.reject)
        elif isinstance(obs, P.Cancelled):
            self._told(obs.key, m.cancel)
        elif isinstance(obs, P.DeclaredDead):
            now = self._of(obs.key)
            live = frozenset({"dead"}) if now - m.terminal else frozenset()
            self._set(obs.key, (now & m.terminal) | live)
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

    def forget(self, interaction: str, keys: Iterable[RequestKey]) -> None:
        """Drop what is known of stream ``interaction`` and of the requests ``keys``."""
        self.ended_streams.discard(interaction)
        for key in keys:
            self.requests.pop(key, None)
            self.idempotent.discard(key)
            self._expirable.discard(key)

    def retained(self) -> int:
        """How many entries this lifecycle holds (what bounds its memory)."""
        return len(self.requests) + len(self.ended_streams) + len(self.idempotent)

    def _told(self, key: RequestKey, triggers: tuple[str, ...]) -> None:
        now = self._of(key)
        nxt = self.machine.step(now, triggers)
        if nxt:
            self._set(key, nxt | (now & self.machine.terminal))

    def _expire(self) -> None:
        # Every other tracked request is already at the expiry's fixed point: unchanged.
        for key in list(self._expirable):
            self._set(key, self.machine.expired(self.requests[key]))


# ----------------------------------------------------------------- the monitor


class AuditMonitor(P.Monitor):
    """The audit's monitor: :class:`fsm.properties.Monitor` (the rules of
    :class:`fsm.properties.Facts`, applied in place: a record costs O(1) amortised,
    whatever came before) remembering the last :data:`DEFAULT_RETAIN` ended interactions
    by default.

    :meth:`check` says what an observation violates (nothing changes), :meth:`apply`
    records it, :meth:`observe` does both; :meth:`snapshot` is the state as the
    :class:`fsm.properties.MonitorState` that :func:`fsm.properties.step` would hold
    (O(state), for reports and tests). ``on_forget(interaction, keys)`` is called for each
    interaction forgotten, with the request keys forgotten with it. See the module
    docstring for what is kept and what forgetting loses.
    """

    def __init__(
        self,
        budgets: P.Budgets | None = None,
        *,
        retain: int | None = DEFAULT_RETAIN,
        on_forget: Callable[[str, set[RequestKey]], None] | None = None,
    ) -> None:
        super().__init__(budgets or P.Budgets(), retain=retain, on_forget=on_forget)

    def snapshot(self) -> P.MonitorState:
        """The state as the immutable :class:`fsm.properties.MonitorState` (a copy)."""
        return self.state


# ----------------------------------------------------------------- reports


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


# ----------------------------------------------------------------- reading a log


def read_lines(
    raw: IO[bytes], encoding: str = "utf-8", errors: str = "strict", block: int = BLOCK
) -> Iterator[str]:
    """The lines of the byte stream ``raw``, read ``block`` bytes at a time: the JSON Lines
    lines of :func:`fsm.trace.split_lines` (line feeds only end a line, a ``\\r`` before one
    is dropped), so line numbers are what :func:`fsm.trace.loads` counts in the decoded text.

    The bytes are decoded as the whole stream would be (``encoding``, ``errors``; the
    audit reads every log, a file or standard input, as strict UTF-8): a
    :class:`UnicodeDecodeError` names the position of the bad bytes in the whole stream.
    Time linear in the stream's length, however long its lines; memory: one block and
    the current line.
    """
    inner = codecs.getincrementaldecoder(encoding)(errors)

    def decoded() -> Iterator[str]:
        offset = 0  # bytes handed to the decoder so far
        while True:
            chunk = raw.read(block)
            final = not chunk
            pending = len(inner.getstate()[0])
            try:
                text = inner.decode(chunk, final)
            except UnicodeDecodeError as exc:
                raise _Positioned(exc, offset - pending) from None
            offset += len(chunk)
            yield text
            if final:
                return

    return split_lines(decoded())


class _Positioned(UnicodeDecodeError):
    """``exc`` with its positions counted ``shift`` bytes further: from the start of the
    stream, as a decoder reading it whole reports them."""

    def __init__(self, exc: UnicodeDecodeError, shift: int) -> None:
        super().__init__(exc.encoding, exc.object, exc.start, exc.end, exc.reason)
        start, end = exc.start + shift, exc.end + shift
        if exc.end == exc.start + 1:
            what = f"byte 0x{exc.object[exc.start]:02x} in position {start}"
        else:
            what = f"bytes in position {start}-{end - 1}"
        self.message = f"'{exc.encoding}' codec can't decode {what}: {exc.reason}"

    def __str__(self) -> str:
        return self.message


def records(
    lines: Iterable[str], on_header: Callable[[Mapping[str, Any]], None] | None = None
) -> Iterator[tuple[int, P.Observation, float]]:
    """``(line number, observation, t)`` for each record of ``lines`` (one string per
    line, without its separator): each line read by :func:`fsm.trace.read_line`, as
    :func:`fsm.trace.loads` reads it, so blank lines are skipped, a header is passed, parsed,
    to ``on_header`` (if given) and skipped, and a bad line raises its
    :class:`fsm.trace.TraceFormatError`, naming the line's number in ``lines``."""
    for number, raw in enumerate(lines, 1):
        got = read_line(raw, number)
        if got is None:
            continue
        record, obs, t = got
        if obs is not None:
            yield number, obs, t
        elif on_header is not None:
            on_header(record)


# ----------------------------------------------------------------- the audit


def audit_lines(
    lines: Iterable[str],
    *,
    budgets: P.Budgets | None = None,
    complete: bool = False,
    retain: int | None = DEFAULT_RETAIN,
) -> AuditResult:
    """Audit the log whose lines ``lines`` yields (see :func:`records`), consuming them
    one at a time; stop at the first violation, leaving the rest unread.

    Raises :class:`fsm.trace.TraceFormatError` (with ``.line``) for a malformed log: the
    log is validated up to the first violation. ``complete=True`` also reports
    interactions that began and never ended (P5) at the end of the log. ``retain``: how
    many ended interactions to remember (``None``: all); see the module docstring.
    Time O(records), memory bounded as the module docstring says.
    """
    life = Lifecycle()
    monitor = AuditMonitor(budgets or P.Budgets(), retain=retain, on_forget=life.forget)
    count = 0
    last_line = 0

    def header(record: Mapping[str, Any]) -> None:
        # A header naming its era (as parsed: escapes and all), before any record, picks
        # the requests' machine.
        era = header_era(record)
        if count == 0 and era is not None:
            life.machine = LIFECYCLES[era]

    for line, obs, t in records(lines, header):
        count += 1
        last_line = line
        bad = monitor.check(obs)
        why: tuple[str, str] | None = (bad[0].name, bad[0].why) if bad else None
        machine_why = life.observe(obs)
        if why is None and machine_why is not None:
            why = (MACHINE, machine_why)
        if why is not None:
            before = summary(monitor.snapshot())
            monitor.apply(obs, bad)
            also = tuple((v.name, v.why) for v in bad[1:])
            finding = Finding(line, why[0], why[1], to_record(obs, t), before, also)
            return AuditResult(count, finding, summary(monitor.snapshot()))
        monitor.apply(obs)
    state = summary(monitor.snapshot())
    if complete:
        unfinished = monitor.unfinished()
        if unfinished:
            v = unfinished[0]
            finding = Finding(last_line, v.name, f"{v.why} by the end of the log", {}, state)
            return AuditResult(count, finding, state)
    return AuditResult(count, None, state)


def audit_text(
    text: str,
    *,
    budgets: P.Budgets | None = None,
    complete: bool = False,
    retain: int | None = DEFAULT_RETAIN,
) -> AuditResult:
    """Audit the JSON Lines ``text``; stop at the first violation.

    Raises :class:`fsm.trace.TraceFormatError` (with ``.line``) for a malformed log: the
    log is validated up to the first violation, records after it are not read.
    ``complete=True`` also reports interactions that began and never ended (P5) at the
    end of the log. See :func:`audit_lines` (which reads a log without holding it whole).
    """
    lines = split_lines((text,))
    return audit_lines(lines, budgets=budgets, complete=complete, retain=retain)


def _retain(value: str) -> int | None:
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"a count >= 0 or 'all', got {value!r}")
    return n


def _budget(name: str) -> Callable[[str], Any]:
    """The command line's reading of the :class:`~fsm.properties.Budgets` field ``name``,
    refused as the field's rule refuses it (:mod:`fsm.fields`)."""
    rule = field_rules(P.Budgets, floats="number", strict=False)[name]

    def read(text: str) -> Any:
        try:
            value: Any = float(text) if rule.kind == "number" else int(text)
        except ValueError:
            value = text
        problem = field_problem(rule, value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{text!r} {problem}")
        return value

    return read


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsm audit",
        description="Audit a client event log (JSON Lines, fsm.trace schema) against P1-P7, "
        "the bounded L1 and the declared machines. The log is read as a stream: time is "
        "linear in its length, memory bounded by --retain.",
        epilog="exit status: 0 conforms, 1 a violation (the first one is reported), "
        "2 a malformed, empty or unreadable log, or bad arguments",
    )
    p.add_argument("log", help="the JSONL event log ('-' reads standard input)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--complete", action="store_true", help="the log is complete: check P5")
    d = P.Budgets()
    p.add_argument("--ttl", type=_budget("ttl"), default=d.ttl, help="request TTL in seconds")
    p.add_argument(
        "--max-resumes",
        type=_budget("max_resumes_without_progress"),
        default=d.max_resumes_without_progress,
    )
    p.add_argument("--max-submissions", type=_budget("max_submissions"), default=d.max_submissions)
    p.add_argument(
        "--retain",
        type=_retain,
        default=DEFAULT_RETAIN,
        metavar="N|all",
        help="ended interactions remembered (older ones are forgotten with their requests); "
        f"'all' remembers everything, memory then grows with the log (default {DEFAULT_RETAIN})",
    )
    return p


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str, *, err: bool = False) -> None:
    if args.json:
        print(json.dumps(obj, sort_keys=True, default=repr))
    else:
        print(text, file=sys.stderr if err else sys.stdout)


@contextmanager
def _lines_of(name: str) -> Iterator[Iterator[str]]:
    """The lines of the log named ``name`` (``-``: standard input), read as they are used.
    Standard input is read as a file is: its bytes, as strict UTF-8, whatever its own
    text layer's encoding and error handler (``surrogateescape`` under a C locale would
    turn bad bytes into text)."""
    if name != "-":
        with open(name, "rb") as raw:
            yield read_lines(raw)
        return
    stdin = sys.stdin
    buffer = getattr(stdin, "buffer", None)
    if buffer is None:  # a text-only stand-in: its text, split as a whole text would be
        yield split_lines(iter(lambda: stdin.read(BLOCK), ""))
    else:
        yield read_lines(buffer)


def printable(text: str, *, name: bool = False) -> str:
    """``text`` as the audit prints it, on one line and printable by any UTF-8 stdout,
    strict or not: every character a terminal would not print (a line break, a control
    character, a lone surrogate) escaped as Python writes it (``\\n``, ``\\udcff``).
    ``name``: ``text`` is the log's file name, a command-line argument whose undecodable
    bytes ``os.fsdecode`` held as lone surrogates (U+DC80-U+DCFF): each is shown as the
    byte it stands for (``\\xff``). A text taken from the log (an interaction's name in
    a finding's why) is shown with ``name=False``: its lone surrogates were written so."""
    if text.isprintable():
        return text
    shown = []
    for c in text:
        if name and "\udc80" <= c <= "\udcff":
            shown.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif c.isprintable():
            shown.append(c)
        else:
            shown.append(c.encode("unicode_escape").decode("ascii"))
    return "".join(shown)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m fsm audit``; returns the exit code."""
    try:
        args = _parser().parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse already printed the usage
        return 0 if exc.code == 0 else 2
    budgets = P.Budgets(
        ttl=args.ttl,
        max_resumes_without_progress=args.max_resumes,
        max_submissions=args.max_submissions,
    )
    log = printable(args.log, name=True)
    try:
        with _lines_of(args.log) as lines:
            try:
                result: AuditResult | TraceFormatError = audit_lines(
                    lines, budgets=budgets, complete=args.complete, retain=args.retain
                )
            except TraceFormatError as exc:
                result = exc
            for _ in lines:  # the rest is read only to report an unreadable log as such
                pass
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"{log}: {printable(why)}"
        _emit(args, {"ok": False, "error": message}, f"audit: {message}", err=True)
        return 2
    if isinstance(result, TraceFormatError):
        _emit(
            args,
            {"ok": False, "error": str(result), "line": result.line},
            f"audit: {log}: malformed log, {printable(str(result))}",
            err=True,
        )
        return 2
    if result.records == 0:
        message = f"{log}: empty log (no records to audit)"
        _emit(args, {"ok": False, "error": message, "records": 0}, f"audit: {message}", err=True)
        return 2
    f = result.finding
    if f is None:
        _emit(args, result.to_json(), f"{log}: conforms ({result.records} records)")
        return 0
    text_out = "\n".join(
        [
            f"{log}:{f.line}: {f.name} violated: {f.description}",
            f"  why: {printable(f.why)}",
            *(f"  also {n} violated: {DESCRIPTIONS.get(n, n)} ({printable(w)})" for n, w in f.also),
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
