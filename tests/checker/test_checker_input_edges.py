"""``fsm check`` at the edges of what users give it: a model whose code raises what is not
an ``Exception`` (``SystemExit``, pytest's ``Skipped``), a property whose name is no
plain word (``--write-tests`` writes Python for it all the same), and bounds too wide
for ``--max-states`` to bound the memory (refused, naming the field and the cap).

Model files are real files in ``tmp_path``; where the command line is the target, a real
``python -m fsm check`` child process runs them.
"""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from python_runner import ROOT, Run

from fsm.checker import (
    BaseModel,
    Checker,
    ModelError,
    ModelLoadError,
    Property,
    load_models,
    location,
)
from fsm.worlds import common
from fsm.worlds.common import BoundsError, WorldBounds
from fsm.worlds.mrtr import MrtrBounds
from fsm.worlds.sse import Bounds
from fsm.worlds.tasks import TasksBounds
from support.model_sources import counter_model


def fsm_check(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m fsm check ARGS`` in a child process (the repository importable)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "fsm", "check", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ====================================================== 8: whatever the model raises


def model_file(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


COUNTER = """
from fsm.checker import BaseModel, Property


class Raises(BaseModel):
    name = "raises"

    def init_states(self):
        return [0]

    def actions(self, s):
        {actions}
        return ["inc"] if s < 3 else []

    def next_state(self, s, a):
        return s + 1

    def properties(self):
        return [Property.always("never", lambda s: False)]


MODEL = Raises()
"""


@pytest.mark.parametrize(
    ("raising", "shown"),
    [
        ("raise SystemExit(0)", "SystemExit: 0"),
        ("raise SystemExit(1)", "SystemExit: 1"),
        ("import sys; sys.exit()", "SystemExit"),
        ("raise type('Odd', (BaseException,), {})('odd')", "Odd: odd"),
    ],
)
def test_a_model_that_exits_while_explored_is_one_message_and_exit_2(
    tmp_path: Path, raising: str, shown: str
) -> None:
    """Before: status 0 and no output (``SystemExit(0)``: read as "every property holds"),
    or the child's own status and no report. Now: a model error, as for any exception."""
    path = model_file(tmp_path, "exits", COUNTER.replace("{actions}", raising))
    got = fsm_check("-q", path)
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr)
    assert got.stdout == ""
    assert "Traceback" not in got.stderr
    first, at, *rest = got.stderr.splitlines()
    assert first == f"fsm check: {path}: model raised {shown}"
    assert at.startswith("  at ") and "exits.py:12, in actions" in at
    assert rest[0] == "  raised in the state reached by:"


def test_a_model_file_that_skips_at_import_is_a_load_error(tmp_path: Path) -> None:
    """``pytest.importorskip`` raises ``Skipped``, a BaseException: before, a traceback
    and exit 1 (the status of a violated property)."""
    path = model_file(
        tmp_path,
        "skips",
        """
        import pytest

        pytest.importorskip("a_module_that_is_not_installed_xyz")
        MODEL = None
        """,
    )
    got = fsm_check("-q", path)
    assert got.returncode == 2, (got.returncode, got.stderr)
    assert "Traceback" not in got.stderr
    assert got.stderr.splitlines() == [
        f"fsm check: {path}: import failed: Skipped: could not import"
        " 'a_module_that_is_not_installed_xyz': No module named"
        " 'a_module_that_is_not_installed_xyz'",
        f'  at {path}:4, in <module>: pytest.importorskip("a_module_that_is_not_installed_xyz")',
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import sys\nsys.exit(3)\n", "import failed: SystemExit: 3"),
        (
            "def model():\n    raise SystemExit('no model today')\n",
            "building the model failed: SystemExit('no model today')",
        ),
        (
            "from fsm.checker import BaseModel\n"
            "class M(BaseModel):\n"
            "    def declared_transitions(self):\n"
            "        raise SystemExit(0)\n"
            "MODEL = M()\n",
            "reading the model's hooks failed: SystemExit(0)",
        ),
    ],
    ids=["at-import", "in-model()", "in-a-hook"],
)
def test_loading_a_model_that_exits_is_a_load_error(
    tmp_path: Path, source: str, message: str
) -> None:
    path = model_file(tmp_path, "exits_on_load", source)
    with pytest.raises(ModelLoadError) as info:
        load_models(str(path))
    assert str(info.value).splitlines()[0] == f"{path}: {message}"
    assert info.value.location is not None and info.value.location.file == str(path)


