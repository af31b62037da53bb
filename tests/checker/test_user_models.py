"""The checker as a tool for models of one's own: errors name the line of the model's code,
a directory stands for its model files, a default state bound stops a model that grows
forever (and says so), a search warns when memory runs short. Each feature is shown on a
model that must trip it and one that must not."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from python_runner import Run

from fsm.checker import BaseModel, Checker, Property, check
from fsm.checker import explore as explore_module
from fsm.checker.cli import main
from fsm.checker.explore import DEFAULT_MAX_STATES, MemoryUseWarning
from fsm.checker.loader import (
    ModelLoadError,
    builtin_models,
    is_model_file,
    load_model,
    model_files,
    unload_models,
)

COUNTER = textwrap.dedent(
    '''
    """A counter to {top}: {body}"""
    from fsm.checker import BaseModel, Property


    class Counter(BaseModel[int, str]):
        def init_states(self):
            return [0]

        def actions(self, n):
            return ["inc"] if n < {top} else []

        def next_state(self, n, action):
            return n + 1

        def is_terminal(self, n):
            return n == {top}

        def properties(self):
            return [Property.always("below {bad}", lambda n: n < {bad})]


    MODEL = Counter()
    '''
)
"""A model file: a counter to ``top`` whose invariant fails at ``bad`` (``body`` says why)."""


def counter(top: int, bad: int, body: str = "") -> str:
    return COUNTER.format(top=top, bad=bad, body=body or f"fails at {bad}")


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


# ------------------------------------------------------------ where a model failed


RAISES = counter(5, 9) + textwrap.dedent(
    """
    class Raises(Counter):
        def next_state(self, n, action):
            return 10 // (3 - n)


    MODEL = Raises()
    """
)


def _line(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_a_model_that_raises_names_the_line_of_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "raises.py", RAISES)
    assert main([str(bad), "-q"]) == 2
    err = capsys.readouterr().err
    line = _line(bad, "        return 10 // (3 - n)")
    assert "model raised ZeroDivisionError: integer division or modulo by zero\n" in err
    assert f"  at {bad}:{line}, in next_state: return 10 // (3 - n)\n" in err
    assert "raised applying 'inc'" in err and "Traceback" not in err
    fixed = write(tmp_path, "fixed.py", counter(5, 9))
    assert main([str(fixed), "-q"]) == 0
    assert "  at " not in capsys.readouterr().err


def test_the_api_names_the_line_of_the_model_that_raised(tmp_path: Path) -> None:
    bad = write(tmp_path, "raises.py", RAISES)
    with pytest.raises(explore_module.ModelError) as info:
        check(load_model(str(bad)))
    where = info.value.location
    assert where is not None and Path(where.file) == bad
    assert (where.line, where.function) == (
        _line(bad, "        return 10 // (3 - n)"),
        "next_state",
    )


def test_a_model_file_that_fails_to_import_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(tmp_path, "broken.py", counter(5, 9) + "\nLIMIT = undefined_name + 1\n")
    with pytest.raises(ModelLoadError) as info:
        load_model(str(broken))
    line = _line(broken, "LIMIT = undefined_name + 1")
    assert info.value.location is not None and info.value.location.line == line
    assert main([str(broken)]) == 2
    err = capsys.readouterr().err
    assert "import failed: NameError: name 'undefined_name' is not defined" in err
    assert f"  at {broken}:{line}, in <module>: LIMIT = undefined_name + 1" in err
    fn = counter(5, 9).replace("MODEL = Counter()", "def model():\n    return {}[1]")
    building = write(tmp_path, "building.py", fn)
    assert main([str(building)]) == 2
    err = capsys.readouterr().err
    assert f"building the model failed: KeyError(1)\n  at {building}:" in err


# ------------------------------------------------------------ a directory of models


def test_a_directory_checks_every_model_file_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    write(folder, "b_fails.py", counter(5, 3))
    write(folder, "a_holds.py", counter(5, 9))
    write(folder, "_helper.py", "X = 1\n")  # imported by models: not one
    write(folder, "test_mine.py", "def test_nothing():\n    pass\n")
    write(folder, "conftest.py", "")
    write(folder / "sub", "deeper.py", counter(5, 3))  # not searched
    assert [Path(f).name for f in model_files(str(folder))] == ["a_holds.py", "b_fails.py"]
    assert main([str(folder), "-q", "--json"]) == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["passed"] for r in records] == [True, False]
    (folder / "b_fails.py").unlink()
    assert main([str(folder), "-q"]) == 0


def test_unloading_frees_the_models_and_the_next_load_runs_the_files_afresh(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mine"
    write(folder, "_helper.py", "TOKEN = object()\n")
    write(folder, "counter.py", counter(3, 9) + "from ._helper import TOKEN\n")
    unload_models()  # what the process loaded before this test
    model = load_model(str(folder / "counter.py"))
    token = model_token(model)
    check(model)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is not None  # its module is still registered, and holds it
    assert unload_models() == 3  # the directory's package, the model file, its helper
    gc.collect()
    assert alive() is None
    assert unload_models() == 0
    assert model_token(load_model(str(folder / "counter.py"))) is not token  # the helper ran


def model_token(model: object) -> object:
    """The ``TOKEN`` the model's file imported from its helper."""
    return sys.modules[type(model).__module__].TOKEN


