"""Command line: ``python -m fsm {check,render,demo,audit} ...``.

Each subcommand lives in its own module and is imported only when asked for, so
``python -m fsm check`` never imports the optional ``mcp`` or diagram extras.
Exit codes are the subcommand's: 0 success, 1 a property or audit violated,
2 bad input or bad arguments.
"""

from __future__ import annotations

import gc
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("fsm.checker.cli", "model-check closed models (models/*.py)"),
    "render": ("fsm.render.cli", "render machines, product and counterexamples"),
    "demo": ("fsm.harness.demo", "replay the seed incident against a real MCP server"),
    "audit": ("fsm.audit", "audit a recorded client event log (JSONL)"),
}


def _usage() -> str:
    lines = ["usage: python -m fsm COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand's ``main(argv) -> int``."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"fsm: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    code: int = module.main(rest)
    return code


def _exit(status: int) -> None:
    """Exit with ``status``, skipping the shutdown's garbage-collector passes.

    While it tears modules down the interpreter runs full collections, each traversing
    every live object; after ``check`` the heap holds millions of memoised states and
    those passes took 3 s of a 10 s ``check models/*.py``. Frozen objects are not
    traversed; the memory goes back to the operating system when the process ends.
    """
    gc.freeze()
    raise SystemExit(status)


if __name__ == "__main__":
    _exit(main())
