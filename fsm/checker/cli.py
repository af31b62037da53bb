"""``python -m fsm check FILE.py [FILE.py ...]``: model-check the models defined in files.

Exit status: 0 when every property of every model holds (or, for a model that declares
``expected_violations``, exactly those are violated); 1 when any property is violated,
vacuous, or unknown because a bound was hit (``--max-states``/``--max-depth``); 2 for bad
arguments, a bad model file, or a model that raises during exploration (one message, no
traceback). Reports go to stdout, progress lines to stderr once a run lasts over a second
(disable them with ``--quiet``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path as FilePath

from fsm.checker.explore import Checker, ModelError
from fsm.checker.loader import ModelLoadError, load_models
from fsm.checker.model import model_name
from fsm.checker.properties import Verdict
from fsm.checker.report import Report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fsm check",
        description="Model-check the models defined in Python files (MODEL, MODELS or model()).",
    )
    parser.add_argument("files", nargs="+", metavar="FILE.py", help="model files")
    parser.add_argument("--json", action="store_true", help="one JSON report per model per line")
    parser.add_argument("--max-states", type=int, metavar="N", help="bound on distinct states")
    parser.add_argument("--max-depth", type=int, metavar="N", help="bound on BFS depth")
    parser.add_argument(
        "--write-tests", metavar="DIR", help="write a replayable pytest file per violation"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--no-symmetry",
        action="store_true",
        help="explore every state, even of a model that declares a symmetry",
    )
    parser.add_argument(
        "--brief",
        action="store_true",
        help="one summary line per model that holds; full reports only for violations",
    )
    return parser


def _write_tests(report: Report, file: str, name: str | None, out_dir: FilePath) -> list[str]:
    written = []
    for result in report.results:
        if result.verdict is not Verdict.VIOLATED or result.path is None:
            continue
        stem = re.sub(r"[^0-9a-zA-Z]+", "_", f"{report.model}_{result.name}").strip("_").lower()
        target = out_dir / f"test_{stem}.py"
        target.write_text(result.path.to_pytest(file, result.name, model_name=name))
        written.append(str(target))
    return written


def main(argv: list[str]) -> int:
    """Run ``check`` with ``argv`` (without the ``check`` word); return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the reason
        return int(exc.code or 0)
    for bound in (args.max_states, args.max_depth):
        if bound is not None and bound < 0:
            print("fsm check: bounds must be >= 0", file=sys.stderr)
            return 2
    out_dir = FilePath(args.write_tests) if args.write_tests else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    status = 0
    for file in args.files:
        try:
            models = load_models(file)
        except ModelLoadError as exc:
            print(f"fsm check: {exc}", file=sys.stderr)
            return 2
        for model in models:
            try:
                checker = Checker(
                    model,
                    max_states=args.max_states,
                    max_depth=args.max_depth,
                    progress=not args.quiet,
                    symmetry=not args.no_symmetry,
                )
                report = checker.run()
            except ModelError as exc:
                print(f"fsm check: {file}: {exc.format_text()}", file=sys.stderr)
                return 2
            except (ValueError, TypeError) as exc:
                print(f"fsm check: {file}: {exc}", file=sys.stderr)
                return 2
            if args.json:
                print(json.dumps(report.to_json()))
            elif args.brief:
                failing = report.failures()
                holding = len(report.results) - len(failing)
                print(f"{report.summary()}: {holding}/{len(report.results)} properties hold")
                for result in failing:
                    print(result.format_text())
            else:
                print(report.format_text())
            if out_dir is not None:
                name = model_name(model) if len(models) > 1 else None
                for path in _write_tests(report, file, name, out_dir):
                    print(f"wrote {path}", file=sys.stderr)
            if not _as_expected(report, getattr(model, "expected_violations", None)):
                status = 1
    return status


def _as_expected(report: Report, expected: object) -> bool:
    """A model may declare ``expected_violations`` (property names it must violate: a model
    of a faulty client). It then passes when exactly those are violated and the rest hold;
    a model without the attribute passes when everything holds."""
    if not expected:
        return report.ok
    wanted = set(expected) if isinstance(expected, list | tuple | set | frozenset) else set()
    violated = {r.name for r in report.results if r.verdict is Verdict.VIOLATED}
    others_hold = all(r.verdict.ok for r in report.results if r.name not in wanted)
    ok = report.complete and violated == wanted and others_hold
    verdict = "as expected" if ok else f"NOT as expected (expected {sorted(wanted)})"
    print(f"{report.model}: violations {sorted(violated)} {verdict}")
    return ok
