"""``python -m fsm render [--out DIR] [--check] [--png] [--only NAME ...] [MODEL.py|DIR ...]``.

Renders every registered producer (:data:`fsm.render.registry.PRODUCERS`) into DIR
(default ``diagrams/``): ``NAME.dot``, ``NAME.mmd`` (when the diagram has Mermaid
text) and ``NAME.svg`` (``--png`` also writes ``NAME.png`` for a quick look).

Given model files (or directories of them, as ``fsm check`` takes them), it renders
those models instead: the machines of each one's policy, its reachable states and each
counterexample (:mod:`fsm.render.user`). A file that defines no model, or a model that
raises (while it is explored or drawn: its ``format_state`` too), is one message naming
the file and the model's line that raised, as ``fsm check`` prints it, and exit 2.

``--check`` renders DOT and Mermaid into a temporary directory, compares them with DIR
byte for byte and lists the stale or missing files (SVG depends on the Graphviz
version and is not compared). Exit codes: 0 fine, 1 stale files, 2 bad arguments or
the rendering engine is missing, 3 DIR could not be written (an existing file, or not
writable); one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from fsm.render.registry import PRODUCERS, Diagram
from fsm.render.svg import RenderEngineMissing, render_png, render_svg, require_engine


def _texts(name: str, diagram: Diagram) -> dict[str, str]:
    files = {f"{name}.dot": diagram.dot}
    if diagram.mermaid is not None:
        files[f"{name}.mmd"] = diagram.mermaid
    return files


def write_texts(out: Path, names: list[str]) -> list[Path]:
    """Render the DOT and Mermaid of ``names`` into ``out``; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in names:
        for file, text in _texts(name, PRODUCERS[name]()).items():
            path = out / file
            path.write_text(text, encoding="utf-8", newline="\n")
            written.append(path)
    return written


def stale(out: Path, names: list[str]) -> list[str]:
    """File names under ``out`` whose DOT/Mermaid differ from a fresh render (or are missing)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = write_texts(Path(tmp), names)
        return [
            f.name
            for f in fresh
            if not (out / f.name).is_file() or (out / f.name).read_bytes() != f.read_bytes()
        ]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsm render",
        description=__doc__.split("\n")[0],
        epilog="exit status: 0 fine, 1 stale files (--check), "
        "2 bad arguments, a bad model file or a model that raised, "
        "or the rendering engine is missing, "
        "3 DIR could not be written (an existing file, or not writable)",
    )
    p.add_argument("--out", type=Path, default=Path("diagrams"), help="output directory")
    p.add_argument("--check", action="store_true", help="exit 1 if DIR is stale")
    p.add_argument("--png", action="store_true", help="also write PNG files")
    p.add_argument("--only", nargs="+", metavar="NAME", help="render only these diagrams")
    p.add_argument(
        "models",
        nargs="*",
        metavar="MODEL.py|DIR",
        help="render these files' models (their policy's machines, reachable states and"
        " counterexamples) instead of the built-in diagrams",
    )
    return p


def _user_diagrams(paths: list[str]) -> dict[str, Diagram]:
    """The diagrams of every model the files (or directories) ``paths`` define;
    ModelLoadError or ModelError (its message headed by the file, as ``fsm check``
    reports it) when one cannot be loaded, explored or drawn."""
    from fsm.checker import ModelError
    from fsm.checker.loader import load_models, model_files
    from fsm.render.user import model_diagrams

    diagrams: dict[str, Diagram] = {}
    for path in paths:
        for file in model_files(path):
            for model in load_models(file):
                try:
                    diagrams.update(model_diagrams(model))
                except ModelError as exc:
                    raise ModelError(f"{file}: {exc}", exc.path, exc.action, exc.location) from exc
    return diagrams


def _render_models(paths: list[str], out: Path, png: bool) -> int:
    from fsm.checker import ModelError, ModelLoadError
    from fsm.render.user import write_diagrams

    try:
        require_engine()
        diagrams = _user_diagrams(paths)
    except RenderEngineMissing as exc:
        print(f"fsm render: {exc}", file=sys.stderr)
        return 2
    except ModelLoadError as exc:
        print(f"fsm render: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"fsm render: {exc.format_text()}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:  # a model the checker cannot take
        print(f"fsm render: {exc}", file=sys.stderr)
        return 2
    return _write(
        out,
        lambda: write_diagrams(diagrams, out, svg=True, png=png),
        f"rendered {len(diagrams)} diagram(s) of {', '.join(paths)} into {out}",
    )


def _write(out: Path, write: Callable[[], object], done: str) -> int:
    """Run ``write`` (diagrams into ``out``) and print ``done``: exit code 0; 2 without the
    render engine, 3 when ``out`` cannot be written (the reason printed)."""
    try:
        write()
    except RenderEngineMissing as exc:
        print(f"fsm render: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        what = "exists and is not a directory" if out.is_file() else f"cannot be written: {exc}"
        print(f"fsm render: --out {out}: {what}", file=sys.stderr)
        return 3
    print(done)
    return 0


def main(argv: list[str]) -> int:
    """Run the subcommand; return the exit code (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed the reason
        return 0 if exc.code == 0 else 2
    if args.models:
        if args.only or args.check:
            print("fsm render: --only and --check are for the built-in diagrams", file=sys.stderr)
            return 2
        return _render_models(args.models, args.out, args.png)
    names = list(args.only or PRODUCERS)
    unknown = [n for n in names if n not in PRODUCERS]
    if unknown:
        print(
            f"fsm render: unknown diagram(s) {', '.join(unknown)}; known: {', '.join(PRODUCERS)}",
            file=sys.stderr,
        )
        return 2
    out: Path = args.out
    if args.check:
        outdated = stale(out, names)
        for name in outdated:
            print(f"stale: {out / name}", file=sys.stderr)
        if outdated:
            print(
                f"{len(outdated)} stale diagram file(s); run: python -m fsm render --out {out}",
                file=sys.stderr,
            )
            return 1
        print(f"diagrams in {out} are up to date")
        return 0

    def write_builtin() -> None:
        require_engine()
        write_texts(out, names)
        for name in names:
            dot = PRODUCERS[name]().dot
            (out / f"{name}.svg").write_text(render_svg(dot), encoding="utf-8", newline="\n")
            if args.png:
                (out / f"{name}.png").write_bytes(render_png(dot))

    return _write(out, write_builtin, f"rendered {len(names)} diagram(s) into {out}")
