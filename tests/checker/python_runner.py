"""The venv's Python run as a user runs it (another working directory, the repository root
importable): what the ``python`` fixture of the checker tests is."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

Run = Callable[[list[str], Path], subprocess.CompletedProcess[str]]
"""The type of :func:`run_python` (and of the ``python`` fixture)."""


def run_python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the venv's Python with ``args`` in ``cwd``, the repository root importable;
    its output captured as text (two minutes at most)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
