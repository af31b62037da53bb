"""The streaming audit judges as the audit it replaced, in bounded memory.

The reference below is the audit as it was: the rules as they were written over the
immutable state (:mod:`support.monitor_reference`, a frozen copy of the old
:func:`fsm.properties.step`) and the lifecycle recomputed from sets per record, with
forgetting added as :class:`fsm.properties.Monitor` does it (``retain=None``: nothing is
forgotten, the old audit exactly). Random logs must get the same report from both,
record for record; long synthetic logs must keep the monitor's state under a bound fixed
by ``retain``.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fsm import properties as P
from fsm.audit import (
    DEFAULT_RETAIN,
    MACHINE,
    AuditMonitor,
    AuditResult,
    Finding,
    Lifecycle,
    LifecycleMachine,
    audit_lines,
    audit_text,
    main,
    read_lines,
    summary,
)
from fsm.errors import RequestKey
from fsm.machines.resumption import LIVENESS
from fsm.machines.spec import MachineSpec
from fsm.trace import SCHEMA, dumps, loads, to_record
from support import monitor_reference as ref
from support.audit_logs import synthetic_lines, synthetic_log
from support.monitor_reference import BUDGETS, OBSERVATIONS

# ----------------------------------------------------------------- the reference


def _step_set(spec: MachineSpec, states: frozenset[str], triggers: Iterable[str]) -> frozenset[str]:
    wanted = set(triggers)
    return frozenset(t.dest for t in spec.transitions if t.source in states and t.trigger in wanted)


def _closure(spec: MachineSpec, states: frozenset[str], triggers: Iterable[str]) -> frozenset[str]:
    seen: set[str] = set(states)
    frontier: set[str] = set(states)
    while frontier:
        new = set(_step_set(spec, frozenset(frontier), triggers)) - seen
        seen |= new
        frontier = new
    return frozenset(seen)


class FreshMachine(LifecycleMachine):
    """The SSE request machine computed afresh from :data:`LIVENESS`'s transitions at
    every question: no transition table, no memo."""

    def __init__(self) -> None:
        super().__init__(
            LIVENESS,
            silent=("accept", "retry", "complete"),
            cancel=("cancel",),
            reject=("reject",),
            expire=("expire",),
        )

    def step(self, states: frozenset[str], triggers: tuple[str, ...]) -> frozenset[str]:
        return _step_set(LIVENESS, states, triggers)

    def closure(self, states: frozenset[str]) -> frozenset[str]:
        return _closure(LIVENESS, states, self.silent)

    def expired(self, states: frozenset[str]) -> frozenset[str]:
        now = self.closure(states)
        return self.step(now, self.expire) | (now & self.terminal)


class OldLifecycle(Lifecycle):
    """The lifecycle check as it was: the library's rules over :class:`FreshMachine`,
    every lost session recomputing every request (not only the expirable ones)."""

    def __init__(self) -> None:
        super().__init__(FreshMachine())

    def _expire(self) -> None:
        for key in list(self.requests):
            self._set(key, self.machine.expired(self.requests[key]))


def reference_audit(
    text: str,
    *,
    budgets: P.Budgets | None = None,
    complete: bool = False,
    retain: int | None = None,
) -> AuditResult:
    """The audit as it was, forgetting the oldest ended interaction past ``retain``."""
    life = OldLifecycle()
    monitor = ref.Monitor(budgets or P.Budgets(), retain=retain, on_forget=life.forget)
    last_line = 0
    for line, obs, t in loads(text):
        last_line = line
        before = monitor.state
        machine_why = life.observe(obs)
        bad = monitor.observe(obs)
        why: tuple[str, str] | None = (bad[0].name, bad[0].why) if bad else None
        if why is None and machine_why is not None:
            why = (MACHINE, machine_why)
        if why is not None:
            also = tuple((v.name, v.why) for v in bad[1:])
            finding = Finding(line, why[0], why[1], to_record(obs, t), summary(before), also)
            return AuditResult(monitor.count, finding, summary(monitor.state))
    final = summary(monitor.state)
    if complete:
        unfinished = ref.unfinished(monitor.state)
        if unfinished:
            v = unfinished[0]
            finding = Finding(last_line, v.name, f"{v.why} by the end of the log", {}, final)
            return AuditResult(monitor.count, finding, final)
    return AuditResult(monitor.count, None, final)


# ----------------------------------------------------------------- random logs

LOGS = st.lists(OBSERVATIONS, max_size=60)
RETAIN = st.one_of(st.none(), st.integers(0, 3))
FAST = settings(max_examples=400, deadline=None)


def _text(observations: list[P.Observation]) -> str:
    return dumps((obs, float(n)) for n, obs in enumerate(observations))


K1, K2 = ("s1", 1), ("s1", 2)
FORGOTTEN_THEN_REVIVED = [
    P.Delivered(K1, "post:1", 0.0),
    P.Ended("post:1", "completed"),
    P.SessionGone(),
    P.SessionBegan("s2"),
]
FORGOTTEN_THEN_LOST = [
    P.EventSeen("post:1", "e1"),
    P.Ended("post:1", "completed"),
    P.SessionGone(),
    P.Resumed("post:1", "e1"),
]
LOST_TWICE = [
    P.Delivered(K1, "get", 0.0),
    P.EventSeen("get", "e1"),
    P.SessionGone(),
    P.SessionBegan("s2"),
    P.Delivered(K2, "get/2", 0.0),
    P.Ended("get", "failed"),
    P.SessionGone(),
    P.SessionBegan("s1"),
    P.Delivered(K1, "post:1", 0.0),
    P.Presented(K1, 0.0),
]


@settings(max_examples=1000, deadline=None)
@given(LOGS, BUDGETS, RETAIN)
@example(FORGOTTEN_THEN_REVIVED, P.Budgets(), 0)
@example(FORGOTTEN_THEN_LOST, P.Budgets(), 0)
@example(LOST_TWICE, P.Budgets(), 0)
@example(LOST_TWICE, P.Budgets(), None)
def test_the_monitor_judges_every_record_as_the_old_step_did(
    observations: list[P.Observation], budgets: P.Budgets, retain: int | None
) -> None:
    """Record by record, past violations too: the same violations and the same state as
    the old ``step`` (with ``Monitor``'s forgetting when ``retain`` is set)."""
    new = AuditMonitor(budgets, retain=retain)
    old = ref.Monitor(budgets, retain=retain)
    for obs in observations:
        bad = new.check(obs)
        assert bad == old.observe(obs), obs
        new.apply(obs, bad)
        assert new.snapshot() == old.state, obs
    assert new.violations == old.violations
    assert new.unfinished() == ref.unfinished(old.state)


@FAST
@given(LOGS, RETAIN)
def test_the_lifecycle_judges_every_record_as_before(
    observations: list[P.Observation], retain: int | None
) -> None:
    new, old = Lifecycle(), OldLifecycle()

    def forget(interaction: str, keys: set[RequestKey]) -> None:
        new.forget(interaction, keys)
        old.forget(interaction, keys)

    monitor = AuditMonitor(retain=retain, on_forget=forget)
    for obs in observations:
        assert new.observe(obs) == old.observe(obs), obs
        monitor.observe(obs)
        assert new.requests == old.requests, obs
        assert (new.ended_streams, new.idempotent) == (old.ended_streams, old.idempotent)


@FAST
@given(LOGS, BUDGETS, RETAIN, st.booleans(), st.integers(1, 64))
def test_the_audit_reports_what_the_old_audit_reported(
    observations: list[P.Observation],
    budgets: P.Budgets,
    retain: int | None,
    complete: bool,
    block: int,
) -> None:
    """The whole report: verdict, line, why, the other properties, the state before the
    violation and the final state; from a text and streamed from bytes alike."""
    text = _text(observations)
    expected = reference_audit(text, budgets=budgets, complete=complete, retain=retain).to_json()
    got = audit_text(text, budgets=budgets, complete=complete, retain=retain)
    assert got.to_json() == expected
    streamed = audit_lines(
        read_lines(io.BytesIO(text.encode()), block=block),
        budgets=budgets,
        complete=complete,
        retain=retain,
    )
    assert streamed.to_json() == expected


def test_every_existing_log_gets_the_old_report() -> None:
    """The example logs, the guard's logs of the audit tests and a synthetic log with its
    violation at the end: the same report as the old audit, at any ``retain`` they fit."""
    texts = [p.read_text() for p in sorted((ROOT / "examples" / "logs").glob("*.jsonl"))]
    texts.append("\n".join(synthetic_lines(3_000, violation=True)) + "\n")
    assert len(texts) >= 3
    for text in texts:
        for complete in (False, True):
            expected = reference_audit(text, complete=complete).to_json()
            assert audit_text(text, complete=complete, retain=None).to_json() == expected
            assert audit_text(text, complete=complete).to_json() == expected


# ----------------------------------------------------------------- reading


SEPARATED = st.text(alphabet="ab{} \n\r\x0b\x0c\x1c\x85\u2028\u00e9", max_size=200)


def json_lines(text: str) -> list[str]:
    """``text`` split as JSON Lines are: at line feeds only (a ``\r`` before one dropped,
    any other separator kept in its line), a last line without one kept."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


@FAST
@given(SEPARATED, st.integers(1, 9))
def test_lines_are_split_as_the_whole_text_would_be(text: str, block: int) -> None:
    assert list(read_lines(io.BytesIO(text.encode()), block=block)) == json_lines(text)


@FAST
@given(st.binary(max_size=40), st.integers(1, 9))
def test_bad_bytes_are_reported_where_a_whole_read_reports_them(data: bytes, block: int) -> None:
    try:
        io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
        expected = None
    except UnicodeDecodeError as exc:
        expected = str(exc)
    try:
        list(read_lines(io.BytesIO(data), block=block))
        got = None
    except UnicodeDecodeError as exc:
        got = str(exc)
    assert got == expected


ROOT = Path(__file__).resolve().parents[2]
HEADER = json.dumps({"kind": "header", "schema": SCHEMA})
P2_LOG = "\n".join(
    [
        HEADER,
        json.dumps({"kind": "delivered", "t": 0, "key": ["s1", 1], "stream": "post:1"}),
        json.dumps({"kind": "presented", "t": 0, "key": ["s1", 1]}),
        json.dumps({"kind": "presented", "t": 0, "key": ["s1", 1]}),
    ]
)


def test_bad_bytes_after_the_violation_still_make_the_log_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As when the log was read whole before it was judged: exit 2, the absolute
    position of the bad byte (past the first 64 KiB block)."""
    prefix = (P2_LOG + "\n" + " " * 70_000 + "\n").encode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(prefix + b"\xff\n")
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == (
        f"audit: {path}: 'utf-8' codec can't decode byte 0xff in position {len(prefix)}: "
        "invalid start byte\n"
    )


@pytest.mark.parametrize("binary", [True, False])
def test_standard_input_is_read_as_a_stream(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], binary: bool
) -> None:
    data = P2_LOG + "\r\n"
    stdin = io.TextIOWrapper(io.BytesIO(data.encode()), encoding="utf-8") if binary else None
    monkeypatch.setattr(sys, "stdin", stdin or io.StringIO(data))
    assert main(["-", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["violation"]["property"], out["violation"]["line"]) == ("P2", 4)


# ----------------------------------------------------------------- what is forgotten


def _ended_twice(first: str, others: int) -> str:
    rec: list[dict[str, Any]] = [{"kind": "began", "interaction": first}]
    rec.append({"kind": "ended", "interaction": first, "outcome": "completed"})
    for n in range(others):
        rec += [
            {"kind": "began", "interaction": f"post:{n + 100}"},
            {"kind": "ended", "interaction": f"post:{n + 100}", "outcome": "completed"},
        ]
    rec.append({"kind": "ended", "interaction": first, "outcome": "failed"})
    return "\n".join([HEADER, *(json.dumps({"t": 0, **r}) for r in rec)]) + "\n"


def test_retain_is_how_far_back_a_record_is_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``post:1`` ends again after two other interactions ended: P5 while it is among the
    remembered ones, forgotten (a first end) once it is not."""
    path = tmp_path / "twice.jsonl"
    path.write_text(_ended_twice("post:1", 2))
    assert main([str(path), "--retain", "2"]) == 0
    assert main([str(path), "--retain", "3"]) == 1
    assert main([str(path), "--retain", "all"]) == 1
    assert main([str(path)]) == 1  # the default remembers thousands
    capsys.readouterr()
    for bad in ("-1", "many"):
        assert main([str(path), "--retain", bad]) == 2
        assert "--retain" in capsys.readouterr().err


def test_retain_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"^retain must be >= 0 or None$"):
        AuditMonitor(retain=-1)


LONG = 200_000
RETAIN_SMALL = 64
BOUND = 4_000
"""Entries the monitor and the lifecycle may hold with ``retain=64``: 64 ended
interactions, the live ones and the open GET generation's requests (a few dozen entries
each); the 200,000 records below carry some 25,000 interactions."""


def test_two_hundred_thousand_records_keep_the_state_under_a_fixed_bound() -> None:
    life = Lifecycle()
    monitor = AuditMonitor(retain=RETAIN_SMALL, on_forget=life.forget)
    peak = 0
    interactions = 0
    for obs, _ in synthetic_log(LONG):
        assert monitor.check(obs) == () and life.observe(obs) is None, obs
        monitor.apply(obs)
        interactions += isinstance(obs, P.Ended)
        peak = max(peak, monitor.retained() + life.retained())
    assert interactions > 5 * BOUND
    assert peak < BOUND, peak
    assert len(monitor._ended) == RETAIN_SMALL


def test_a_long_audit_ends_with_a_state_independent_of_the_log_length() -> None:
    """The final state of a 100,000-record audit (some 12,500 interactions, three times
    the default window) holds what the default window keeps, as much as one of half the
    length does, not every interaction of the log."""

    def entries(result: AuditResult) -> int:
        return sum(len(v) for v in result.final_state.values() if not isinstance(v, bool))

    half = audit_text("\n".join(synthetic_lines(LONG // 4)) + "\n")
    full = audit_text("\n".join(synthetic_lines(LONG // 2)) + "\n")
    assert half.ok and full.ok and full.records == LONG // 2
    assert entries(full) <= 8 * DEFAULT_RETAIN
    assert abs(entries(full) - entries(half)) < DEFAULT_RETAIN // 4


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(0, 8))
def test_synthetic_logs_conform_and_their_violation_is_the_last_line(
    seed: int, retain: int
) -> None:
    text = "\n".join(synthetic_lines(2_000, seed=seed, violation=True)) + "\n"
    result = audit_text(text, retain=retain)
    assert result.finding is not None
    assert (result.finding.name, result.finding.line) == ("P2", 2_001)
