"""The command line's contracts: pure JSON Lines, one line per passing model, exit codes in
every ``--help``, quiet on a closed pipe, partial searches said, bounds set by ``--set``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from python_runner import Run

from fsm.__main__ import PIPE_CLOSED, SUBCOMMANDS
from fsm.__main__ import main as fsm_main
from fsm.checker.cli import main
from fsm.checker.loader import builtin_model_file, builtin_models

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in (ROOT / "models").glob("*.py"))


def test_shipped_models_are_found_by_name() -> None:
    assert builtin_models() == SHIPPED
    assert (
        Path(builtin_model_file("seed_incident")).read_bytes()
        == (ROOT / "models" / "seed_incident.py").read_bytes()
    )


def test_json_stdout_is_pure_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """A faulty-client model's verdict line goes to stderr; stdout parses line by line."""
    assert main(["--json", "-q", "--builtin", "seed_incident", "--builtin", "mcp_sdk_2_3"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["model"] for r in records] == ["seed-incident", "mcp-sdk-2.3.0"]
    assert records[1]["expected_violations"] == ["P2", "P7"] and records[1]["passed"] is True
    assert "mcp-sdk-2.3.0: violations ['P2', 'P7'] as expected" in captured.err


def test_partial_search_never_shows_a_bare_holds_mark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "--builtin", "guarded", "--max-states", "50"]) == 1
    out = capsys.readouterr().out
    holds = [line for line in out.splitlines() if "✓" in line]
    assert holds and all("the search was partial" in line for line in holds), holds
    assert main(["-q", "--brief", "--builtin", "guarded", "--max-states", "50"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert "INCOMPLETE" in first and "the search was partial" in first


def test_set_changes_the_bounds_of_every_world(capsys: pytest.CaptureFixture[str]) -> None:
    # With two requests the naive client also leaves one unanswered at quiescence.
    assert main(["--json", "-q", "--builtin", "seed_incident", "--set", "requests=2"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["model"] == "seed-incident [requests=2]" and record["states"] == 4221
    assert record["properties"]["P5-quiescent"]["verdict"] == "violated"


PLAIN_MODEL = str(Path(__file__).with_name("plain_model.py"))


@pytest.mark.parametrize(
    ("target", "setting", "message"),
    [
        ("seed_incident", "replay=never", "Bounds.replay: 'never' is not one of after, inclusive"),
        ("seed_incident", "requests=-1", "Bounds.requests: -1 is not an integer >= 0"),
        ("seed_incident", "requests=two", "Bounds.requests: 'two' is not an integer >= 0"),
        ("seed_incident", "reaper=maybe", "Bounds.reaper: 'maybe' is not true or false"),
        ("seed_incident", "colour=red", "no bound 'colour'; the bounds are requests, cuts,"),
        ("seed_incident", "requests", "--set 'requests': write FIELD=VALUE"),
        ("mcp_sdk_2_3_mrtr", "questions=-1", "MrtrBounds.questions: -1 is not an integer >= 0"),
        ("mcp_sdk_2_3_mrtr", "tick=never", "MrtrBounds.tick: 'never' is not one of seen, missed"),
        ("mcp_sdk_2_3_mrtr", "ttl=0", "MrtrBounds.ttl: 0.0 is not a number > 0"),
        ("mcp_sdk_2_3_mrtr", "requests=2", "no bound 'requests'; the bounds are questions,"),
        (PLAIN_MODEL, "requests=2", "model 'Plain' has no bounds to --set"),
    ],
)
def test_bad_set_is_exit_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], target: str, setting: str, message: str
) -> None:
    where = [target] if target == PLAIN_MODEL else ["--builtin", target]
    assert main(["-q", *where, "--set", setting]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_set_changes_the_bounds_of_every_mrtr_world(capsys: pytest.CaptureFixture[str]) -> None:
    """The MRTR era's worlds take ``--set`` as the SSE era's do: two questions explore the
    space of the shipped two-question variant."""
    assert main(["--json", "-q", "--builtin", "guarded_mrtr", "--set", "questions=2"]) == 0
    records = {r["model"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert len(records) == 44 and all(r["passed"] for r in records.values())
    both = records["guarded-mrtr[reject,answers,seen,reasks,restart] [questions=2]"]
    shipped = records["guarded-mrtr[reject,answers,seen,reasks,restart] x2 [questions=2]"]
    assert (both["states"], both["transitions"]) == (248, 326)
    assert (shipped["states"], shipped["transitions"]) == (248, 326)


def test_unknown_builtin_and_nothing_to_check_are_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--builtin", "nope"]) == 2
    assert f"no shipped model 'nope'; known: {', '.join(SHIPPED[:2])}" in capsys.readouterr().err
    assert main([]) == 2
    assert "name a model file or a --builtin model" in capsys.readouterr().err


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_every_help_lists_the_exit_status(
    capsys: pytest.CaptureFixture[str], command: str | None
) -> None:
    assert fsm_main(["--help"] if command is None else [command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:" in out and " 2 " in out.split("exit status:")[1] + " ", out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import fsm

    assert fsm_main(["--version"]) == 0
    assert capsys.readouterr().out == f"dead-or-resumable {fsm.__version__}\n"


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``fsm check ... | head -1``: the reader goes away after one line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsm", "check", "-q", "--builtin", "guarded"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == PIPE_CLOSED
    assert first.startswith(b"guarded[") and err == ""


def test_bad_bounds_in_a_model_file_are_exit_2(tmp_path: Path, python: Run) -> None:
    file = tmp_path / "bad.py"
    file.write_text(
        "from fsm.worlds.sse import Bounds\n"
        "from fsm.checker.loader import load_model, builtin_model_file\n"
        "Bounds(unknown_answer='418')\n"
    )
    done = python(["-m", "fsm", "check", str(file)], tmp_path)
    assert done.returncode == 2
    assert "Bounds.unknown_answer: '418' is not one of 202, 404, 404rpc, rpc" in done.stderr
    assert "Traceback" not in done.stderr
