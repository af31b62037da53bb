"""A response the gateway relays without a guard (not an event stream it tracks) hands
the event loop over every ``YIELD_EVERY`` bytes: a body already buffered, read faster
than it is sent on, never holds the loop that every other session shares."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import httpx2
import pytest

from fsm.adapters._transport.body import YIELD_EVERY
from fsm.gateway.app import _pieces

pytestmark = pytest.mark.anyio


class _Buffered(httpx2.AsyncByteStream):
    """A body whose every read returns at once: all of it is already buffered."""

    def __init__(self, pieces: int, size: int) -> None:
        self.pieces, self.size = pieces, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.pieces):
            yield b"x" * self.size


async def test_an_unguarded_body_read_from_a_full_buffer_hands_the_loop_over() -> None:
    size = 16 * 1024
    resp = httpx2.Response(200, stream=_Buffered(pieces=64, size=size))  # 1 MiB
    turns: list[int] = []
    relayed = 0

    async def other() -> None:
        while True:
            turns.append(relayed)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await anyio.lowlevel.checkpoint()
        before = len(turns)
        async for piece in _pieces(resp):
            relayed += len(piece)
        tg.cancel_scope.cancel()
    assert relayed == 64 * size
    handed_over = len(turns) - before
    assert handed_over >= relayed // YIELD_EVERY - 1  # about once per YIELD_EVERY bytes
