"""The unmodified mcp client through a guarding gateway replica (fsm.gateway): the seed
incident and its relatives, against the real mcp server, faults at a proxy in front of the
gateway (between the client and the gateway), by explicit command."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from fsm.harness.scenarios import Rig, open_rig, plain_client, run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

FAST = {"backoff_initial_s": 0.05, "backoff_max_s": 0.5}


@contextlib.asynccontextmanager
async def gateway_rig(**kwargs: object) -> AsyncIterator[Rig]:
    from fsm.guard import GuardConfig

    async with open_rig(gateway={"config": GuardConfig(**FAST), **kwargs}) as rig:
        yield rig


async def test_seed_through_the_gateway_presents_once() -> None:
    async with gateway_rig() as rig:
        r = await run_scenario("seed", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1], r.presentation_counts
    print(r)


@pytest.mark.parametrize("name", ["replayed_cancel", "answer_conn_error", "session_expired", "happy"])
async def test_scenarios_through_the_gateway(name: str) -> None:
    async with gateway_rig() as rig:
        r = await run_scenario(name, plain_client, rig=rig)
    print(name, r.presentation_counts, r.outcome, r.probe, [(a.status, a.fault) for a in r.answers])
