"""Make the repository root importable (``fsm``) and share helpers for the checker tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def run_python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the venv's Python with the repository root importable."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def python() -> object:
    return run_python
