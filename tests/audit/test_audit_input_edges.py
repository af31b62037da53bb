"""The edges of what ``fsm audit`` reads: numbers, line breaks, bytes, headers and file names.

* every numeric field of a log (a record's ``t``, a delivery's or presentation's ``t``, the
  header's ``t``) is a finite number, read by one helper: a 400-digit integer, NaN or an
  infinity is a malformed line (exit 2, the line named), never a traceback, never a
  silenced P6; a log is strict JSON, so no ``NaN`` reaches a ``--json`` report either;
* a long line is read in linear time (the work is counted, not timed);
* standard input is read as a file is: its bytes, as strict UTF-8;
* records are separated by line feeds only (JSON Lines): U+2028, U+2029 and U+0085 inside a
  JSON string stay in their record, in a file, on standard input and in ``fsm.trace.loads``;
* the era is read from the parsed header, so a ``kind`` written with JSON escapes is a header;
* a log name (or a text from the log) that is not printable is printed escaped, on one
  line, under a strict UTF-8 stdout.

Real files in ``tmp_path``; the command line runs as a ``python -m fsm audit`` child
process where it is the target.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm import properties as P
from fsm import trace
from fsm.audit import audit_text, read_lines
from fsm.trace import SCHEMA, TraceFormatError

ROOT = Path(__file__).resolve().parents[2]
HEADER = json.dumps({"kind": "header", "schema": SCHEMA})
K = ["s1", 1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    env.update(extra)
    return env


def audit(
    *args: str | os.PathLike[str], stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m fsm audit ARGS`` in a child process; bytes out, nothing decoded here."""
    return subprocess.run(
        [sys.executable, "-m", "fsm", "audit", *map(os.fsdecode, args)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=60,
        env=env if env is not None else _env(),
    )


def rec(kind: str, t: object = 0, **fields: object) -> str:
    """One record with ``t`` written as the raw JSON token ``t`` (``NaN``, 400 digits)."""
    body = json.dumps({"kind": kind, **fields})
    return body[:-1] + f', "t": {t}}}'


def log_text(*records: str, header: str = HEADER) -> str:
    return "\n".join([header, *records]) + "\n"


def write(tmp_path: Path, text: str, name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def strict_json(data: bytes) -> Any:
    """``data`` parsed as RFC 8259 JSON: ``NaN`` and ``Infinity`` fail the test."""

    def constant(name: str) -> Any:
        pytest.fail(f"{name} in --json output: {data[:200]!r}")

    return json.loads(data, parse_constant=constant)


HUGE = 9 * 10**399
"""A valid JSON integer (under the 4,300-digit limit) that no float can hold."""


# ------------------------------------------------------------------ numeric fields


def test_a_400_digit_time_is_a_malformed_line_in_the_command(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        log_text(rec("delivered", key=K, stream="post:1"), rec("presented", HUGE, key=K)),
    )
    got = audit(path)
    assert b"Traceback" not in got.stderr, got.stderr.decode()[-400:]
    assert got.returncode == 2
    err = got.stderr.decode()
    assert "line 3" in err and "must be a finite number" in err
    assert len(err) < 400, "the refused value is shown cut, not in its 400 digits"
    as_json = audit(path, "--json")
    assert as_json.returncode == 2
    assert strict_json(as_json.stdout)["line"] == 3


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("record t", log_text(rec("began", HUGE, interaction="post:1"))),
        ("delivered t", log_text(rec("delivered", HUGE, key=K, stream="post:1"))),
        ("presented t", log_text(rec("presented", HUGE, key=K))),
        (
            "header t",
            log_text(
                rec("began", interaction="post:1"),
                header=rec("header", HUGE, schema=SCHEMA),
            ),
        ),
    ],
)
def test_every_numeric_field_refuses_an_integer_no_float_can_hold(where: str, text: str) -> None:
    """Each numeric field, wherever it is, is read by the one helper: the same refusal,
    naming the line, from :func:`fsm.trace.loads` and from the audit."""
    line = 1 if where == "header t" else 2
    with pytest.raises(TraceFormatError, match="t must be a finite number") as caught:
        list(trace.loads(text))
    assert caught.value.line == line
    with pytest.raises(TraceFormatError) as caught:
        audit_text(text)
    assert caught.value.line == line


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
@pytest.mark.parametrize("kind", ["began", "delivered", "presented", "header"])
def test_a_time_that_is_not_a_finite_number_is_a_malformed_line(kind: str, token: str) -> None:
    if kind == "header":
        text = log_text(rec("began", interaction="p"), header=rec("header", token, schema=SCHEMA))
    else:
        text = log_text(rec(kind, token, key=K, stream="post:1", interaction="post:1"))
    with pytest.raises(TraceFormatError) as caught:
        audit_text(text)
    assert caught.value.line == (1 if kind == "header" else 2)


