"""The mutation table (``bench/mutation.py``): reporting again never wipes a measured row.

Each test lays out a project of its own in a temporary directory (a ``[tool.mutmut]``
table, mutmut's ``.meta`` results, the equivalent list and an earlier
``bench/mutation.json``) and points the module's paths at it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import mutation

EARLIER = {
    "fsm/a.py": {"mutants": 10, "killed": 10, "survived": 0, "killed_pct": 100.0},
    "fsm/b.py": {"mutants": 4, "killed": 3, "survived": 0, "equivalent": 1, "killed_pct": 100.0},
    "run": {"wall_s": 600, "cpu_s": 1100, "workers": 2},
    "tables": {"mutants": 7},
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\nonly_mutate = ["fsm/a.py", "fsm/b.py"]\n', encoding="utf-8"
    )
    equivalent = tmp_path / "mutation_equivalent.toml"
    equivalent.write_text(
        '[import-time]\n"fsm.a.x_table" = "built at import"\n'
        '[equivalent]\n"fsm.a.x_f__mutmut_3" = "same decisions"\n',
        encoding="utf-8",
    )
    out = tmp_path / "mutation.json"
    out.write_text(json.dumps(EARLIER, indent=2) + "\n", encoding="utf-8")
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    monkeypatch.setattr(mutation, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(mutation, "EQUIVALENT", equivalent)
    monkeypatch.setattr(mutation, "OUT", out)
    return tmp_path


def _meta(root: Path, path: str, codes: dict[str, int | None]) -> None:
    meta = root / "mutants" / (path + ".meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}), encoding="utf-8")


def _written(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "mutation.json").read_text(encoding="utf-8"))
    return data


def test_without_results_the_json_is_left_as_it_is_and_its_table_printed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (project / "mutation.json").read_bytes()
    assert mutation.report() == 1
    assert (project / "mutation.json").read_bytes() == before
    printed = capsys.readouterr().out
    assert "no mutmut results" in printed
    assert "fsm/a.py" in printed and "fsm/b.py" in printed and "100" in printed


def test_a_file_the_run_did_not_reach_keeps_its_row(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _meta(
        project,
        "fsm/a.py",
        {
            "fsm.a.x_f__mutmut_1": 1,  # killed
            "fsm.a.x_f__mutmut_2": 24,  # timed out
            "fsm.a.x_f__mutmut_3": 0,  # survived, argued equivalent
            "fsm.a.x_table__mutmut_1": 0,  # survived, runs at import only
            "fsm.a.x_f__mutmut_5": 33,  # no test ran it: survived
        },
    )
    assert mutation.report() == 1  # a survivor and an unmeasured file
    written = _written(project)
    assert written["fsm/a.py"] == {
        "mutants": 5,
        "killed": 1,
        "timed_out": 1,
        "survived": 1,
        "equivalent": 1,
        "import_time": 1,
        "not_checked": 0,
        "killed_pct": 66.7,
    }
    assert written["fsm/b.py"] == EARLIER["fsm/b.py"]
    assert written["run"] == EARLIER["run"] and written["tables"] == EARLIER["tables"]
    printed = capsys.readouterr().out
    assert "survived: fsm.a.x_f__mutmut_5" in printed
    assert "not measured yet: fsm/b.py" in printed


def test_a_full_clean_run_writes_every_row_and_its_times(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _meta(project, "fsm/a.py", {"fsm.a.x_f__mutmut_1": 1, "fsm.a.x_f__mutmut_3": 0})
    _meta(project, "fsm/b.py", {"fsm.b.x_g__mutmut_1": 3})
    assert mutation.report((61.4, 100.2, 2)) == 0
    written = _written(project)
    assert written["fsm/b.py"]["killed"] == 1 and written["fsm/b.py"]["killed_pct"] == 100.0
    assert written["fsm/a.py"]["equivalent"] == 1
    assert written["run"] == {"wall_s": 61, "cpu_s": 100, "workers": 2}
    assert "run: 61 s wall-clock" in capsys.readouterr().out


def test_an_equivalent_entry_whose_mutant_is_now_killed_is_stale(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _meta(project, "fsm/a.py", {"fsm.a.x_f__mutmut_3": 1})
    _meta(project, "fsm/b.py", {"fsm.b.x_g__mutmut_1": 1})
    assert mutation.report() == 1
    assert "stale: fsm.a.x_f__mutmut_3 is listed as equivalent but killed" in (
        capsys.readouterr().out
    )


def test_a_file_whose_mutants_were_made_and_none_checked_keeps_its_row(project: Path) -> None:
    _meta(project, "fsm/a.py", {"fsm.a.x_f__mutmut_1": 1})
    _meta(project, "fsm/b.py", {"fsm.b.x_g__mutmut_1": None, "fsm.b.x_g__mutmut_2": None})
    mutation.report()
    assert _written(project)["fsm/b.py"] == EARLIER["fsm/b.py"]


def test_the_score_is_over_the_mutants_checked(project: Path) -> None:
    _meta(
        project,
        "fsm/a.py",
        {
            "fsm.a.x_f__mutmut_1": 1,  # killed
            "fsm.a.x_f__mutmut_2": 0,  # survived
            "fsm.a.x_f__mutmut_4": None,  # not reached by the run
            "fsm.a.x_f__mutmut_6": None,
        },
    )
    mutation.report()
    row = _written(project)["fsm/a.py"]
    assert (row["mutants"], row["not_checked"], row["killed_pct"]) == (4, 2, 50.0)
