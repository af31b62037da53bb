"""The render CLI: staleness check, missing engine, SVG output, lazy imports."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fsm.render import cli
from fsm.render.registry import PRODUCERS
from fsm.render.svg import INSTALL_HINT, RenderEngineMissing, render_svg


def _text_files() -> list[str]:
    names = []
    for name, produce in PRODUCERS.items():
        names.append(f"{name}.dot")
        if produce().mermaid is not None:
            names.append(f"{name}.mmd")
    return names


def test_committed_diagrams_are_up_to_date(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--check", "--out", str(repo / "diagrams")]) == 0, capsys.readouterr().err


def test_check_fails_after_a_file_is_modified(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "diagrams"
    shutil.copytree(repo / "diagrams", out)
    assert cli.main(["--check", "--out", str(out)]) == 0
    with (out / "liveness.mmd").open("a", encoding="utf-8") as f:
        f.write("    %% edited by hand\n")
    (out / "transport.dot").unlink()
    capsys.readouterr()
    assert cli.main(["--check", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "liveness.mmd" in err and "transport.dot" in err
    assert "product-spec.dot" not in err


def test_check_writes_nothing(tmp_path: Path) -> None:
    assert cli.main(["--check", "--out", str(tmp_path)]) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("without_pygraphviz")
def test_missing_engine_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RenderEngineMissing, match="dead-or-resumable\\[diagrams\\]"):
        render_svg("digraph { a -> b }")
    assert cli.main(["--out", str(tmp_path / "d")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and INSTALL_HINT in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "d").exists()


@pytest.mark.usefixtures("without_pygraphviz")
def test_check_works_without_the_engine(repo: Path) -> None:
    assert cli.main(["--check", "--out", str(repo / "diagrams")]) == 0


def test_importing_fsm_render_does_not_import_pygraphviz(repo: Path) -> None:
    code = "import sys, fsm.render, fsm.render.cli; assert 'pygraphviz' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=repo, check=True)


def test_render_writes_every_file_and_valid_svg(tmp_path: Path) -> None:
    pytest.importorskip("pygraphviz")
    assert cli.main(["--out", str(tmp_path)]) == 0
    expected = set(_text_files()) | {f"{name}.svg" for name in PRODUCERS}
    assert {p.name for p in tmp_path.iterdir()} == expected
    for name in PRODUCERS:
        root = ET.fromstring((tmp_path / f"{name}.svg").read_bytes())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert cli.main(["--check", "--out", str(tmp_path)]) == 0


def test_an_existing_file_as_out_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pygraphviz")
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    assert cli.main(["--out", str(taken), "--only", "transport"]) == 3
    captured = capsys.readouterr()
    assert captured.err == f"fsm render: --out {taken}: exists and is not a directory\n"
    assert captured.out == "" and taken.read_text() == "mine\n"
    assert cli.main(["--out", str(tmp_path / "fresh"), "--only", "transport"]) == 0


def test_committed_svgs_are_valid(repo: Path) -> None:
    for name in PRODUCERS:
        root = ET.parse(repo / "diagrams" / f"{name}.svg").getroot()
        assert root.tag.endswith("}svg")


def test_unknown_diagram_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--only", "nope", "--check"]) == 2
    assert "unknown diagram" in capsys.readouterr().err
    assert cli.main(["--bogus"]) == 2


def test_python_dash_m_fsm_render_check(repo: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "render", "--check"], cwd=repo, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
