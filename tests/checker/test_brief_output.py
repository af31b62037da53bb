"""``fsm check --overview`` (what ``make demo`` adds) heads each file with what it models and
what the fields of its model names mean, and ends with one line that sums the run up."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.checker.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_each_file_is_headed_with_its_legend_and_the_run_summed_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    held = str(ROOT / "models" / "guarded_held.py")
    seed = str(ROOT / "models" / "seed_incident.py")
    assert main(["-q", "--brief", "--overview", held, seed]) == 0
    out = capsys.readouterr().out.splitlines()
    headings = [line for line in out if line.startswith("== ")]
    assert headings[0].startswith(f"== {held}: The library's policy against a server")
    assert any(line.strip().startswith("guarded-held[refusal,k=N]: the server") for line in out)
    assert headings[1].startswith(f"== {seed}: The client of the seed incident")
    summary = " ".join(out[out.index(headings[-1]) :])
    assert summary.startswith("== 9 models: 4 hold every property, 5 violate exactly what")
    assert "0 fail;" in summary
    assert all(len(line) <= 100 for line in out if line.startswith(("==", " ")))


def test_a_file_with_no_docstring_or_legend_is_headed_by_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "bare.py"
    model.write_text((ROOT / "models" / "seed_incident.py").read_text().split('"""', 2)[2])
    assert main(["-q", "--brief", "--overview", str(model)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"== {model}"