def test_a_python_record_with_a_non_finite_or_huge_time_is_refused_by_from_record() -> None:
    """:func:`fsm.trace.from_record` is public: a record built in Python (not parsed) goes
    through the same helper, and a refused integer too long to print is not printed."""
    for t in (float("nan"), float("inf"), 10**400, 10**5000):
        record = {"kind": "presented", "key": K, "t": t}
        with pytest.raises(TraceFormatError, match="presented: t must be a finite number"):
            trace.from_record(record, 7)
    assert trace.from_record({"kind": "presented", "key": K, "t": 10**20}) == P.Presented(
        ("s1", 1), 1e20
    )


def p6_log(t: str) -> str:
    return log_text(
        rec("delivered", 0, key=K, stream="post:1", interactive=False),
        rec("presented", t, key=K),
        rec("delivered", 100, key=K, stream="post:1", replayed=True),
        rec("presented", 100, key=K),
    )


@pytest.mark.parametrize("token", ["NaN", "Infinity"])
def test_a_non_finite_time_does_not_silence_p6(tmp_path: Path, token: str) -> None:
    """With a finite time the log is a P6 violation (exit 1); with NaN or Infinity as its
    time it is malformed (exit 2), naming line 3, and ``--json`` stays JSON."""
    assert audit(write(tmp_path, p6_log("0"), "finite.jsonl")).returncode == 1
    path = write(tmp_path, p6_log(token))
    got = audit(path, "--json")
    assert got.returncode == 2, got.stdout.decode()[:300]
    report = strict_json(got.stdout)
    assert report["ok"] is False and report["line"] == 3
    with pytest.raises(TraceFormatError):
        audit_text(p6_log(token))


@pytest.mark.parametrize("token", ["NaN", "-Infinity", "1e999"])
def test_a_non_finite_number_anywhere_in_a_record_keeps_the_report_json(
    tmp_path: Path, token: str
) -> None:
    """NaN and Infinity are not JSON (RFC 8259) and 1e999 is no float: in an answer (echoed
    in a finding's record) the line is malformed, so ``--json`` never prints them."""
    answered = json.dumps({"kind": "answered", "t": 1, "key": K, "answer": {"x": 0}})
    answered = answered.replace('{"x": 0}', f'{{"x": {token}}}')
    path = write(
        tmp_path,
        log_text(rec("delivered", key=K, stream="post:1"), rec("presented", key=K), answered),
    )
    got = audit(path, "--json")
    assert got.returncode == 2
    assert strict_json(got.stdout)["line"] == 4


# ------------------------------------------------------------------ a long line


def _scanned(data: bytes, block: int) -> tuple[int, list[str]]:
    """Characters handed to ``str`` methods while :func:`read_lines` splits ``data``: the
    work of scanning and re-scanning the text, counted (a C method is profiled with the
    string it is bound to)."""
    total = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal total
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, str):
                total += len(owner)

    sys.setprofile(profile)
    try:
        lines = list(read_lines(io.BytesIO(data), block=block))
    finally:
        sys.setprofile(None)
    return total, lines


def test_a_long_line_is_split_in_linear_work() -> None:
    """A line of L bytes spanning L / block blocks: the reader re-joined and re-scanned the
    whole unterminated tail with every block, O(L^2 / block) characters (at 4 MiB, 17
    times the line; at 8 MiB, 33 times). Now every character is scanned a bounded number
    of times, whatever the line's length: the count grows with L, not L^2."""
    record = b'{"kind": "began", "interaction": "x", "t": 0}'
    counts = []
    for size in (1 << 20, 8 << 20):
        data = record + b" " * size + b"\n" + record + b"\n"
        scanned, lines = _scanned(data, 1 << 16)
        assert len(lines) == 2 and lines[1] == record.decode()
        assert len(lines[0]) == len(record) + size
        assert scanned <= 3 * len(data), f"{scanned / len(data):.1f} characters per byte"
        counts.append(scanned)
    assert counts[1] / counts[0] < 8 * 1.5  # eight times the line, about eight times the work


# ------------------------------------------------------------------ standard input


