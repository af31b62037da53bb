"""The SDK compatibility matrix: each supported release, installed, runs its line's suite.

``python tests/sdk_matrix.py --run [--line NAME] [--versions V ...]`` makes one scratch
environment per line (``.venv-matrix-<line>``, on first use: the project with ``dev`` and
the line's extras), installs each release in turn, runs the line's end-to-end suite and
records the counts in ``tests/sdk_matrix.json``. ``--readme`` renders that record as the
README's compatibility table (between the ``sdk-matrix`` markers);
``tests/core/test_sdk_matrix.py`` fails when the README and the record disagree, so the
table is never edited by hand. Network: PyPI only (pip).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "sdk_matrix.json"
README = ROOT / "README.md"
START, END = "<!-- sdk-matrix:start -->", "<!-- sdk-matrix:end -->"


@dataclass(frozen=True)
class Line:
    """One SDK line: what is installed, which suite runs, what it guards."""

    name: str
    package: str
    versions: tuple[str, ...]
    extras: str
    suite: tuple[str, ...]
    adapter: str
    guarded: str


LINES = (
    Line(
        "mcp2",
        "mcp",
        ("2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.2.0", "2.3.0"),
        "dev,mcp",
        ("tests/e2e", "tests/hostile/test_foreign_session_e2e.py"),
        "`fsm.adapters.mcp2`",
        "`ClientSession`; fastmcp 4.x `Client` (with 2.3.0)",
    ),
    Line(
        "mcp1",
        "mcp",
        (
            "1.24.0",
            "1.25.0",
            "1.26.0",
            "1.27.0",
            "1.27.1",
            "1.27.2",
            "1.28.0",
            "1.28.1",
            "1.29.0",
            "1.29.1",
            "1.30.0",
        ),
        "dev,mcp1,fastmcp3",
        ("tests/e2e_v1",),
        "`fsm.adapters.mcp1`",
        "`ClientSession`; fastmcp 3.x `Client`",
    ),
)

_COUNT = re.compile(r"(\d+) (passed|failed|skipped|error|errors)")


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def run_line(line: Line, versions: tuple[str, ...]) -> list[dict[str, object]]:
    """Install each release of ``line`` in its scratch environment and run its suite."""
    venv = ROOT / f".venv-matrix-{line.name}"
    py = str(venv / "bin" / "python")
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        _run([py, "-m", "pip", "install", "-q", "-e", f".[{line.extras}]"]).check_returncode()
        (venv / ".installed").touch()
    rows = []
    for version in versions:
        _run([py, "-m", "pip", "install", "-q", f"{line.package}=={version}"]).check_returncode()
        started = time.monotonic()
        out = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *line.suite])
        counts = {k.rstrip("s"): int(n) for n, k in _COUNT.findall(out.stdout.splitlines()[-1])}
        rows.append(
            {
                "line": line.name,
                "package": line.package,
                "version": version,
                "passed": counts.get("passed", 0),
                "failed": counts.get("failed", 0) + counts.get("error", 0),
                "skipped": counts.get("skipped", 0),
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        print(rows[-1], flush=True)
    return rows


def render(record: list[dict[str, object]]) -> str:
    """The README table for ``record`` (one row per line, the releases it was run on)."""
    out = [
        "| SDK line | releases tested (e2e suite passed) | adapter | guarded client |",
        "|---|---|---|---|",
    ]
    for line in LINES:
        rows = [r for r in record if r["line"] == line.name]
        ok = [r for r in rows if r["failed"] == 0 and int(str(r["passed"])) > 0]
        bad = [str(r["version"]) for r in rows if r not in ok]
        sizes = (int(str(r["passed"])) + int(str(r.get("skipped", 0))) for r in rows)
        tests = max(sizes, default=0)
        cell = ", ".join(f"{r['version']}{'*' if r.get('skipped') else ''}" for r in ok)
        cell += f" ({tests} tests each"
        if any(r.get("skipped") for r in ok):
            cell += "; *: some skipped, with the reason"
        cell += ")" + (f"; failing: {', '.join(bad)}" if bad else "")
        out.append(
            f"| {line.package} {line.name[-1]}.x | {cell} | {line.adapter} | {line.guarded} |"
        )
    return "\n".join(out)


def readme_with(table: str, text: str) -> str:
    """``text`` (the README) with the table between the markers replaced by ``table``."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="install and test each release")
    parser.add_argument("--line", choices=[line.name for line in LINES])
    parser.add_argument("--versions", nargs="*")
    parser.add_argument("--readme", action="store_true", help="write the README table")
    args = parser.parse_args(argv)
    record = json.loads(RECORD.read_text()) if RECORD.exists() else []
    if args.run:
        for line in LINES:
            if args.line and line.name != args.line:
                continue
            versions = tuple(args.versions or line.versions)
            fresh = run_line(line, versions)
            done = {(r["line"], r["version"]) for r in fresh}
            record = [r for r in record if (r["line"], r["version"]) not in done] + fresh
        record.sort(key=lambda r: (str(r["line"]), [int(p) for p in str(r["version"]).split(".")]))
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
    if args.readme:
        README.write_text(readme_with(render(record), README.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
