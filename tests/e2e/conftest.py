"""Fixtures for the end-to-end tests against a real mcp 2.3.0 server on 127.0.0.1.

Skipped as a whole when the optional ``mcp`` extra is not installed.  Tests run on the
anyio pytest plugin with the asyncio backend (uvicorn and the proxy are asyncio-only).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from support.scenarios import Rig, open_rig  # noqa: E402


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    """A fresh server + fault proxy + HTTP client + scripted user."""
    async with open_rig() as r:
        yield r
