"""The unmodified mcp client through a guarding gateway replica (fsm.gateway): the seed
incident and its relatives, against the real mcp server, faults at a proxy in front of the
gateway (between the client and the gateway), by explicit command."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest

from fsm.harness.proxy import FaultProxy, is_resume_get
from fsm.harness.scenarios import (
    ClientEnv,
    Outcome,
    Rig,
    ScenarioResult,
    User,
    open_rig,
    plain_client,
    run_scenario,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

FAST = {"backoff_initial_s": 0.05, "backoff_max_s": 0.5}


@contextlib.asynccontextmanager
async def gateway_rig(replicas: int = 1, **kwargs: object) -> AsyncIterator[Rig]:
    from fsm.guard import GuardConfig

    async with open_rig(
        gateway={"config": GuardConfig(**FAST), **kwargs}, replicas=replicas
    ) as rig:
        yield rig


async def test_seed_through_the_gateway_presents_once() -> None:
    async with gateway_rig() as rig:
        r = await run_scenario("seed", plain_client, rig=rig)
    assert list(r.presentation_counts.values()) == [1], r.presentation_counts
    print(r)


@pytest.mark.parametrize(
    "name", ["replayed_cancel", "answer_conn_error", "session_expired", "happy"]
)
async def test_scenarios_through_the_gateway(name: str) -> None:
    async with gateway_rig() as rig:
        r = await run_scenario(name, plain_client, rig=rig)
    print(name, r.presentation_counts, r.outcome, r.probe, [(a.status, a.fault) for a in r.answers])


async def _two_replica_resume(store: object) -> tuple[ScenarioResult, Rig]:
    """A tool call through replica A; the client's stream is cut twice; the second (stale)
    resume lands on replica B after A was killed, and the server replays the elicitation
    A already presented. The user answers through B; the tool completes."""
    async with gateway_rig(store=store, replicas=2) as rig:
        a, b = rig.gateways
        proxy, controller, user = rig.proxy, rig.controller, rig.user
        outcome: list[Outcome] = []
        done = anyio.Event()
        async with plain_client(rig.env()) as client, anyio.create_task_group() as tg:

            async def call() -> None:
                try:
                    outcome.append(
                        Outcome.of_result(
                            await client.call_tool(
                                "delete_files", {"deadline": "silent", "gated": True}
                            )
                        )
                    )
                except Exception as exc:
                    outcome.append(Outcome.of_exception(exc))
                finally:
                    done.set()

            tg.start_soon(call)
            post = await rig.tools_call()
            pending = await controller.wait_pending(state="gated")
            # 1. cut before the elicitation: A's first resume replays it (presented once)
            hold = proxy.hold_next(is_resume_get)
            mark = controller.log[-1].seq
            await proxy.cut(post, "abrupt")
            first = await hold.wait_arrived()
            controller.release(pending)
            await rig.stored("elicitation/create", after=mark)
            hold.release()
            await rig.primed(first)
            await user.wait_presented(1)
            # 2. A dies; the balancer sends the client's (stale) resume to B
            hold = proxy.hold_next(is_resume_get)
            proxy.retarget(b.url)
            await proxy.cut(first, "abrupt")
            second = await hold.wait_arrived()
            a.kill()
            hold.release()
            await rig.primed(second)
            user.answer_open()
            with anyio.fail_after(20):
                await done.wait()
        r = _collect_result(rig, outcome[0])
        return r, rig


def _collect_result(rig: Rig, outcome: Outcome) -> ScenarioResult:
    from fsm.harness.scenarios import _collect

    return _collect("two-replicas", rig, outcome, None, 0.0)


class _CursorLost:
    """A shared store that never records a cursor: replica A dies before it could."""

    def __init__(self) -> None:
        from fsm.gateway.store import MemoryStore

        self.inner = MemoryStore()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def save_cursor(self, *args: object, **kwargs: object) -> None:
        return None


@pytest.mark.parametrize("cursor_recorded", [True, False])
async def test_resume_on_the_other_replica_presents_once(cursor_recorded: bool) -> None:
    """Replica B never saw the stream. With A's cursor in the store, B rewrites the
    client's stale cursor to it and the server replays nothing old; without it, B resumes
    from the client's id, the server replays the elicitation A presented, and B's claim
    loses: it is blanked (its id kept). Either way: one presentation, the tool's result."""
    from fsm.gateway.store import MemoryStore

    r, rig = await _two_replica_resume(MemoryStore() if cursor_recorded else _CursorLost())
    assert list(r.presentation_counts.values()) == [1]
    assert r.outcome.kind == "result" and r.outcome.text.startswith("Deleted 3 files")
    first, second = r.resumes
    assert first.cursor == second.cursor  # the SDK's stale cursor, both times
    replayed = [i for i in second.delivered if i.endswith(".ev4")]  # the elicitation's id
    assert bool(replayed) is not cursor_recorded
    if not cursor_recorded:  # delivered as an empty event that keeps its id
        blank = [
            e
            for e in rig.proxy.events(lambda e: e.kind == "sse_event")
            if e.exchange == second.exchange and e.event_id == replayed[0]
        ]
        assert [e.data for e in blank] == [""]


async def test_the_command_line_gateway_serves_a_plain_client() -> None:
    """``python -m fsm gateway`` in a child process, in front of the real server: the
    happy path through it, then a clean stop."""
    import subprocess
    import sys

    from fsm.harness.server import running_server

    async with running_server() as server:
        proc = await anyio.open_process(
            [
                sys.executable,
                "-m",
                "fsm",
                "gateway",
                "--upstream",
                server.url,
                "--listen",
                "127.0.0.1:0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            with anyio.fail_after(20):
                line = (await proc.stdout.receive()).decode()
            assert line.startswith("fsm gateway: serving http://127.0.0.1:"), line
            url = line.split()[-1]
            async with FaultProxy(url) as proxy, httpx2.AsyncClient() as http:
                user = User()
                env = ClientEnv(proxy.url, http, user.present, lambda: None)
                async with plain_client(env) as client, anyio.create_task_group() as tg:
                    got: list[object] = []

                    async def call() -> None:
                        got.append(await client.call_tool("delete_files", {}))

                    tg.start_soon(call)
                    await user.wait_presented(1)
                    user.answer_open()
            assert "Deleted 3 files" in str(got[0])
        finally:
            proc.terminate()
            with anyio.fail_after(20):
                assert await proc.wait() == 0
