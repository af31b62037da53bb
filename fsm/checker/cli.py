"""``fsm check FILE.py [...] [--builtin NAME ...]``: model-check the models defined in files.

Exit status: 0 when every property of every model holds (or, for a model that declares
``expected_violations``, exactly those are violated); 1 when any property is violated,
vacuous, or unknown because a bound was hit (``--max-states``/``--max-depth``); 2 for bad
arguments, a bad model file, a bad ``--set``, or a model that raises during exploration (one
message, no traceback).

Output: reports go to stdout; with ``--json`` stdout is pure JSON Lines (one object per
model) and every human line (progress, verdicts against ``expected_violations``, files
written, errors) goes to stderr. Progress lines appear once a run lasts over a second
(disable them with ``--quiet``). ``--brief`` prints one line per model that passes (holds,
or fails exactly as declared), full reports only for the others.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path as FilePath
from typing import Any

from fsm.checker.explore import Checker, ModelError
from fsm.checker.loader import ModelLoadError, builtin_model_file, builtin_models, load_models
from fsm.checker.model import model_name
from fsm.checker.properties import Verdict
from fsm.checker.report import Report

EXIT_STATUS = """exit status:
  0  every property holds (a model with expected_violations: exactly those are violated)
  1  a property is violated, vacuous, or unknown because a bound was hit
  2  bad arguments, a bad model file or --set, or a model that raised"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fsm check",
        description="Model-check the models defined in Python files (MODEL, MODELS or model()).",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="*", metavar="FILE.py", help="model files")
    parser.add_argument(
        "--builtin",
        action="append",
        default=[],
        metavar="NAME",
        help="a model shipped with the library, by name (repeatable; 'all': every one; "
        "'list': print the names)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        dest="settings",
        metavar="FIELD=VALUE",
        help="set a bound of every world model (fsm.worlds.sse.Bounds, fsm.worlds.mrtr.MrtrBounds),"
        " e.g. --set requests=2 or --set questions=2",
    )
    parser.add_argument(
        "--json", action="store_true", help="stdout: one JSON report per model per line"
    )
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
        help="one line per model that passes; full reports only for the others",
    )
    return parser


class _Usage(Exception):
    """Bad arguments: the message is printed, the exit status is 2."""


def _settings(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise _Usage(f"--set {pair!r}: write FIELD=VALUE, e.g. --set requests=2")
        out[name.strip()] = value
    return out


def _files(args: argparse.Namespace) -> list[str]:
    files = list(args.files)
    for name in args.builtin:
        if name == "list":
            continue
        try:
            files += (
                [builtin_model_file(n) for n in builtin_models()]
                if name == "all"
                else [builtin_model_file(name)]
            )
        except ModelLoadError as exc:
            raise _Usage(str(exc)) from None
    if not files and "list" not in args.builtin:
        raise _Usage("name a model file or a --builtin model (--builtin list shows them)")
    for bound in (args.max_states, args.max_depth):
        if bound is not None and bound < 0:
            raise _Usage("bounds must be >= 0")
    return files


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


def _rebound(model: Any, settings: dict[str, str]) -> Any:
    """``model`` with ``settings`` applied by its ``with_bounds`` (every world of every era
    has it); ValueError for a model without bounds."""
    if not settings:
        return model
    if not callable(getattr(model, "with_bounds", None)):
        raise ValueError(
            f"model {model_name(model)!r} has no bounds to --set (it has no with_bounds:"
            " not a world)"
        )
    return model.with_bounds(settings)


def main(argv: list[str]) -> int:
    """Run ``check`` with ``argv`` (without the ``check`` word); return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the reason
        return int(exc.code or 0)
    try:
        files = _files(args)
        settings = _settings(args.settings)
    except _Usage as exc:
        print(f"{_parser().format_usage()}fsm check: {exc}", file=sys.stderr)
        return 2
    if "list" in args.builtin:
        print("\n".join(builtin_models()))
    human = sys.stderr if args.json else sys.stdout
    out_dir = FilePath(args.write_tests) if args.write_tests else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    status = 0
    for file in files:
        try:
            models = load_models(file)
        except ModelLoadError as exc:
            print(f"fsm check: {exc}", file=sys.stderr)
            return 2
        for model in models:
            try:
                model = _rebound(model, settings)
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
            expected = _expected(getattr(model, "expected_violations", None))
            passed = _as_expected(report, expected)
            if args.json:
                record = report.to_json()
                record["expected_violations"] = sorted(expected)
                record["passed"] = passed
                print(json.dumps(record))
            elif args.brief and passed:
                print(report.brief_line(expected))
            else:
                print(report.format_text() if not args.brief else _failing(report))
            if expected and not (args.brief and passed):
                print(_expectation(report, expected, passed), file=human)
            if out_dir is not None:
                name = model_name(model) if len(models) > 1 else None
                for path in _write_tests(report, file, name, out_dir):
                    print(f"wrote {path}", file=sys.stderr)
            if not passed:
                status = 1
    return status


def _failing(report: Report) -> str:
    return "\n".join([report.brief_line(), *(r.format_text() for r in report.failures())])


def _expected(declared: object) -> set[str]:
    """A model may declare ``expected_violations`` (property names it must violate: a model
    of a faulty client)."""
    if not declared:
        return set()
    return set(declared) if isinstance(declared, list | tuple | set | frozenset) else {"?"}


def _as_expected(report: Report, expected: set[str]) -> bool:
    """A model with ``expected_violations`` passes when exactly those are violated and the
    rest hold (which needs a complete run); a model without it when everything holds."""
    if not expected:
        return report.ok
    violated = {r.name for r in report.results if r.verdict is Verdict.VIOLATED}
    others_hold = all(r.verdict.ok for r in report.results if r.name not in expected)
    return report.complete and violated == expected and others_hold


def _expectation(report: Report, expected: set[str], passed: bool) -> str:
    violated = sorted(r.name for r in report.results if r.verdict is Verdict.VIOLATED)
    verdict = "as expected" if passed else f"NOT as expected (expected {sorted(expected)})"
    return f"{report.model}: violations {violated} {verdict}"
