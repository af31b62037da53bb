"""Every program in examples/ runs as a user would run it (a fresh interpreter, another
directory) and prints what its docstring says; the assertions inside the examples bite
when what they check is broken."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy(minutes=1)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

PRINTS = {
    "embed_guard.py": """\
show dialog ('4f1c', 1): Delete 3 files?
hide dialog ('4f1c', 1): Delete 3 files? (cancelled)
show dialog ('4f1c', 2): Delete 2 files?
wait 1.0 s before resuming post:7
GET post:7 with Last-Event-ID: e3
hide dialog ('4f1c', 2): Delete 2 files? (stale-request)
post:7 failed: StaleRequestError (stale-request)
ignored: answer-after-death
""",
    "check_my_model.py": """\
show-every-delivery: 25 states
  ✗ P1 violated: a dead request is never shown
    counterexample (5 steps):
      0. (init)    server=asking conn=up shown=0
      1. deliver   server=asking conn=up shown=1
      2. cut       server=asking conn=down shown=1
      3. resume    server=asking conn=up shown=1
      4. deadline  server=dead conn=up shown=1
      5. deliver   server=dead conn=up shown=2
  ✗ P2 violated: the question is shown at most once
    counterexample (4 steps):
      0. (init)   server=asking conn=up shown=0
      1. deliver  server=asking conn=up shown=1
      2. cut      server=asking conn=down shown=1
      3. resume   server=asking conn=up shown=1
      4. deliver  server=asking conn=up shown=2
show-once: 19 states
  all 4 properties hold
""",
    "audit_logs.py": """\
exit 0: guarded.jsonl: conforms (12 records)
exit 1: naive.jsonl:12: P2 violated: each interactive request key is presented at most once
line 12: P2, ('4f1c', 1) presented a second time
the record: {"key": ["4f1c", 1], "kind": "presented", "t": 10.1}
""",
    "guarded_session.py": """\
asked: Delete 1 files?
Deleted 1 files: a.txt
asked: Delete 2 files?
withdrawn: Delete 2 files?
Kept 2 files: confirmation expired
violations: []
""",
    "wire_scenarios.py": """\
seed:
  plain:   broke P2 P7, presented 2, failed
  guarded: passed, presented 1, completed
replayed_cancel:
  plain:   broke P1 P2 P7, presented 2, failed
  guarded: passed, presented 1, completed
replay_everything:
  plain:   broke P2, presented 2, completed
  guarded: passed, presented 1, completed
answer_conn_error:
  plain:   passed, presented 1, failed
  guarded: passed, presented 1, completed
answer_rejected:
  plain:   broke P3, presented 1, completed
  guarded: passed, presented 1, failed
half_open:
  plain:   passed, presented 1, failed
  guarded: passed, presented 1, completed
session_expired:
  plain:   broke P3, presented 1, failed
  guarded: passed, presented 1, failed
happy:
  plain:   passed, presented 1, completed
  guarded: passed, presented 1, completed
mrtr_expiry:
  plain:   broke P6, presented 1, failed
  guarded: passed, presented 1, failed
mrtr_reask:
  plain:   broke P2, presented 2, completed
  guarded: passed, presented 1, completed
mrtr_restart:
  plain:   passed, presented 1, failed
  guarded: passed, presented 1, failed
""",
}
"""What each example program prints, exactly (state counts and path lengths included)."""

PYTEST_EXAMPLES = {"test_my_client.py"}
"""Examples that are pytest files: run by pytest, every test in them must pass."""

NEEDS = {
    "guarded_session.py": "mcp",
    "test_my_client.py": "hypothesis",
    "wire_scenarios.py": "mcp",
}
"""The extra a program needs, by the module it imports."""


PYTEST_OPTIONS = ["-q", "-p", "no:cacheprovider", "--hypothesis-seed=0"]
"""pytest's options for an example: seeded, so a planted bug is found the same way each run
(the example database is the temporary directory's, new each time)."""


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


def _needs(name: str) -> None:
    module = NEEDS.get(name)
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} needs {module} (an extra), not installed here")


