"""``fsm render MODEL.py`` and ``fsm check --diagrams`` at the edges of what users give
them: a model whose ``format_state`` raises (one message and exit 2, as ``fsm check``
reports a model that raises, not a traceback), and a model of many states (its
reachable graph, too big to draw, is still built and checked in linear time).

Model files are real files in ``tmp_path``; where the command line is the target, a real
``python -m fsm`` child process runs them. Time is never measured: linearity is shown by
counting the comparisons of node ids.
"""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from fsm.checker import ModelError, load_model
from fsm.render.graph import GraphEdge, GraphNode, StateGraph
from fsm.render.user import MAX_NODES, model_diagrams
from support.model_sources import counter_model

ROOT = Path(__file__).resolve().parents[2]


def fsm(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m fsm ARGS`` in a child process run from the repository."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "fsm", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _without_engine_noise(stderr: str) -> list[str]:
    """stderr's lines but what Graphviz's font library may warn on its own."""
    return [line for line in stderr.splitlines() if not line.startswith("Fontconfig")]


# ====================================================== 11: format_state raises

BAD_FORMAT = counter_model(
    "BadFormat",
    "bad-format",
    '[Property.always("small", lambda s: s < 10)]',
    methods="\n    def format_state(self, s):\n        {raising}\n",
)
FORMAT_LINE = BAD_FORMAT.splitlines().index("        {raising}") + 1  # in the file written


def _bad_format(tmp_path: Path, raising: str) -> Path:
    path = tmp_path / "badformat.py"
    path.write_text(BAD_FORMAT.replace("{raising}", raising), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("raising", "shown"),
    [
        ('raise RuntimeError("cannot format")', "RuntimeError: cannot format"),
        ("raise SystemExit(0)", "SystemExit: 0"),
    ],
)
def test_render_of_a_model_whose_format_state_raises_is_one_message_and_exit_2(
    tmp_path: Path, raising: str, shown: str
) -> None:
    """Drawing the reachable states called the view unguarded: a traceback and exit 1
    (``SystemExit(0)``: exit 0, nothing drawn, nothing said)."""
    pytest.importorskip("pygraphviz")
    path = _bad_format(tmp_path, raising)
    out = tmp_path / "out"
    got = fsm("render", "--out", out, path)
    assert got.returncode == 2, (got.returncode, got.stderr)
    assert "Traceback" not in got.stderr
    assert _without_engine_noise(got.stderr) == [
        f"fsm render: {path}: model raised {shown} (drawing its reachable states)",
        f"  at {path}:{FORMAT_LINE}, in format_state: {raising}",
    ]
    assert got.stdout == "" and not out.exists()


def test_check_diagrams_of_a_model_whose_format_state_raises_is_a_model_error(
    tmp_path: Path,
) -> None:
    """``fsm check --diagrams`` reports it as ``fsm check`` reports any model that raises:
    the report of the check (its property holds), then one message and exit 2."""
    raising = 'raise RuntimeError("cannot format")'
    path = _bad_format(tmp_path, raising)
    got = fsm("check", "-q", "--diagrams", tmp_path / "out", path)
    assert got.returncode == 2, (got.returncode, got.stderr)
    assert "Traceback" not in got.stderr
    assert "✓ small holds" in got.stdout
    assert _without_engine_noise(got.stderr) == [
        f"fsm check: {path}: model raised RuntimeError: cannot format"
        " (drawing its reachable states)",
        f"  at {path}:{FORMAT_LINE}, in format_state: {raising}",
    ]


def test_model_diagrams_raises_a_model_error_naming_the_line(tmp_path: Path) -> None:
    """In process: :func:`model_diagrams` raises :class:`ModelError`, its location the
    model's ``format_state``."""
    model = load_model(str(_bad_format(tmp_path, 'raise ValueError("no")')))
    with pytest.raises(ModelError) as info:
        model_diagrams(model)
    assert str(info.value) == "model raised ValueError: no (drawing its reachable states)"
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.function) == (
        FORMAT_LINE,
        "format_state",
    )


