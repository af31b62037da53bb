"""Command line: ``fsm {check,render,demo,audit,gateway} ...`` (or ``python -m fsm ...``).

Each subcommand lives in its own module and is imported only when asked for, so
``fsm check`` never imports the optional ``mcp`` or diagram extras. Exit codes are the
subcommand's (each ``--help`` lists them): 0 success, 1 a property or audit violated,
2 bad input or bad arguments, 3 an output could not be written (``check``, ``render``);
141 when the reader of stdout went away (``| head``), which ends the command quietly, as
a closed pipe ends a shell command.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

import fsm

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("fsm.checker.cli", "model-check closed models (models/*.py)"),
    "render": ("fsm.render.cli", "render machines, product and counterexamples"),
    "demo": ("fsm.demo.cli", "replay the seed incident against a real MCP server"),
    "audit": ("fsm.audit", "audit a recorded client event log (JSONL)"),
    "gateway": ("fsm.gateway.cli", "run a guarding gateway in front of an MCP server"),
}


PIPE_CLOSED = 141
"""Exit status when stdout's reader went away: 128 + SIGPIPE, as a shell reports it."""


def _usage() -> str:
    lines = ["usage: fsm [--version] COMMAND [ARGS...]   (or: python -m fsm ...)", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += [
        "",
        "exit status: 0 success, 1 a property or an audit violated, 2 bad input or bad",
        "arguments, 3 an output could not be written (each COMMAND --help says more);",
        "141 stdout closed (| head).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand's ``main(argv) -> int``."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(_usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "--version":
        print(f"dead-or-resumable {fsm.__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"fsm: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    code: int = module.main(rest, draw=_draw) if name == "check" else module.main(rest)
    return code


def _draw(model: object, report: object, out: object) -> list[str]:
    """``fsm check --diagrams DIR``'s renderer, lent to the checker (which imports nothing
    else of ``fsm``); the diagram code is imported only when a model is drawn."""
    from fsm.render.user import draw_checked

    written: list[str] = draw_checked(model, report, out)  # type: ignore[arg-type]
    return written


def _exit(status: int) -> None:
    """Exit with ``status``, skipping the shutdown's garbage-collector passes.

    While it tears modules down the interpreter runs full collections, each traversing
    every live object; after ``check`` the heap holds millions of memoised states and
    those passes took 3 s of a 10 s ``check models/*.py``. Frozen objects are not
    traversed; the memory goes back to the operating system when the process ends.
    """
    gc.freeze()
    raise SystemExit(status)


def run() -> None:
    """The ``fsm`` console script (and ``python -m fsm``): run :func:`main` and exit with
    its status; a closed stdout ends the run quietly with :data:`PIPE_CLOSED`."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = PIPE_CLOSED
    _exit(status)


if __name__ == "__main__":
    run()