class ExitsIn(BaseModel[int, str]):
    """A counter to 3 whose hook ``where`` raises ``what``."""

    def __init__(self, where: str, what: BaseException) -> None:
        self.where, self.what = where, what

    def _maybe(self, where: str) -> None:
        if self.where == where:
            raise self.what

    def init_states(self) -> list[int]:
        self._maybe("init_states")
        return [0]

    def actions(self, state: int) -> list[str]:
        self._maybe("actions")
        return ["inc"] if state < 3 else []

    def next_state(self, state: int, action: str) -> int:
        self._maybe("next_state")
        return state + 1

    def properties(self) -> list[Property[int]]:
        self._maybe("properties")
        return [Property.always("small", lambda s: s < 10)]


@pytest.mark.parametrize("where", ["init_states", "actions", "next_state", "properties"])
def test_only_an_interruption_passes_through_the_checker(where: str) -> None:
    """``SystemExit`` and any other BaseException from the model are a ModelError; Ctrl-C
    (KeyboardInterrupt), GeneratorExit and asyncio's CancelledError still stop the run."""
    with pytest.raises(ModelError, match=r"^model raised SystemExit: 0"):
        Checker(ExitsIn(where, SystemExit(0))).run()
    for stop in (KeyboardInterrupt(), GeneratorExit(), asyncio.CancelledError()):
        with pytest.raises(type(stop)):
            Checker(ExitsIn(where, stop)).run()


def test_the_one_rule_of_what_passes_through(tmp_path: Path) -> None:
    """:func:`~fsm.checker.location.interrupts` says it for the loader and the checker."""
    interrupts = location.interrupts
    assert [
        interrupts(e)
        for e in (KeyboardInterrupt(), GeneratorExit(), asyncio.CancelledError(), SystemExit(0))
    ] == [True, True, True, False]
    assert not interrupts(pytest.skip.Exception("skipped")) and not interrupts(ValueError())
    path = model_file(tmp_path, "interrupted", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_models(str(path))
    assert not [m for m in sys.modules if m.endswith(".interrupted")]  # not left registered
    exits = model_file(tmp_path, "exits_too", "raise SystemExit(0)\n")
    with pytest.raises(ModelLoadError, match="import failed: SystemExit: 0"):
        load_models(str(exits))


# ====================================================== 9: --write-tests, any property name

NAMES = [
    'never "two"',
    'inject" + str(1 // 0) + "',
    'tri"""ple \\ back\\',
    "line\nbreak\ttab",
    "it's",
]

QUOTED = counter_model(
    "Quoted",
    "quoted",
    "[Property.always(n, lambda s: s < 2) for n in NAMES]",
    prelude=f"\nNAMES = {NAMES!r}\n",
)


@pytest.mark.parametrize("regression", [False, True], ids=["witness", "regression"])
def test_write_tests_writes_python_for_any_property_name(
    tmp_path: Path, python: Run, regression: bool
) -> None:
    """The name was pasted raw into string literals and docstrings: ``never "two"`` gave a
    file that did not compile, and a name holding ``" + ... + "`` ran as code. Now every
    written file compiles, its ``PROPERTY`` is the name itself, its docstring shows it,
    and the written tests do what they say: a witness passes, a regression test fails
    naming the property."""
    (tmp_path / "models").mkdir()
    path = tmp_path / "models" / "quoted.py"
    path.write_text(QUOTED, encoding="utf-8")
    out = tmp_path / "written"
    flags = ["--regression"] if regression else []
    got = fsm_check("-q", "--write-tests", out, *flags, path)
    assert got.returncode == 1, got.stderr
    written = sorted(out.glob("test_*.py"))
    assert len(written) == len(NAMES)
    found = []
    for file in written:
        source = file.read_text(encoding="utf-8")
        tree = ast.parse(source, str(file))  # before: SyntaxError
        values = {
            node.targets[0].id: ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "PROPERTY"
        }
        found.append(values["PROPERTY"])
        assert repr(values["PROPERTY"]) in (ast.get_docstring(tree) or "")
    assert sorted(found) == sorted(NAMES)
    ran = python(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)], tmp_path)
    if regression:
        assert f"{2 * len(NAMES)} failed" in ran.stdout, ran.stdout + ran.stderr
        assert "ZeroDivisionError" not in ran.stdout  # the name is data, not code
        assert 'never "two" is still violated along the recorded path' in ran.stdout
    else:
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"{len(NAMES)} passed" in ran.stdout


