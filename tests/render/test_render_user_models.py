"""``fsm render MODEL.py`` and ``fsm check MODEL.py --diagrams DIR``: a model of one's own
drawn (the worked example of docs/models.md), the machines of a policy that declares them,
the engine missing, and bad input as one line and an exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.__main__ import main as fsm_main
from fsm.checker import load_models
from fsm.checker.loader import builtin_model_file
from fsm.render import cli
from fsm.render.user import model_diagrams
from support.models_doc import EXAMPLE


@pytest.fixture
def my_client(tmp_path: Path) -> Path:
    """The worked example of docs/models.md, saved as the file it says."""
    path = tmp_path / "my_client.py"
    path.write_text(EXAMPLE, encoding="utf-8")
    return path


def _names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_render_draws_each_model_of_a_file(my_client: Path, tmp_path: Path) -> None:
    pytest.importorskip("pygraphviz")
    out = tmp_path / "d"
    assert cli.main([str(my_client), "--out", str(out)]) == 0
    assert _names(out) == {
        f"{model}-reachable.{ext}"
        for model in ("show-everything", "show-once")
        for ext in ["dot", "svg"]
    }
    assert "its reachable states, projected" in (out / "show-once-reachable.dot").read_text()


def test_check_draws_each_counterexample_with_its_bounds(
    my_client: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d"
    argv = ["check", str(my_client), "-q", "--brief", "--set", "replay=inclusive"]
    assert fsm_main([*argv, "--diagrams", str(out)]) == 1  # show-everything violates P2
    cex = out / "show-everything-replay-inclusive-cex-p2.dot"
    dot = cex.read_text(encoding="utf-8")
    assert "why: ('s', 0) presented a second time; first presented at step 3" in dot
    assert dot.count('xlabel="violates here"') == 1
    assert "show-once-replay-inclusive-cex-p2.dot" not in _names(out)
    assert f"wrote {cex}" in capsys.readouterr().err


@pytest.mark.usefixtures("without_pygraphviz")
def test_without_the_engine_check_writes_dot_and_render_writes_nothing(
    my_client: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drawn = tmp_path / "drawn"
    assert fsm_main(["check", str(my_client), "-q", "--diagrams", str(drawn)]) == 0
    assert _names(drawn) == {"show-everything-reachable.dot", "show-once-reachable.dot"}
    capsys.readouterr()
    out = tmp_path / "rendered"
    assert cli.main([str(my_client), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pygraphviz" in err[0]
    assert not out.exists()


def test_a_policy_of_declared_machines_gets_them_drawn() -> None:
    guarded = load_models(builtin_model_file("guarded"))[0]
    names = set(model_diagrams(guarded))
    stem = "guarded-after-silent-202-answers"
    assert {
        f"{stem}-machine-transport",
        f"{stem}-machine-liveness",
        f"{stem}-product-spec",
    } <= names
    assert f"{stem}-reachable" in names
    assert not any("-cex-" in n for n in names)  # the guard violates nothing


def test_bad_input_is_one_line_and_exit_2_or_3(
    my_client: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([str(tmp_path / "missing.py"), "--out", str(tmp_path / "d")]) == 2
    assert cli.main([str(my_client), "--only", "transport"]) == 2
    raising = tmp_path / "raising.py"
    raising.write_text(
        "from fsm.checker import BaseModel, Property\n"
        "class Bad(BaseModel):\n"
        "    def init_states(self): return [0]\n"
        "    def actions(self, s): return ['go']\n"
        "    def next_state(self, s, a): return 1 // s\n"
        "    def properties(self): return [Property.terminates()]\n"
        "MODEL = Bad()\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    assert cli.main([str(raising), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and "Traceback" not in err
    taken = tmp_path / "taken"
    taken.write_text("mine\n", encoding="utf-8")
    assert fsm_main(["check", str(my_client), "-q", "--diagrams", str(taken)]) == 3
    assert (
        capsys.readouterr().err == f"fsm check: --diagrams {taken}: exists and is not a directory\n"
    )
    from fsm.checker.cli import main as check_main

    assert check_main([str(my_client), "-q", "--diagrams", str(tmp_path / "x")]) == 2
    assert "--diagrams needs the renderer" in capsys.readouterr().err
    assert not (tmp_path / "d").exists() and not (tmp_path / "x").exists()
