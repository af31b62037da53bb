"""What every test directory shares: the async tests run on asyncio, the SDKs' event
loop, whichever other anyio backends are installed."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
