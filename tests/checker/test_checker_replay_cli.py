"""Replay by name, emitted pytest modules, the loader and the ``python -m fsm check`` CLI."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from checker_models import Counter, GraphModel
from python_runner import Run

from fsm.checker import (
    ModelLoadError,
    Property,
    ReplayError,
    check,
    load_model,
    load_models,
    replay,
    violated_at,
)
from fsm.checker.cli import main

MODEL_FILE = textwrap.dedent(
    '''
    """A ring of {size} states with an optional exit; a bad state and a cycle."""
    from fsm.checker import BaseModel, Property


    class Ring(BaseModel[int, str]):
        def __init__(self, name: str, size: int, bad: int) -> None:
            self._name, self.size, self.bad = name, size, bad

        @property
        def name(self) -> str:
            return self._name

        def init_states(self):
            return [0]

        def actions(self, state):
            return ["next", "exit"] if state < self.size else []

        def next_state(self, state, action):
            if action == "exit":
                return self.size
            return (state + 1) % self.size

        def is_terminal(self, state):
            return state == self.size

        def properties(self):
            return [
                Property.always("not bad", lambda s: s != self.bad, "bad is unreachable"),
                Property.terminates(),
                Property.deadlock(),
            ]
    '''
)


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def test_replay_follows_names_and_rejects_unknown_steps() -> None:
    assert replay(Counter(), ["inc", "inc", "dec"]) == [0, 1, 2, 1]
    with pytest.raises(ReplayError, match=r"step 3 'dec' is not enabled.*enabled: \['inc'\]"):
        replay(Counter(top=1), ["inc", "dec", "dec"])
    with pytest.raises(ReplayError, match="no number 3"):
        replay(Counter(), [], init=3)


def test_replay_rejects_ambiguous_names() -> None:
    class Move:
        def __init__(self, target: int) -> None:
            self.target = target

        def __str__(self) -> str:
            return "move"

    class Ambiguous(Counter):
        def actions(self, state: int) -> list[Move]:  # type: ignore[override]
            return [Move(1), Move(2)] if state == 0 else []

        def next_state(self, state: int, action: Move) -> int | None:  # type: ignore[override]
            return action.target

    with pytest.raises(ReplayError, match="step 1 'move' is ambiguous"):
        replay(Ambiguous(), ["move"])

    class SameTarget(Ambiguous):
        def next_state(self, state: int, action: Move) -> int | None:  # type: ignore[override]
            return 1

    assert replay(SameTarget(), ["move"]) == [0, 1]  # same name, same successor: fine


def test_violated_at_checks_each_kind() -> None:
    ring_edges = {0: [("a", 1)], 1: [("b", 0)]}
    model = GraphModel(
        ring_edges, [Property.always("no 1", lambda s: s != 1), Property.terminates()]
    )
    assert violated_at(model, "no 1", [0, 1])
    assert not violated_at(model, "no 1", [0])
    assert violated_at(model, "L1", [0, 1, 0], loop_start=0)
    assert not violated_at(model, "L1", [0, 1], loop_start=0)
    stuck = GraphModel({}, [Property.deadlock()])
    assert violated_at(stuck, "deadlock", [0])
    with pytest.raises(KeyError, match="no property 'nope'"):
        violated_at(model, "nope", [0])


@pytest.mark.parametrize("prop", ["not bad", "L1", "deadlock"])
def test_emitted_pytest_module_replays_and_passes(tmp_path: Path, python: Run, prop: str) -> None:
    body = MODEL_FILE + "\nMODEL = Ring('ring', 5, 3)\n"
    if prop == "deadlock":
        body += "Ring.is_terminal = lambda self, s: False\n"
    model_file = write(tmp_path, "ring.py", body)
    model = load_model(model_file)
    path = check(model).assert_violated(prop)
    source = path.to_pytest("ring.py", prop)
    test_file = write(tmp_path, "test_replay_ring.py", source)
    assert "replay(model, STEPS" in source
    done = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", test_file], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_emitted_module_fails_once_the_model_is_fixed(tmp_path: Path, python: Run) -> None:
    model_file = write(tmp_path, "ring.py", MODEL_FILE + "\nMODEL = Ring('ring', 5, 3)\n")
    source = (
        check(load_model(model_file)).assert_violated("not bad").to_pytest("ring.py", "not bad")
    )
    write(tmp_path, "test_replay_ring.py", source)
    write(tmp_path, "ring.py", MODEL_FILE + "\nMODEL = Ring('ring', 2, 3)\n")
    # the broken model's bytecode, written when it was loaded above, would stand for this
    # fix: Python checks it by the source's size and its mtime in whole seconds, and the
    # fix has the same size and may land within the same second
    shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
    done = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_replay_ring.py"], tmp_path)
    assert done.returncode == 1
    assert "violated_at" in done.stdout  # replayed fine, but no longer a violation


def test_loader_forms(tmp_path: Path) -> None:
    one = write(tmp_path, "one.py", MODEL_FILE + "\nMODEL = Ring('r', 3, 9)\n")
    assert load_model(one).name == "r"  # type: ignore[attr-defined]
    fn = write(tmp_path, "fn.py", MODEL_FILE + "\ndef model():\n    return Ring('f', 3, 9)\n")
    assert load_model(fn).name == "f"  # type: ignore[attr-defined]
    many = write(
        tmp_path, "many.py", MODEL_FILE + "\nMODELS = [Ring('a', 3, 9), Ring('b', 4, 9)]\n"
    )
    assert [m.name for m in load_models(many)] == ["a", "b"]  # type: ignore[attr-defined]
    assert load_model(many, name="b").name == "b"  # type: ignore[attr-defined]
    with pytest.raises(ModelLoadError, match="several models"):
        load_model(many)
    with pytest.raises(ModelLoadError, match="no model named 'c'"):
        load_model(many, name="c")
    with pytest.raises(ModelLoadError, match="no such model file"):
        load_model(str(tmp_path / "missing.py"))
    empty = write(tmp_path, "empty.py", "X = 1\n")
    with pytest.raises(ModelLoadError, match="defines none of MODELS, MODEL or model"):
        load_model(empty)
    broken = write(tmp_path, "broken.py", "raise ValueError('nope')\n")
    with pytest.raises(ModelLoadError, match="import failed: ValueError: nope"):
        load_model(broken)
    not_model = write(tmp_path, "notmodel.py", "MODEL = 3\n")
    with pytest.raises(ModelLoadError, match="missing init_states"):
        load_model(not_model)


def test_cli_exit_0_when_everything_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_only = "Ring.actions = lambda self, s: ['exit'] if s < self.size else []\n"
    good = write(tmp_path, "good.py", MODEL_FILE + "\nMODEL = Ring('ok', 3, 9)\n" + exit_only)
    assert main([good, "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: states=2 transitions=1 depth=1 seconds=")
    assert "✓ not bad holds" in out and "✓ L1 holds" in out


def test_cli_exit_1_prints_counterexample_and_writes_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python: Run
) -> None:
    bad = write(tmp_path, "bad.py", MODEL_FILE + "\nMODELS = [Ring('a', 5, 3), Ring('b', 2, 9)]\n")
    out_dir = tmp_path / "generated"
    assert main([bad, "-q", "--write-tests", str(out_dir)]) == 1
    captured = capsys.readouterr()
    assert "✗ not bad violated" in captured.out and "-- loop starts here --" in captured.out
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == ["test_a_l1.py", "test_a_not_bad.py", "test_b_l1.py"]
    assert 'MODEL_NAME = "a"' in (out_dir / "test_a_l1.py").read_text()
    done = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_cli_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, "bad.py", MODEL_FILE + "\nMODELS = [Ring('a', 5, 3), Ring('b', 2, 9)]\n")
    assert main([bad, "--json"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert set(first) == {
        "model",
        "states",
        "transitions",
        "depth",
        "seconds",
        "complete",
        "bound",
        "symmetry",
        "represented",
        "properties",
        "coverage",
        "expected_violations",
        "passed",
    }
    assert first["expected_violations"] == [] and first["passed"] is False
    assert (first["model"], first["states"], first["transitions"], first["depth"]) == (
        "a",
        6,
        10,
        4,
    )
    assert first["complete"] is True and first["bound"] is None
    not_bad = first["properties"]["not bad"]
    assert not_bad["verdict"] == "violated" and not_bad["description"] == "bad is unreachable"
    steps = not_bad["counterexample"]["steps"]
    assert [s["action"] for s in steps] == ["next"] * 3
    assert not_bad["counterexample"]["loop_start"] is None
    assert (not_bad["why"], not_bad["at"]) == (None, 3)
    loop = first["properties"]["L1"]["counterexample"]
    assert loop["loop_start"] == 0 and len(loop["steps"]) == 5
    assert first["properties"]["L1"]["why"] == (
        "steps 1-5 lead back to the state after step 0: they can repeat for ever"
    )
    assert first["properties"]["deadlock"] == {
        "verdict": "holds",
        "kind": "deadlock",
        "description": "no reachable non-terminal state is stuck",
        "why": None,
        "at": None,
        "counterexample": None,
    }
    assert first["coverage"] == {"fired": [], "never_fired": []}


def test_cli_bound_gives_exit_1_and_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = write(tmp_path, "big.py", MODEL_FILE + "\nMODEL = Ring('big', 100, 1000)\n")
    assert main([big, "--json", "--max-states", "10"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] is False and data["states"] == 10
    assert data["bound"] == "max_states=10"
    assert data["properties"]["not bad"]["verdict"] == "unknown"


def test_cli_exit_2_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.py")]) == 2
    assert "no such model file" in capsys.readouterr().err
    assert main([write(tmp_path, "empty.py", "X = 1\n")]) == 2
    assert "defines none of MODELS, MODEL or model()" in capsys.readouterr().err
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err
    assert main(["x.py", "--max-states", "many"]) == 2
    assert main(["x.py", "--max-states", "-1"]) == 2
    capsys.readouterr()
    raising = MODEL_FILE + (
        "\nclass Bad(Ring):\n"
        "    def next_state(self, state, action):\n"
        "        if state == 2:\n"
        "            raise KeyError('lost')\n"
        "        return super().next_state(state, action)\n"
        "\nMODEL = Bad('bad', 5, 9)\n"
    )
    assert main([write(tmp_path, "raising.py", raising), "-q"]) == 2
    err = capsys.readouterr().err
    assert "model raised KeyError: 'lost'" in err
    assert "applying 'next'" in err and "1. next" in err and "2. next" in err
    assert "Traceback" not in err


def test_cli_through_python_m_fsm(tmp_path: Path, python: Run) -> None:
    ok = write(tmp_path, "ok.py", MODEL_FILE + "\nMODEL = Ring('ok', 3, 9)\n")
    done = python(["-m", "fsm", "check", ok, "--json"], tmp_path)
    assert done.returncode == 1  # the ring cycles
    assert json.loads(done.stdout)["properties"]["L1"]["verdict"] == "violated"
    missing = python(["-m", "fsm", "check", "nope.py"], tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
