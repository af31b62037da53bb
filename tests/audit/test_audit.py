"""The trace audit: conforming logs, each property's violation at the right line, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fsm import Guard
from fsm import events as ev
from fsm.audit import audit_text, main
from fsm.events import standalone_stream
from fsm.sse.observe import ObservedGuard
from fsm.trace import SCHEMA, TraceFormatError, dumps

ROOT = Path(__file__).resolve().parents[2]
HEADER = {"kind": "header", "schema": SCHEMA}
K = ["s1", 1]
ANSWER = {"action": "accept"}


def log(*records: dict[str, object]) -> str:
    return "\n".join(json.dumps(r) for r in (HEADER, *records)) + "\n"


def rec(kind: str, t: float = 0.0, **fields: object) -> dict[str, object]:
    return {"kind": kind, "t": t, **fields}


DELIVER = rec("delivered", key=K, stream="post:1")
PRESENT = rec("presented", key=K)


def guard_log() -> str:
    now = [0.0]
    lines: list[tuple[object, float]] = []
    g = ObservedGuard(Guard(clock=lambda: now[0]), on_observation=lambda o, t: lines.append((o, t)))
    g.feed(ev.SessionStarted("s1"))
    g.feed(ev.StreamOpened("post:1", origin=1))
    msg = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}
    g.feed(ev.SseEvent("post:1", msg, "e1"))
    g.feed(ev.StreamLost("post:1", clean=False))
    g.feed(ev.TimerFired("post:1"))
    g.feed(ev.StreamResumed("post:1"))
    g.feed(ev.ReplayBatch("post:1", (ev.SseEvent("post:1", msg, "e1"),)))
    g.feed(ev.UserAnswered(("s1", 1), ANSWER))
    g.feed(ev.SseEvent("post:1", {"jsonrpc": "2.0", "id": 1, "result": {}}, "e2"))
    assert not g.violations
    return dumps(g.log)  # type: ignore[arg-type]


def test_a_guard_log_conforms() -> None:
    result = audit_text(guard_log(), complete=True)
    assert result.ok and result.records > 5


def test_p2_violation_reported_at_its_line() -> None:
    text = log(DELIVER, PRESENT, rec("delivered", key=K, stream="post:1", replayed=True), PRESENT)
    result = audit_text(text)
    assert result.finding is not None
    assert (result.finding.name, result.finding.line) == ("P2", 5)
    assert result.finding.state_before["presented"] == [K]


CASES = {
    "P1": [DELIVER, rec("cancelled", key=K), PRESENT],
    "P2": [DELIVER, PRESENT, PRESENT],
    "P3": [
        rec("began", interaction="post:1"),
        DELIVER,
        PRESENT,
        rec("answered", key=K, answer=ANSWER),
        rec("submitted", key=K, answer=ANSWER),
        rec("rejected", key=K),
        rec("resumed", stream="post:1", cursor="e1"),
    ],
    "P4": [DELIVER, PRESENT, rec("submitted", key=K, answer={"action": "decline"})],
    "P5": [
        rec("began", interaction="post:1"),
        rec("ended", interaction="post:1", outcome="completed"),
        rec("ended", interaction="post:1", outcome="failed"),
    ],
    "P6": [
        DELIVER,
        PRESENT,
        rec("delivered", t=100.0, key=K, stream="post:1", replayed=True),
        rec("presented", t=100.0, key=["s1", 1]),
    ],
    "P7": [
        rec("event_seen", stream="post:1", event_id="e1"),
        rec("event_seen", stream="post:1", event_id="e2"),
        rec("resumed", stream="post:1", cursor="e1"),
    ],
    "L1": [rec("resumed", stream="get", cursor="e1") for _ in range(4)],
    "M": [
        DELIVER,
        PRESENT,
        rec("answered", key=K, answer=ANSWER),
        rec("submitted", key=K, answer=ANSWER),
        rec("rejected", key=K),
        rec("submitted", key=K, answer=ANSWER),
    ],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_property_violation_at_the_right_line(name: str) -> None:
    records = CASES[name]
    result = audit_text(log(*records))
    assert result.finding is not None, name
    # Each case's violating record is its last one (+1 for the header line).
    assert result.finding.line == len(records) + 1
    if name != "P6":
        assert result.finding.name == name
    else:  # a stale re-presentation is also a second presentation: reported with it
        assert result.finding.name == "P2"
        assert [n for n, _ in result.finding.also] == ["P6"]


def test_p6_alone() -> None:
    # A request first presented, deadline recorded; a replay past it without assertion,
    # then presented again: P6 (with P2). A fresh key first delivered by a stale replay is
    # not stale (no deadline known).
    from fsm import properties as P

    state, _ = P.step(P.MonitorState(), P.Presented(("s1", 1), 0.0))
    state, _ = P.step(state, P.Delivered(("s1", 1), "get", 100.0, replayed=True))
    _, bad = P.step(state, P.Presented(("s1", 1), 100.0))
    assert "P6" in {v.name for v in bad}


def test_p5_unfinished_only_when_complete() -> None:
    text = log(rec("began", interaction="post:1"))
    assert audit_text(text).ok
    finding = audit_text(text, complete=True).finding
    assert finding is not None and finding.name == "P5"


def standalone_log(names: list[str]) -> str:
    """A guard's log: the standalone GET opened under each of ``names`` in turn and cut
    before any event id (given up: nothing to resume from); the last one carries an event
    and is resumed from it."""
    lines: list[tuple[object, float]] = []
    g = ObservedGuard(Guard(clock=lambda: 0.0), on_observation=lambda o, t: lines.append((o, t)))
    g.feed(ev.SessionStarted("s1"))
    for name in names:
        g.feed(ev.StreamOpened(name))
        g.feed(ev.StreamLost(name, clean=False))
    last = standalone_stream(len(names) + 1)
    g.feed(ev.StreamOpened(last))
    g.feed(ev.SseEvent(last, {"jsonrpc": "2.0", "method": "notifications/message"}, "e1"))
    g.feed(ev.StreamLost(last, clean=False))
    g.feed(ev.TimerFired(last))
    return dumps(g.log)  # type: ignore[arg-type]


def test_standalone_get_generations_each_end_once_and_conform() -> None:
    text = standalone_log([standalone_stream(n) for n in (1, 2, 3)])
    ended = [r["interaction"] for r in map(json.loads, text.splitlines()) if r["kind"] == "ended"]
    assert ended == ["get", "get/2", "get/3"]
    result = audit_text(text, complete=True)
    assert result.ok, result.finding
    assert result.final_state["newest_event"] == {"get/4": "e1"}


def test_a_standalone_get_name_ended_twice_is_p5_at_its_line() -> None:
    text = standalone_log(["get", "get"])
    lines = text.splitlines()
    result = audit_text(text)
    assert result.finding is not None and result.finding.name == "P5"
    assert result.finding.why == "get ended twice"
    assert json.loads(lines[result.finding.line - 1])["kind"] == "ended"
    assert [json.loads(x)["kind"] for x in lines[: result.finding.line]].count("ended") == 2


def test_malformed_log_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(log(DELIVER) + "{not json\n")
    with pytest.raises(TraceFormatError) as info:
        audit_text(path.read_text())
    assert info.value.line == 3
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "Traceback" not in err


def test_missing_field_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(log(rec("presented")))
    assert main([str(path), "--json"]) == 2


def test_nesting_bomb_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bomb.jsonl"
    path.write_text(log(DELIVER) + "[" * 100_000 + "\n")
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3: nested too deeply" in err, err


@pytest.mark.parametrize("text", ["", "\n\n", log()])
def test_empty_log_says_so_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """No record (nothing, blank lines, a header alone) proves nothing: not 'conforms'."""
    path = tmp_path / "empty.jsonl"
    path.write_text(text)
    assert main([str(path)]) == 2
    captured = capsys.readouterr()
    assert "empty log (no records to audit)" in captured.err and captured.out == ""
    assert main([str(path), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["records"] == 0


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


BUDGET_OPTIONS = {
    "--ttl": "is not a number >= 0",
    "--max-resumes": "is not an integer >= 0",
    "--max-submissions": "is not an integer >= 0",
}
"""The audit's budget options and what each says of a value out of its field's range."""


@pytest.mark.parametrize("option", sorted(BUDGET_OPTIONS))
@pytest.mark.parametrize("value", ["-1", "nan", "two"])
def test_a_budget_out_of_range_is_a_bad_argument(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN TTL would silence P6 and a negative budget would report a violation of a log
    that conforms: both are refused before the log is read."""
    guarded = str(ROOT / "examples" / "logs" / "guarded.jsonl")
    assert main([guarded, option, value]) == 2
    assert f"argument {option}: {value!r} {BUDGET_OPTIONS[option]}" in capsys.readouterr().err
    assert main([guarded, option, "inf" if option == "--ttl" else "0"]) in (0, 1)


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p2.jsonl"
    path.write_text(log(*CASES["P2"]))
    assert main([str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert out["violation"]["property"] == "P2" and out["violation"]["line"] == 4


def test_cli_subprocess(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(guard_log())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(log(*CASES["P7"]))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fsm", "audit", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = run(str(good))
    assert ok.returncode == 0, ok.stderr
    assert "conforms" in ok.stdout
    found = run(str(bad))
    assert found.returncode == 1
    assert f"{bad}:4: P7 violated" in found.stdout
    assert "newest_event" in found.stdout
    missing = run(str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
