"""docs/models.md is true: its worked example, saved as the file it says, prints what each
of its console blocks shows (seconds aside) with the exit status the text gives, the
regression tests it writes fail until the bug is fixed, and its tables name every input,
output and bound of the worlds, no more."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from fsm.worlds import mrtr, sse
from support.models_doc import DOC, EXAMPLE, fenced

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = fenced(DOC, "console")

SHOWN_ONCE = (
    "        return s._replace(shown=s.shown | {request}), (Present(request),)\n",
    "        if request in s.shown:\n"
    "            return s, ()\n"
    "        return s._replace(shown=s.shown | {request}), (Present(request),)\n",
)
"""The fix of ``show-everything``: it shows each request once."""
MISSPELLED = ("(Present(request),)\n", '(("presnt", request),)\n')
"""What "When it goes wrong" misspells in ``present``."""

BLOCKS = [("as saved", 0), ("as saved", 1), ("as saved", 1), ("misspelled", 2)]
"""Each console block in order: the example file it runs on, the exit status the text gives."""


def _normal(text: str) -> str:
    return re.sub(r"seconds=[0-9.]+", "seconds=S", text).rstrip("\n")


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-m", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _example(tmp_path: Path, variant: str) -> None:
    text = EXAMPLE
    if variant == "misspelled":
        assert text.count(MISSPELLED[0]) == 1
        text = text.replace(*MISSPELLED)
    (tmp_path / "my_client.py").write_text(text, encoding="utf-8")


def test_the_doc_has_the_blocks_this_test_runs() -> None:
    assert len(CONSOLE) == len(BLOCKS)
    assert all(block.startswith("$ fsm check my_client.py ") for block in CONSOLE)
    assert EXAMPLE.count(SHOWN_ONCE[0]) == 1


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_each_console_block_prints_what_it_shows(number: int, tmp_path: Path) -> None:
    variant, status = BLOCKS[number]
    _example(tmp_path, variant)
    command, _, shown = CONSOLE[number].partition("\n")
    done = _run(shlex.split(command.removeprefix("$ ")), tmp_path)
    assert done.returncode == status, done.stdout + done.stderr
    assert _normal(done.stdout + done.stderr) == _normal(shown)


def test_the_regression_tests_it_writes_fail_until_the_bug_is_fixed(tmp_path: Path) -> None:
    _example(tmp_path, "as saved")
    command = CONSOLE[2].partition("\n")[0].removeprefix("$ ")
    assert _run(shlex.split(command), tmp_path).returncode == 1
    pytest_args = ["pytest", "-q", "-p", "no:cacheprovider", "tests"]
    done = _run(pytest_args, tmp_path)
    assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout
    for name in ("p2_not_violated_along_recorded_path", "p2_holds"):  # named as the text says
        assert f"test_show_everything_{name} " in DOC.replace("`", " ")
        assert f"::test_show_everything_{name}" in done.stdout
    fixed = (tmp_path / "my_client.py").read_text().replace(*SHOWN_ONCE, 1)
    (tmp_path / "my_client.py").write_text(fixed)
    done = _run(pytest_args, tmp_path)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def _table(heading: str) -> str:
    """The first table after ``heading``."""
    after = DOC.split(f"\n{heading}\n", 1)[1]
    return re.search(r"^\|.*?(?=\n\n)", after, re.S | re.M).group(0)  # type: ignore[union-attr]


def _first_column_names(table: str) -> set[str]:
    return set(re.findall(r"^\| `(\w+)", table, re.M))


def test_the_tables_name_every_input_output_and_bound() -> None:
    inputs = {kind.__name__ for kind in typing.get_args(sse.Input)}
    assert _first_column_names(_table("## What the world tells the policy")) == inputs
    outputs = {kind.__name__ for kind in sse.OUTPUTS.values()}
    assert _first_column_names(_table("## What the policy does")) == outputs
    bounds = {f.name for f in dataclasses.fields(sse.Bounds)}
    assert _first_column_names(_table("## Bounds, and which bounds exercise what")) == bounds
    mrtr_table = _table("## The MRTR world")
    for kind in (*typing.get_args(mrtr.Input), *mrtr.OUTPUTS.values()):
        assert f"`{kind.__name__}(" in mrtr_table, kind
    for field in dataclasses.fields(mrtr.MrtrBounds):
        assert f"`{field.name}`" in DOC.split("## The MRTR world", 1)[1], field.name
