"""The unmodified mcp 1.30 client against the mcp 1.30 harness server: what it does.

The behaviours ``models/mcp_sdk_1_x.py`` models, measured here on the wire.
"""

from __future__ import annotations

import anyio
import pytest
from v1_support import answer_rejected

from conftest import needs_primed_replays
from fsm.wire.proxy import HttpFault
from support.scenarios import open_rig, plain_client, run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]

RETRY_S = 0.05  # the harness server's retry: (the 1.x client's reconnect delay)


async def test_happy_path_ids_start_at_zero() -> None:
    r = await run_scenario("happy", plain_client)
    ((session, rid),) = r.presentation_counts
    assert rid == "0" and r.presentation_counts[(session, rid)] == 1  # 1.x counts from 0
    assert [(a.request_id, a.status) for a in r.answers] == [(0, 202)]
    assert r.outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_failed_answer_post_kills_the_session() -> None:
    """A connection error on the answer POST raises in ``post_writer``: the transport
    closes and the call fails with "Connection closed" (the model's writer death)."""
    r = await run_scenario("answer_conn_error", plain_client)
    assert sum(r.presentation_counts.values()) == 1
    assert [a.status for a in r.answers] == [None]  # no response: the proxy closed it
    assert r.outcome.kind == "error"
    assert (r.outcome.error_type, r.outcome.code) == ("McpError", -32000)
    assert r.outcome.text == "Connection closed"
    assert not any(e.kind == "elicit_answered" for e in r.server_log)


@needs_primed_replays()
async def test_seed_serial_duplicate_stale_cursor_and_a_hang() -> None:
    """The seed incident on 1.30, step by step on the wire (what the model's P2, P7 and
    P5-quiescent counterexamples say):

    * the second resume uses the first one's cursor (stale) and replays the elicitation;
    * the duplicate is presented only after the user answered the first presentation (the
      receive loop was blocked in the callback), then presented again (no de-duplication);
    * after the third abrupt cut the client stops resuming without a word: the server has
      finished the tool and the session still serves a later round trip, yet the call has
      no outcome (with the default ``read_timeout_seconds=None`` it would wait forever).

    Absence of a further resume is observed for 40 of the server's retry intervals (the
    client's reconnect delay), then confirmed by the tool's result never arriving.
    """
    async with open_rig() as rig:
        proxy, controller, user = rig.proxy, rig.controller, rig.user
        outcome: list[object] = []
        async with plain_client(rig.env()) as client, anyio.create_task_group() as tg:

            async def call() -> None:
                args = {"deadline": "silent", "gated": True, "after_deadline": "hold"}
                outcome.append(await client.call_tool("delete_files", args))

            tg.start_soon(call)
            post = await rig.tools_call()
            pending = await controller.wait_pending(state="gated")

            first = await rig.cut_while_away(post, rig.elicit_while_away(pending), primed=False)
            await user.wait_presented(1)

            async def deadline(mark: int) -> None:
                await controller.fire_deadline(pending)

            second = await rig.cut_while_away(first, deadline)
            await proxy.wait_for(  # the stale cursor replays the request on `second`
                lambda e: (
                    e.exchange == second.id
                    and e.kind == "sse_event"
                    and "elicitation/create" in (e.data or "")
                )
            )
            assert len(user.presentations) == 1  # blocked: the replay waits in the SDK
            user.answer(0)
            await user.wait_presented(2)  # the duplicate, after the first answer
            assert second.headers.get("last-event-id") == first.headers.get("last-event-id")

            mark = proxy.last_seq
            await proxy.cut(second, "abrupt")
            user.answer(1)
            await rig.answers_quiet()
            with anyio.move_on_after(40 * RETRY_S):
                await proxy.wait_for(lambda e: e.kind == "request" and e.method == "GET", 60, mark)
            assert not [ex for ex in proxy.exchanges.values() if ex.is_resume and ex.id > second.id]
            controller.finish(pending)
            await controller.wait_for(lambda e: e.kind == "tool_finished")
            assert (await client.call_tool("ping", {})) is not None  # the session serves
            assert outcome == []  # ...but the call has no outcome
            tg.cancel_scope.cancel()

        answers = [ex for ex in proxy.exchanges.values() if ex.is_answer]
        assert len(answers) == 2  # the dead request answered twice, both accepted
        assert not any(e.kind == "elicit_answered" for e in controller.log)


async def test_answer_rejected_with_500_kills_the_session() -> None:
    """An answer POST answered 500 raises in ``post_writer`` (any status >= 400 but 404):
    the session closes and the call fails (the model's writer death on "500rpc")."""
    outcome, statuses = await answer_rejected(plain_client, HttpFault(500, b"busy"))
    assert statuses == [500]
    assert (outcome.error_type, outcome.code, outcome.text) == (
        "McpError",
        -32000,
        "Connection closed",
    )
