"""What the gateway's end-to-end tests share (tests/e2e/test_gateway*.py): a rig with
gateway replicas, the two-replica resume scenario, a store that loses cursors, and a
harness server that can be stopped and restarted on its port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from support import scenarios

FAST = {"backoff_initial_s": 0.05, "backoff_max_s": 0.5}
"""The guard's policy in these tests: short backoffs (the harness server sends retry: 50)."""


@contextlib.asynccontextmanager
async def gateway_rig(
    replicas: int = 1, upstream_faults: bool = False, **kwargs: object
) -> AsyncIterator[scenarios.Rig]:
    """A rig with gateway replicas (keywords go to each ``Gateway``)."""
    from fsm.sse.guard import GuardConfig

    gateway = {"config": GuardConfig(**FAST), **kwargs}
    async with scenarios.open_rig(
        gateway=gateway, replicas=replicas, upstream_faults=upstream_faults
    ) as rig:
        yield rig


def two_replicas(
    before_second: Callable[[], Awaitable[None]] | None = None, completes: bool = True
) -> scenarios.Step:
    """A tool call through replica A; the client's stream is cut twice; the second (stale)
    resume lands on replica B after A was killed (``before_second`` runs then), and the
    server may replay the elicitation A already presented. When the call ``completes``,
    the user answers through B and the tool finishes; otherwise B ends it."""

    async def two_replicas(
        rig: scenarios.Rig,
        client: scenarios.ScenarioClient,
        call: scenarios.BackgroundCall,
        tg: TaskGroup,
    ) -> None:
        a, b = rig.middle.gateways
        tg.start_soon(call.run, client, "delete_files", {"deadline": "silent", "gated": True})
        post = await rig.tools_call()
        pending = await rig.controller.wait_pending(state="gated")
        # 1. cut before the elicitation: A's first resume replays it (presented once)
        first = await rig.cut_while_away(post, rig.elicit_while_away(pending))
        await rig.user.wait_presented(1)

        # 2. A dies; the balancer sends the client's (stale) resume to B
        async def away(mark: int) -> None:
            a.kill()
            if before_second is not None:
                await before_second()

        rig.proxy.retarget(b.url)
        await rig.cut_while_away(first, away, primed=completes)
        if completes:
            rig.user.answer_open()
        await call.wait(20)

    return two_replicas


async def two_replica_resume(
    store: object,
    before_second: Callable[[], Awaitable[None]] | None = None,
    completes: bool = True,
    **gateway: object,
) -> tuple[scenarios.ScenarioResult, scenarios.Rig]:
    """:func:`two_replicas` on two replicas sharing ``store`` (more keywords go to each
    ``Gateway``); its result and rig."""
    async with gateway_rig(store=store, replicas=2, **gateway) as rig:
        return await scenarios.run_scenario(two_replicas(before_second, completes), rig=rig), rig
    raise AssertionError("unreachable")


class CursorLost:
    """A shared store that never records a cursor: replica A dies before it could."""

    def __init__(self) -> None:
        from fsm.gateway.store import MemoryStore

        self.inner = MemoryStore()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def save_cursor(self, *args: object, **kwargs: object) -> None:
        return None


async def serve_until(
    stop: anyio.Event, stopped: anyio.Event, port: int, *, task_status: Any
) -> None:
    """Run the harness server on ``port`` (0: a free one; started with it) until ``stop``;
    ``stopped`` is set once it no longer listens (so it can restart on that port)."""
    from fsm.wire.server import running_server

    try:
        async with running_server(port=port, shutdown_timeout=0.5) as server:
            task_status.started(server)
            await stop.wait()
    finally:
        stopped.set()