def test_standard_input_is_read_as_strict_utf8_as_a_file_is(tmp_path: Path) -> None:
    """Under a C.UTF-8 locale standard input's text layer decodes with
    ``surrogateescape``: the bad byte a file is refused for (exit 2) became text and the
    log "conformed". Now both report the same decoding error, at the same position."""
    data = log_text('{"kind": "began", "interaction": "p\xff", "t": 0}').encode("latin-1")
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    for env in (_env(LC_ALL="C.UTF-8"), _env(LC_ALL="C", PYTHONUTF8="1"), _env()):
        by_path = audit(path, env=env)
        by_stdin = audit("-", stdin=data, env=env)
        assert by_path.returncode == by_stdin.returncode == 2, by_stdin.stdout.decode()
        why = by_path.stderr.split(b": ", 2)[-1]
        assert b"can't decode byte 0xff" in why
        assert by_stdin.stderr == b"audit: -: " + why


def test_standard_input_is_split_as_a_file_is() -> None:
    answered = json.dumps(
        {"kind": "answered", "t": 0, "key": K, "answer": {"text": "a\u2028b"}}, ensure_ascii=False
    )
    data = log_text(
        rec("delivered", key=K, stream="post:1"), rec("presented", key=K), answered
    ).encode()
    got = audit("-", stdin=data, env=_env(LC_ALL="C.UTF-8"))
    assert got.returncode == 0, got.stderr.decode()
    assert got.stdout == b"-: conforms (3 records)\n"


# ------------------------------------------------------------------ line separators

SEPARATORS = ["\u2028", "\u2029", "\x85"]


@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_unicode_line_separator_in_a_string_stays_in_its_record(
    tmp_path: Path, separator: str
) -> None:
    answer = {"text": f"one{separator}two"}
    answered = json.dumps(
        {"kind": "answered", "t": 0, "key": K, "answer": answer}, ensure_ascii=False
    )
    assert separator in answered
    text = log_text(rec("delivered", key=K, stream="post:1"), rec("presented", key=K), answered)
    got = audit(write(tmp_path, text))
    assert got.returncode == 0, got.stderr.decode()
    assert [(n, o) for n, o, _ in trace.loads(text)][-1] == (4, P.Answered(("s1", 1), answer))
    assert audit_text(text).records == 3


def test_line_numbers_count_line_feeds_only(tmp_path: Path) -> None:
    """A bad record after a record holding U+2028 and U+0085 is named by its line: the
    separators inside strings do not shift the count (they cut the record holding them
    into three lines, the first reported malformed, at line 2)."""
    began = json.dumps(
        {"kind": "began", "t": 0, "interaction": "a\u2028b\x85c"}, ensure_ascii=False
    )
    text = log_text(began, '{"kind": "began", "t": 0}')
    with pytest.raises(TraceFormatError) as caught:
        list(trace.loads(text))
    assert caught.value.line == 3
    got = audit(write(tmp_path, text), "--json")
    assert got.returncode == 2
    assert strict_json(got.stdout)["line"] == 3


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 16])
def test_the_reader_and_loads_split_on_line_feeds_only(block: int) -> None:
    """One splitter (:func:`fsm.trace.split_lines`) for both: line feeds end lines, a
    ``\\r`` before one is dropped (``\\r\\n`` logs), nothing else ends a line, and a last line
    without a line feed is kept."""
    text = "a\u2028b\r\nc\rd\x0b\x0c\x1c\x1d\x1e\x85e\n\n\u00e9\u2029f"
    expected = ["a\u2028b", "c\rd\x0b\x0c\x1c\x1d\x1e\x85e", "", "\u00e9\u2029f"]
    assert list(read_lines(io.BytesIO(text.encode()), block=block)) == expected
    assert list(trace.split_lines([text[i : i + block] for i in range(0, len(text), block)])) == (
        expected
    )


# ------------------------------------------------------------------ the era


def _tasks_log() -> str:
    from fsm.testing.tasks_kit import tasks_conformance_machine
    from support.tasks_clients import guarded_task

    k = tasks_conformance_machine(guarded_task, questions=1, check=())()
    k.server_answers_poll()
    k.server_supersedes(0)
    k.server_answers_poll()
    k.user_answers(0)
    k.server_answers_update("lose")
    k.server_answers_poll()
    k.server_answers_update("ack")
    k.server_takes_answers(True)
    k.server_answers_poll()
    k.server_answers_update("ack")
    k.server_takes_answers(False)
    k.server_completes()
    k.teardown()
    assert k.ended == 1 and not k.violated
    return trace.dumps(k.log, era="tasks")


