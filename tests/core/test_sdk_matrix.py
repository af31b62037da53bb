"""The README's compatibility table is the test matrix's record, rendered (never hand-edited)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import sdk_matrix  # noqa: E402


def test_readme_table_is_the_recorded_matrix() -> None:
    record = json.loads(sdk_matrix.RECORD.read_text())
    readme = sdk_matrix.README.read_text()
    assert sdk_matrix.readme_with(sdk_matrix.render(record), readme) == readme


def test_every_supported_release_was_run_and_passed() -> None:
    record = json.loads(sdk_matrix.RECORD.read_text())
    ran = {(r["line"], r["version"]): r for r in record}
    for line in sdk_matrix.LINES:
        for version in line.versions:
            row = ran[(line.name, version)]
            assert row["failed"] == 0 and row["passed"] > 0, row