def test_every_example_is_run_by_this_test() -> None:
    shipped = {p.name for p in EXAMPLES.glob("*.py")}
    assert shipped == set(PRINTS) | PYTEST_EXAMPLES


@pytest.mark.parametrize("name", sorted(PRINTS))
def test_example_prints_what_it_says(name: str, tmp_path: Path) -> None:
    _needs(name)
    done = _run([str(EXAMPLES / name)], tmp_path)
    assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout == PRINTS[name]


def test_the_conformance_example_passes_under_pytest(tmp_path: Path) -> None:
    _needs("test_my_client.py")
    (tmp_path / "test_my_client.py").write_text((EXAMPLES / "test_my_client.py").read_text())
    done = _run(["-m", "pytest", *PYTEST_OPTIONS, "test_my_client.py"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b2 passed\b", done.stdout), done.stdout


def _edited(name: str, old: str, new: str, tmp_path: Path) -> Path:
    source = (EXAMPLES / name).read_text()
    assert source.count(old) == 1, f"{name} no longer contains {old!r}"
    path = tmp_path / name
    path.write_text(source.replace(old, new))
    return path


def test_the_conformance_example_fails_for_a_client_that_shows_replays(tmp_path: Path) -> None:
    """The passing test of the example is no formality: with the bug switched on in the
    client it fails, naming the property."""
    _needs("test_my_client.py")
    _edited("test_my_client.py", "show_replays=False", "show_replays=True", tmp_path)
    done = _run(
        ["-m", "pytest", *PYTEST_OPTIONS, "test_my_client.py", "-k", "Dialog"],
        tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"P[12] violated: ", done.stdout), done.stdout


def test_the_model_example_fails_when_the_fixed_policy_is_not(tmp_path: Path) -> None:
    """examples/check_my_model.py asserts what the checker found: with the fixed policy showing
    every delivery too, it exits with the properties that fail."""
    path = _edited("check_my_model.py", "return True, not memory", "return True, True", tmp_path)
    done = _run([str(path)], tmp_path)
    assert done.returncode == 1
    assert "AssertionError" in done.stderr and "P2 violated" in done.stderr, done.stderr


def test_the_audit_example_fails_when_a_log_changes(tmp_path: Path) -> None:
    """examples/audit_logs.py prints the audit's verdicts: a shipped log that stopped conforming
    shows in its output (here the guarded log presents the replay too)."""
    (tmp_path / "logs").mkdir()
    for log in ("guarded.jsonl", "naive.jsonl"):
        (tmp_path / "logs" / log).write_text((EXAMPLES / "logs" / log).read_text())
    guarded = tmp_path / "logs" / "guarded.jsonl"
    lines = guarded.read_text().splitlines(keepends=True)
    replay = '{"kind": "presented", "key": ["4f1c", 1], "t": 10.1}\n'
    guarded.write_text("".join([*lines[:11], replay, *lines[11:]]))
    (tmp_path / "audit_logs.py").write_text((EXAMPLES / "audit_logs.py").read_text())
    done = _run(["audit_logs.py"], tmp_path)
    assert done.stdout.splitlines()[0].startswith("exit 1: guarded.jsonl:12: P2 violated")


def test_the_wire_example_fails_when_the_guarded_client_is_not(tmp_path: Path) -> None:
    """examples/wire_scenarios.py exits 1 when the client in the guarded column breaks a
    property: here the plain client put in its place, on the seed incident alone (the
    printing test runs every scenario)."""
    _needs("wire_scenarios.py")
    loop = "for name in SCENARIOS:\n        plain = run_sync(name, plain_client)\n"
    old = loop + "        guarded = run_sync(name, guarded_client)"
    new = old.replace("SCENARIOS", '["seed"]').replace("guarded_client", "plain_client")
    done = _run([str(_edited("wire_scenarios.py", old, new, tmp_path))], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == "seed:\n  plain:   broke P2 P7, presented 2, failed\n" + (
        "  guarded: broke P2 P7, presented 2, failed\n"
    )
