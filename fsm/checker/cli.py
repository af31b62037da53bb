"""``fsm check FILE.py|DIR [...] [--builtin NAME ...]``: model-check the models defined in files.

A directory stands for the model files directly in it: every ``*.py`` file whose name
starts with neither ``_`` nor ``test_`` and is not pytest's ``conftest``, in name order
(:func:`fsm.checker.loader.model_files`); each must define a model.

Exit status: 0 when every property of every model holds (or, for a model that declares
``expected_violations``, exactly those are violated); 1 when any property is violated,
vacuous, or unknown because a bound was hit (``--max-states``/``--max-depth``); 2 for bad
arguments, a bad model file, a bad ``--set``, or a model that raises while it is loaded,
explored or drawn, whatever it raises (``SystemExit`` and pytest's ``Skipped`` too: one
message naming the line of the model's code that raised, no traceback); 3 when an output
could not be written (the ``--write-tests`` target is an existing file, or not writable).

Bounds: a search stops at :data:`~fsm.checker.explore.DEFAULT_MAX_STATES` (2,000,000)
distinct states unless ``--max-states N`` says otherwise (``--max-states none``: no
bound), and says so on stderr when a bound stopped it; it warns on stderr, once, when the
process holds over half the machine's memory.

Output: reports go to stdout; with ``--json`` stdout is pure JSON Lines (one object per
model) and every human line (progress, verdicts against ``expected_violations``, files
written, errors) goes to stderr. Progress lines appear once a run lasts over a second
(disable them with ``--quiet``). ``--brief`` prints one line per model that passes (holds,
or fails exactly as declared), full reports only for the others. ``--overview`` (what
``make demo`` adds) heads each file with its path, the first sentence of its docstring and
its ``LEGEND`` (what the fields of its model names mean), and ends with a line that sums
the run up.

``--write-tests DIR`` writes a pytest module per counterexample found, replaying it with
the bounds ``--set`` gave; a shipped model is loaded by name, a model file by its path
relative to DIR, so the tests run from anywhere. Each module says in its test names and
docstring what it asserts: by default it passes while the bug exists (a witness,
``test_<model>_<property>.py``); with ``--regression`` it fails while the bug exists
(the same name, ending in ``_regression``). A file of the same name in DIR is replaced.

``--diagrams DIR`` writes each model's diagrams into DIR: its policy's machines, its
reachable states and each counterexample, its violating state marked (a model whose
``format_state`` raises while they are drawn is a model that raised: exit 2). The checker draws
nothing itself (it imports nothing else of ``fsm``): the ``fsm`` command lends :func:`main`
the renderer (``draw``: :func:`fsm.render.user.draw_checked`); without one the option is a
usage error.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import textwrap
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any, TextIO

from fsm.checker.explore import (
    DEFAULT_MAX_STATES,
    Checker,
    MemoryUseWarning,
    ModelError,
    model_errors,
)
from fsm.checker.loader import (
    ModelLoadError,
    builtin_model_file,
    builtin_models,
    load_models,
    model_files,
)
from fsm.checker.model import model_name
from fsm.checker.properties import Verdict
from fsm.checker.report import Report

DrawFn = Callable[[Any, Report, FilePath], list[str]]
"""``draw(model, report, directory) -> files written``: what ``--diagrams`` calls for each
model checked; OSError when the directory cannot be written."""

VIOLATED, BAD_INPUT, NOT_WRITTEN = 1, 2, 3
"""The exit statuses besides 0 (see :data:`EXIT_STATUS`)."""

EXIT_STATUS = """exit status:
  0  every property holds (a model with expected_violations: exactly those are violated)
  1  a property is violated, vacuous, or unknown because a bound was hit
  2  bad arguments, a bad model file or --set, or a model that raised
  3  an output could not be written (--write-tests or --diagrams DIR is a file, or not
     writable)"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fsm check",
        description="Model-check the models defined in Python files (MODEL, MODELS or model()).",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE.py|DIR",
        help="model files; a directory: every *.py in it not named _*, test_* or conftest.py",
    )
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
    parser.add_argument(
        "--max-states",
        type=_state_bound,
        default=DEFAULT_MAX_STATES,
        metavar="N",
        help=f"bound on distinct states (default {DEFAULT_MAX_STATES:,}; 'none': no bound)",
    )
    parser.add_argument("--max-depth", type=int, metavar="N", help="bound on BFS depth")
    parser.add_argument(
        "--write-tests",
        metavar="DIR",
        help="write a pytest file per violation, replaying it (it passes while the bug exists)",
    )
    parser.add_argument(
        "--regression",
        action="store_true",
        help="with --write-tests: write tests that FAIL while the bug exists (guard a fix)",
    )
    parser.add_argument(
        "--diagrams",
        metavar="DIR",
        help="write each model's diagrams into DIR: its policy's machines, its reachable"
        " states, each counterexample",
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
    parser.add_argument(
        "--overview",
        action="store_true",
        help="head each file with what it models and what its model names' fields mean "
        "(its LEGEND), and end with a line that sums the run up",
    )
    return parser


def _state_bound(text: str) -> int | None:
    """``--max-states``: a count, or ``none`` (no bound)."""
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or 'none'") from None


class _Usage(Exception):
    """Bad arguments: the message is printed, the exit status is 2."""


class _NotWritten(Exception):
    """An output could not be written: the message is printed, the exit status is 3."""


@dataclass(frozen=True)
class _Target:
    """A path to check: a model file or directory, or (``builtin``) a shipped model's name."""

    path: str
    builtin: str | None = None


def _settings(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise _Usage(f"--set {pair!r}: write FIELD=VALUE, e.g. --set requests=2")
        out[name.strip()] = value
    return out


def _targets(args: argparse.Namespace) -> list[_Target]:
    targets = [_Target(f) for f in args.files]
    for name in args.builtin:
        if name == "list":
            continue
        try:
            names = builtin_models() if name == "all" else [name]
            targets += [_Target(builtin_model_file(n), builtin=n) for n in names]
        except ModelLoadError as exc:
            raise _Usage(str(exc)) from None
    if not targets and "list" not in args.builtin:
        raise _Usage("name a model file or a --builtin model (--builtin list shows them)")
    for bound in (args.max_states, args.max_depth):
        if bound is not None and bound < 0:
            raise _Usage("bounds must be >= 0")
    if args.regression and not args.write_tests:
        raise _Usage("--regression writes tests: give --write-tests DIR too")
    return targets


def _out_dir(option: str | None, flag: str = "--write-tests") -> FilePath | None:
    """The ``flag`` directory, made if missing; _NotWritten if it cannot be."""
    if option is None:
        return None
    out_dir = FilePath(option)
    if out_dir.exists() and not out_dir.is_dir():
        raise _NotWritten(f"{flag} {option}: exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _NotWritten(f"{flag} {option}: cannot make the directory: {exc}") from None
    return out_dir


def _model_ref(target: _Target, file: str, out_dir: FilePath) -> str:
    """How a written test names its model file: a shipped model by name, a model file by
    its path relative to the test's directory (absolute across drives)."""
    if target.builtin is not None:
        return target.builtin
    try:
        return os.path.relpath(os.path.abspath(file), os.path.abspath(out_dir))
    except ValueError:  # another drive
        return os.path.abspath(file)


def _write_tests(
    report: Report,
    ref: str,
    *,
    builtin: bool,
    name: str | None,
    settings: dict[str, str],
    regression: bool,
    out_dir: FilePath,
) -> list[str]:
    written = []
    for result in report.results:
        if result.verdict is not Verdict.VIOLATED or result.path is None:
            continue
        stem = re.sub(r"[^0-9a-zA-Z]+", "_", f"{report.model}_{result.name}").strip("_").lower()
        target = out_dir / f"test_{stem}{'_regression' if regression else ''}.py"
        source = result.path.to_pytest(
            ref,
            result.name,
            model_name=name,
            settings=settings,
            builtin=builtin,
            regression=regression,
        )
        try:
            target.write_text(source, encoding="utf-8")
        except OSError as exc:
            raise _NotWritten(f"cannot write {target}: {exc}") from None
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
    with model_errors("applying --set", passing=(ValueError, TypeError)):  # a bad --set
        rebound = model.with_bounds(settings)
    return rebound


def _stopped(report: Report, args: argparse.Namespace) -> str | None:
    """What to tell the reader when a bound stopped the run (None if none did)."""
    if report.complete or report.bound is None:
        return None
    kind, _, value = report.bound.partition("=")
    if kind == "max_depth":
        return (
            f"fsm check: {report.model}: stopped at depth {value} (--max-depth): the states"
            " beyond it were not explored"
        )
    if args.max_states == DEFAULT_MAX_STATES:
        return (
            f"fsm check: {report.model}: stopped at {int(value):,} states, the default bound:"
            " its state space is larger, or grows without end (a counter, a log or a"
            " retry count with no limit). Bound the model, or raise the bound with"
            " --max-states N (--max-states none: no bound)"
        )
    return f"fsm check: {report.model}: stopped at {int(value):,} states (--max-states)"


def _warn_to(stream: TextIO) -> Any:
    """A ``warnings.showwarning`` printing one ``fsm check: warning: ...`` line."""

    def show(message: Warning | str, *_: Any, **__: Any) -> None:
        print(f"fsm check: warning: {message}", file=stream, flush=True)

    return show


def main(argv: list[str], draw: DrawFn | None = None) -> int:
    """Run ``check`` with ``argv`` (without the ``check`` word); return the exit status.
    ``draw`` writes a model's diagrams for ``--diagrams`` (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the reason
        return int(exc.code or 0)
    try:
        targets = _targets(args)
        settings = _settings(args.settings)
        if args.diagrams is not None and draw is None:
            raise _Usage("--diagrams needs the renderer: run it as `fsm check`")
    except _Usage as exc:
        print(f"{_parser().format_usage()}fsm check: {exc}", file=sys.stderr)
        return BAD_INPUT
    if "list" in args.builtin:
        print("\n".join(builtin_models()))
    try:
        out_dir = _out_dir(args.write_tests)
        drawn = _out_dir(args.diagrams, "--diagrams")
        with warnings.catch_warnings():
            warnings.simplefilter("always", MemoryUseWarning)
            warnings.showwarning = _warn_to(sys.stderr)
            draw_to = (draw, drawn) if draw is not None and drawn is not None else None
            return _check_all(args, targets, settings, out_dir, draw_to)
    except _NotWritten as exc:
        print(f"fsm check: {exc}", file=sys.stderr)
        return NOT_WRITTEN


def _check_all(
    args: argparse.Namespace,
    targets: list[_Target],
    settings: dict[str, str],
    out_dir: FilePath | None,
    draw_to: tuple[DrawFn, FilePath] | None = None,
) -> int:
    human = sys.stderr if args.json else sys.stdout
    status = 0
    tally = _Tally()
    for target in targets:
        try:
            files = model_files(target.path)
        except ModelLoadError as exc:
            print(f"fsm check: {exc}", file=sys.stderr)
            return BAD_INPUT
        for file in files:
            try:
                models = load_models(file)
            except ModelLoadError as exc:
                print(f"fsm check: {exc}", file=sys.stderr)
                return BAD_INPUT
            if args.overview and not args.json:
                print(_heading(file))
            for original in models:
                try:
                    model = _rebound(original, settings)
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
                    return BAD_INPUT
                except (ValueError, TypeError) as exc:
                    print(f"fsm check: {file}: {exc}", file=sys.stderr)
                    return BAD_INPUT
                expected = _expected(getattr(model, "expected_violations", None))
                passed = _as_expected(report, expected)
                tally.add(report, expected, passed)
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
                stopped = _stopped(report, args)
                if stopped is not None:
                    print(stopped, file=sys.stderr)
                if out_dir is not None:
                    written = _write_tests(
                        report,
                        _model_ref(target, file, out_dir),
                        builtin=target.builtin is not None,
                        name=model_name(original) if len(models) > 1 else None,
                        settings=settings,
                        regression=args.regression,
                        out_dir=out_dir,
                    )
                    for path in written:
                        print(f"wrote {path}", file=sys.stderr)
                if draw_to is not None:
                    draw, directory = draw_to
                    try:
                        drawn = draw(model, report, directory)
                    except ModelError as exc:  # its format_state raised, say
                        print(f"fsm check: {file}: {exc.format_text()}", file=sys.stderr)
                        return BAD_INPUT
                    except OSError as exc:
                        raise _NotWritten(f"--diagrams {directory}: {exc}") from None
                    for path in drawn:
                        print(f"wrote {path}", file=sys.stderr)
                if not passed:
                    status = VIOLATED
    if args.overview and not args.json:
        print(tally.summary())
    return status


def _heading(file: str) -> str:
    """A file's heading in ``--overview`` output: its path, the first sentence of its
    docstring, and its ``LEGEND`` (what the fields of its model names mean), if any.
    Read from the source, not the imported module."""
    try:
        tree = ast.parse(FilePath(file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return f"== {file}"
    doc = (ast.get_docstring(tree) or "").strip()
    first = doc.split("\n\n")[0].replace("\n", " ")
    first = first.split(". ")[0].rstrip(".")
    first = re.sub(r":\w+:`~?([^`]+)`", r"\1", first).replace("``", "")  # reST roles
    lines = textwrap.wrap(
        f"== {file}" + (f": {first}" if first else ""), 100, subsequent_indent="   "
    )
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["LEGEND"]
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            lines += textwrap.wrap(
                node.value.value, 100, initial_indent="   ", subsequent_indent="     "
            )
    return "\n".join(lines)


class _Tally:
    """What ``--overview`` sums up at its end."""

    def __init__(self) -> None:
        self.hold = self.declared = self.failed = self.states = 0
        self.seconds = 0.0

    def add(self, report: Report, expected: Collection[str], passed: bool) -> None:
        self.states += report.states
        self.seconds += report.seconds
        if not passed:
            self.failed += 1
        elif expected:
            self.declared += 1
        else:
            self.hold += 1

    def summary(self) -> str:
        models = self.hold + self.declared + self.failed
        return textwrap.fill(
            f"== {models} models: {self.hold} hold every property, {self.declared} violate "
            f"exactly what they declare (faulty clients the checker must catch), "
            f"{self.failed} fail; {self.states:,} states in {self.seconds:.1f} s",
            100,
            subsequent_indent="   ",
        )


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
