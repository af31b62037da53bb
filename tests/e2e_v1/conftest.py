"""End-to-end tests on the mcp 1.x line: its server and client, the fault proxy, the v1
adapter. They run in their own environment (``make test`` makes ``.venv-mcp1`` with the
``mcp1`` extra on first use: 1.x and 2.x cannot share one) and are not collected where
mcp 2.x is installed.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

try:
    _MAJOR = int(metadata.version("mcp").split(".")[0])
except metadata.PackageNotFoundError:
    _MAJOR = 0

collect_ignore_glob = [] if _MAJOR == 1 else ["test_*.py"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
