"""A one-prompt call whose answer POST the proxy rejects, for any client factory."""

from __future__ import annotations

import anyio

from fsm.wire.proxy import Fault
from support.scenarios import ClientFactory, Outcome, open_rig


async def answer_rejected(factory: ClientFactory, fault: Fault) -> tuple[Outcome, list[int | None]]:
    """``delete_files`` presented once, its first answer POST answered with ``fault``: the
    call's outcome and the status of every answer POST on the wire, in order."""
    async with open_rig() as rig:
        outcome: list[Outcome] = []
        done = anyio.Event()
        async with factory(rig.env()) as client, anyio.create_task_group() as tg:

            async def call() -> None:
                try:
                    result = await client.call_tool("delete_files", {"deadline": "silent"})
                    outcome.append(Outcome.of_result(result))
                except Exception as exc:
                    outcome.append(Outcome.of_exception(exc))
                done.set()

            tg.start_soon(call)
            await rig.user.wait_presented(1)
            rig.proxy.fail_next_answer(fault)
            rig.user.answer_open()
            with anyio.fail_after(10):
                await done.wait()
        assert len(rig.user.presentations) == 1
        statuses = [ex.status for ex in rig.proxy.exchanges.values() if ex.is_answer]
        return outcome[0], statuses
