"""Fixtures of the official conformance suite's tests (asyncio: uvicorn serves the
test bed's servers and gateways)."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