def test_a_directory_without_model_files_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "empty", "_helper.py", "X = 1\n")
    assert main([str(tmp_path / "empty")]) == 2
    assert "no model files in this directory" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such model file or directory" in capsys.readouterr().err
    assert not is_model_file("conftest.py") and is_model_file("mine.py")


def test_the_shipped_models_directory_is_what_builtin_all_checks() -> None:
    models = Path(__file__).resolve().parents[2] / "models"
    assert [Path(f).stem for f in model_files(str(models))] == builtin_models()


# ------------------------------------------------------------ the default state bound

GROWS = textwrap.dedent(
    '''
    """A counter that never stops: its state space has no end."""
    from fsm.checker import BaseModel, Property


    class Grows(BaseModel[int, str]):
        def init_states(self):
            return [0]

        def actions(self, n):
            return ["inc"]

        def next_state(self, n, action):
            return n + 1

        def properties(self):
            return [Property.always("natural", lambda n: n >= 0)]


    MODEL = Grows()
    '''
)


def test_the_default_state_bound_stops_a_model_that_grows_forever(
    tmp_path: Path, python: Run
) -> None:
    """Without a bound the search would run until the machine runs out of memory."""
    grows = write(tmp_path, "grows.py", GROWS)
    try:
        done = python(["-m", "fsm", "check", "-q", "--json", str(grows)], tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("a model that grows forever ran on past the default bound")
    assert done.returncode == 1
    record = json.loads(done.stdout)
    assert (record["states"], record["complete"]) == (DEFAULT_MAX_STATES, False)
    assert record["bound"] == f"max_states={DEFAULT_MAX_STATES}"
    assert (
        f"fsm check: Grows: stopped at {DEFAULT_MAX_STATES:,} states, the default bound: its"
        " state space is larger, or grows without end" in done.stderr
    )
    assert "--max-states none: no bound" in done.stderr


def test_a_bound_that_stops_a_run_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grows = write(tmp_path, "grows.py", GROWS)
    assert main(["-q", str(grows), "--max-states", "50"]) == 1
    captured = capsys.readouterr()
    assert "INCOMPLETE (max_states=50 hit; nothing proved)" in captured.out
    assert "fsm check: Grows: stopped at 50 states (--max-states)" in captured.err
    assert main(["-q", str(grows), "--max-depth", "7"]) == 1
    captured = capsys.readouterr()
    assert "INCOMPLETE (max_depth=7 hit; nothing proved)" in captured.out
    assert "fsm check: Grows: stopped at depth 7 (--max-depth)" in captured.err
    bounded = write(tmp_path, "bounded.py", counter(50, 99))
    assert main(["-q", str(bounded)]) == 0
    assert "stopped" not in capsys.readouterr().err


def test_the_default_state_bound_is_the_checkers_and_none_lifts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = load_model(str(write(tmp_path, "grows.py", GROWS)))
    assert Checker(model).max_states == DEFAULT_MAX_STATES == 2_000_000
    assert Checker(model, max_states=None).max_states is None
    bounded = write(tmp_path, "bounded.py", counter(50, 99))
    assert main(["-q", str(bounded), "--max-states", "none"]) == 0
    assert main(["-q", str(bounded), "--max-states", "many"]) == 2
    assert "'many' is not a number or 'none'" in capsys.readouterr().err


# ------------------------------------------------------------ running short of memory


class Line(BaseModel[int, str]):
    """0 -> 1 -> ... -> 3000: past a memory look (every 1,024 states expanded)."""

    def init_states(self) -> Sequence[int]:
        return [0]

    def actions(self, n: int) -> Iterable[str]:
        return ["step"] if n < 3000 else []

    def next_state(self, n: int, action: str) -> int | None:
        return n + 1

    def is_terminal(self, n: int) -> bool:
        return n == 3000

    def properties(self) -> Sequence[Property[int]]:
        return [Property.always("natural", lambda n: n >= 0)]


def test_a_search_warns_once_when_it_holds_too_much_memory() -> None:
    with pytest.warns(MemoryUseWarning) as caught:
        report = check(Line(), memory_warning=1e-12)  # any process holds more than that
    assert report.ok and len(caught) == 1
    assert "Line: the search holds" in str(caught[0].message)
    assert "it may run out of memory before it ends" in str(caught[0].message)


def test_a_search_within_its_memory_does_not_warn(recwarn: pytest.WarningsRecorder) -> None:
    assert check(Line()).ok and check(Line(), memory_warning=None).ok
    assert not [w for w in recwarn if issubclass(w.category, MemoryUseWarning)]
    with pytest.raises(ValueError, match="memory_warning"):
        Checker(Line(), memory_warning=0)


def test_the_command_prints_the_memory_warning_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = write(tmp_path, "line.py", counter(3000, 5000))
    monkeypatch.setattr(explore_module, "_physical_memory", lambda: 1000)
    assert main(["-q", str(model)]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warned) == 1
    assert warned[0].startswith("fsm check: warning: Counter: the search holds ")