@pytest.mark.parametrize(
    "spelled",
    [
        '"\\u0068eader"',  # the value escaped
        '"head\\u0065r"',
        '"\\u0068\\u0065\\u0061\\u0064\\u0065\\u0072"',
    ],
)
def test_the_era_is_read_from_the_parsed_header(tmp_path: Path, spelled: str) -> None:
    """A task log conforms by the tasks machine and violates the SSE one (``M``); its
    header, with ``kind`` spelled with JSON escapes, still picks the tasks machine."""
    text = _tasks_log()
    first, rest = text.split("\n", 1)
    assert audit_text(text, complete=True).ok
    assert audit_text(rest, complete=True).finding is not None  # the SSE machine's M
    escaped = first.replace('"header"', spelled) + "\n" + rest
    assert json.loads(escaped.split("\n", 1)[0]) == json.loads(first)
    assert audit_text(escaped, complete=True).ok
    got = audit(write(tmp_path, escaped), "--complete")
    assert got.returncode == 0, got.stdout.decode()


def test_a_header_escaped_throughout_still_names_the_era(tmp_path: Path) -> None:
    """Keys and values alike: ``"\\u006bind": "\\u0068eader"``, ``"\\u0065ra":
    "\\u0074asks"``."""
    text = _tasks_log()
    first, rest = text.split("\n", 1)
    escaped = first
    for word, spelled in [("kind", "\\u006bind"), ("header", "\\u0068eader"), ("era", "\\u0065ra")]:
        escaped = escaped.replace(f'"{word}"', f'"{spelled}"')
    escaped = escaped.replace('"tasks"', '"\\u0074asks"')
    assert "kind" not in escaped and "header" not in escaped and "tasks" not in escaped
    assert json.loads(escaped) == json.loads(first)
    got = audit(write(tmp_path, escaped + "\n" + rest), "--complete")
    assert got.returncode == 0, got.stdout.decode()


# ------------------------------------------------------------------ printed names


def _strict_utf8() -> dict[str, str]:
    return _env(PYTHONIOENCODING="utf-8")


def test_a_log_name_that_is_not_utf8_is_printed_escaped(tmp_path: Path) -> None:
    name = tmp_path / os.fsdecode(b"guarded-\xff.jsonl")
    name.write_bytes((ROOT / "examples" / "logs" / "guarded.jsonl").read_bytes())
    got = audit(name, env=_strict_utf8())
    assert b"Traceback" not in got.stderr, got.stderr.decode()[-300:]
    assert got.returncode == 0
    assert got.stdout.decode().endswith("guarded-\\xff.jsonl: conforms (12 records)\n")


def test_every_message_naming_an_undecodable_log_name_prints(tmp_path: Path) -> None:
    """The name is printed in the verdict, a violation, a malformed or empty log's message
    and a read error's: each under a strict UTF-8 stdout, the byte shown ``\\xff`` (and
    with ``--json``, in JSON)."""
    logs = {
        "violation": (
            log_text(
                rec("ended", interaction="p", outcome="completed"),
                rec("ended", interaction="p", outcome="completed"),
            ),
            1,
        ),
        "malformed": ("{not json\n", 2),
        "empty": (HEADER + "\n", 2),
        "unreadable": (None, 2),
    }
    for what, (text, status) in logs.items():
        path = tmp_path / os.fsdecode(f"{what}-\xff.jsonl".encode("latin-1"))
        if text is not None:
            path.write_text(text)
        for json_out in (False, True):
            got = audit(path, *(["--json"] if json_out else []), env=_strict_utf8())
            assert b"Traceback" not in got.stderr, (what, got.stderr.decode()[-300:])
            assert got.returncode == status, (what, got.stderr.decode())
            if json_out:
                strict_json(got.stdout)
            else:
                out = (got.stdout + got.stderr).decode()
                assert f"{what}-\\xff.jsonl" in out, (what, out)


def test_a_log_name_with_a_line_break_is_printed_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, (ROOT / "examples" / "logs" / "guarded.jsonl").read_text(), "a\nb.jsonl")
    got = audit(path, env=_strict_utf8())
    assert got.returncode == 0
    assert got.stdout.decode().splitlines() == [f"{tmp_path}/a\\nb.jsonl: conforms (12 records)"]


def test_a_finding_naming_an_undecodable_interaction_prints(tmp_path: Path) -> None:
    """A finding's why names the interaction as the log spells it: a lone surrogate
    (``"\\udcff"`` in JSON) or a line break there is printed escaped too."""
    ended = json.dumps(
        {"kind": "ended", "t": 0, "interaction": "p\udcff\nq", "outcome": "completed"}
    )
    got = audit(write(tmp_path, log_text(ended, ended)), env=_strict_utf8())
    assert b"Traceback" not in got.stderr, got.stderr.decode()[-300:]
    assert got.returncode == 1
    lines = got.stdout.decode().splitlines()
    assert lines[1] == "  why: p\\udcff\\nq ended twice"
