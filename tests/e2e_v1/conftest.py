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


def needs_primed_replays() -> pytest.MarkDecorator:
    """Skip where the harness server does not prime replayed streams (1.x before 1.28.1):
    the scenario waits for that event to know a resume attached. A limit of the test
    bed's server, not of the client under test."""
    from fsm.wire.sdk import MCP_VERSION, PRIMES_REPLAYS

    return pytest.mark.skipif(
        not PRIMES_REPLAYS,
        reason=f"mcp {MCP_VERSION}'s server does not prime a replayed stream",
    )