# ====================================================== 10: bounds that --max-states cannot bound


def _counts(cls: type[WorldBounds]) -> list[str]:
    from fsm.fields import field_rules

    return [
        name
        for name, rule in field_rules(cls, floats="positive", strict=True).items()
        if rule.kind == "count"
    ]


ERAS: list[type[WorldBounds]] = [Bounds, MrtrBounds, TasksBounds]


@pytest.mark.parametrize("cls", ERAS, ids=lambda c: c.__name__)
def test_every_count_of_every_era_is_capped_naming_the_field_and_the_cap(
    cls: type[WorldBounds],
) -> None:
    """Each count widens the world (``requests``: each state of the SSE world holds N
    successors of N-wide environments): with no cap, a handful of states exhausted the
    memory before ``--max-states`` could stop the search. Every count of every era now
    stops at :data:`~fsm.worlds.common.MAX_COUNT`, refused as any other bad bound is."""
    names = _counts(cls)
    MAX_COUNT = common.MAX_COUNT
    assert names and MAX_COUNT == 16
    for name in names:
        assert getattr(cls(**{name: MAX_COUNT}), name) == MAX_COUNT  # type: ignore[call-arg]
        with pytest.raises(BoundsError) as info:
            cls(**{name: MAX_COUNT + 1})  # type: ignore[call-arg]
        assert str(info.value) == (
            f"{cls.__name__}.{name}: {MAX_COUNT + 1} is over {MAX_COUNT}, the most a count of"
            " a world's bounds may be (a wider world fills the memory before the state bound"
            " stops the search)"
        )
        with pytest.raises(BoundsError, match=rf"^{cls.__name__}\.{name}: 10000 is over 16"):
            cls().updated({name: "10000"})
    assert Bounds(cuts=None, hold=None).cuts is None  # None still means no limit


@pytest.mark.parametrize(
    ("builtin", "setting", "message"),
    [
        ("seed_incident", "requests=2000", "Bounds.requests: 2000 is over 16"),
        ("guarded_mrtr", "questions=17", "MrtrBounds.questions: 17 is over 16"),
        ("guarded_tasks", "crashes=100", "TasksBounds.crashes: 100 is over 16"),
    ],
)
def test_a_set_too_wide_is_refused_before_the_search(
    builtin: str, setting: str, message: str
) -> None:
    """``--set requests=2000`` ran: ten states held ~0.7 GB, 10,000 exhausted the machine
    before state 10. Now it is a bad ``--set``: one line, exit 2, nothing explored."""
    got = fsm_check("--builtin", builtin, "-q", "--set", setting, "--max-states", "10")
    assert got.returncode == 2, (got.returncode, got.stderr)
    assert got.stdout == ""
    [line] = got.stderr.splitlines()
    assert line.startswith(f"fsm check: {ROOT / 'models' / builtin}.py: {message}, the most")


class FormatFailsToo(ExitsIn):
    """:class:`ExitsIn`, whose ``format_state`` raises ``also`` (the path to the state
    where the model raised cannot be drawn)."""

    def __init__(self, where: str, what: BaseException, also: BaseException) -> None:
        super().__init__(where, what)
        self.also = also

    def format_state(self, state: int) -> str:
        raise self.also


def test_a_path_that_cannot_be_drawn_leaves_the_error_without_one() -> None:
    """The model raised in ``actions`` and its ``format_state`` raises too: the
    ``ModelError`` comes without a path; an interruption while drawing it passes through."""
    with pytest.raises(ModelError) as caught:
        Checker(FormatFailsToo("actions", RuntimeError("boom"), ValueError("no"))).run()
    assert caught.value.path is None
    with pytest.raises(KeyboardInterrupt):
        Checker(FormatFailsToo("actions", RuntimeError("boom"), KeyboardInterrupt())).run()


def test_an_error_before_any_state_has_no_path() -> None:
    """Raised in ``init_states``: no state was reached, so the error has no path."""
    with pytest.raises(ModelError) as caught:
        Checker(ExitsIn("init_states", RuntimeError("boom"))).run()
    assert caught.value.path is None