# ====================================================== 12: many states, linear time


class Counted(str):
    """A node id that counts how often it is compared for equality."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _comparisons_building(n: int) -> int:
    ids = [Counted(f"s{i}") for i in range(n)]
    nodes = tuple(GraphNode(i) for i in ids)
    edges = tuple(GraphEdge(a, b, "inc") for a, b in pairwise(ids))
    Counted.comparisons = 0
    StateGraph("chain", nodes, edges)
    return Counted.comparisons


def test_a_state_graph_checks_its_node_ids_in_linear_time() -> None:
    """``StateGraph`` found duplicate ids with ``ids.count(i)`` for every id: n*(n-1)
    comparisons (4,000,000 for 2,000 nodes), before the renderer could see the graph
    was too big to draw. Now a set: no more comparisons than nodes, and duplicates are
    still named, once each."""
    for n in (1_000, 2_000):
        assert _comparisons_building(n) <= n
    with pytest.raises(ValueError) as info:
        StateGraph("dupes", tuple(GraphNode(i) for i in ["b", "a", "b", "a", "b", "c"]), ())
    assert str(info.value) == ("state graph 'dupes': duplicate node id 'a'; duplicate node id 'b'")
    with pytest.raises(ValueError, match="unknown node 'z'"):
        StateGraph("edges", (GraphNode("a"),), (GraphEdge("a", "z"),))


LABELS = """
import atexit
import sys


class Label(str):
    \"\"\"A formatted state that counts how often it is compared for equality.\"\"\"

    comparisons = 0

    def __eq__(self, other):
        Label.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__

    def __str__(self):
        return self


atexit.register(lambda: print(f"label comparisons: {Label.comparisons}", file=sys.stderr))
"""

CHAIN = """
from fsm.checker import BaseModel, Property

from ._labels import Label

N = {n}


class Chain(BaseModel):
    name = "chain"

    def init_states(self):
        return [0]

    def actions(self, s):
        return ["inc"] if s < N else []

    def next_state(self, s, a):
        return s + 1

    def properties(self):
        return [Property.always("small", lambda s: s < 3)]

    def format_state(self, s):
        return Label(f"s{{s}}")


MODEL = Chain()
"""


def _chain(folder: Path, n: int) -> Path:
    """A model of a chain of ``n + 1`` states, each drawn as a ``Label`` that counts its
    comparisons (said on stderr at exit); its property is violated at the fourth state."""
    folder.mkdir()
    (folder / "_labels.py").write_text(LABELS, encoding="utf-8")
    path = folder / "chain.py"
    path.write_text(CHAIN.format(n=n), encoding="utf-8")
    return path


@pytest.mark.timeout(600)  # a safety net only: nothing here is timed
def test_render_of_many_states_compares_labels_in_linear_time(tmp_path: Path) -> None:
    """``fsm render`` of a chain far over :data:`MAX_NODES` views: exit 0, the reachable
    graph not drawn, the counterexample drawn; and drawing compares the states' labels
    about as often per state at 3,000 states as at 1,500 (sorting: n log n at most).
    ``ids.count`` made it n*(n-1): 9,000,000 comparisons at 3,000 states, and a
    2,000,000-state model about a day of CPU."""
    pytest.importorskip("pygraphviz")
    counts: dict[int, int] = {}
    for n in (1_500, 3_000):
        assert n > MAX_NODES
        path = _chain(tmp_path / f"chain{n}", n)
        out = tmp_path / f"out{n}"
        got = fsm("render", "--out", out, path, timeout=500)
        assert got.returncode == 0, got.stderr[-500:]
        assert sorted(p.name for p in out.iterdir()) == [
            "chain-cex-small.dot",
            "chain-cex-small.svg",
        ]
        said = [line for line in got.stderr.splitlines() if line.startswith("label comparisons")]
        counts[n] = int(said[-1].rpartition(" ")[2])
    assert counts[3_000] <= 20 * 3_000, counts
    assert counts[3_000] < 2.5 * counts[1_500], counts
