"""The mcp 1.30 client guarded by :mod:`fsm.adapters.mcp1`, scenario by scenario.

The same scenarios and promises as the 2.x adapter's: one presentation per key, resumes
never backwards, answers resubmitted without re-prompting, one typed error, no hang.
"""

from __future__ import annotations

import pytest
from v1_support import answer_rejected

from conftest import needs_primed_replays
from fsm.wire.proxy import HttpFault
from support.scenarios import (
    EXPIRED_RESULT,
    cancel_withdraws_the_prompt,
    guarded_client,
    run_scenario,
    seed_ends_once,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


@needs_primed_replays()
async def test_seed_presented_once_and_ends_once() -> None:
    r = await seed_ends_once(guarded_client)
    assert len({x.cursor for x in r.resumes}) == len(r.resumes)  # every resume advanced


@needs_primed_replays()
async def test_cancel_withdraws_the_prompt_while_the_sdk_loop_is_blocked() -> None:
    """1.x reads nothing while its callback waits; the replayed cancellation is seen on
    the wire all the same and the open prompt is withdrawn (no answer is sent)."""
    r = await cancel_withdraws_the_prompt(guarded_client)
    assert r.outcome.text == EXPIRED_RESULT


async def test_failed_answer_is_resubmitted_and_the_session_lives() -> None:
    r = await run_scenario("answer_conn_error", guarded_client)
    assert list(r.presentation_counts.values()) == [1]
    assert [(a.request_id, a.status) for a in r.answers] == [(0, None), (0, 202)]
    assert r.outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_session_expiry_is_one_typed_error() -> None:
    """The resume after the expiry is refused: 404 is the session gone; the 400 that the
    oldest 1.x servers answer for an unknown session means this stream cannot be resumed.
    One typed error either way, and later calls fail at once."""
    r = await run_scenario("session_expired", guarded_client)
    assert list(r.presentation_counts.values()) == [1]
    ((status, _),) = [(x.status, x) for x in r.resumes]
    expected = "SessionExpiredError" if status == 404 else "ResumeBudgetSpentError"
    assert status in (400, 404) and r.outcome.error_type == expected
    assert r.probe is not None and r.probe.error_type is not None


async def test_answer_rejected_with_500_is_resubmitted() -> None:
    outcome, statuses = await answer_rejected(guarded_client, HttpFault(500, b"busy"))
    assert statuses == [500, 202]  # the same answer again, the user not asked again
    assert outcome.text == "Deleted 3 files: a.txt, b.txt, c.txt"


async def test_answer_rejected_as_unknown_is_one_typed_error() -> None:
    fault = HttpFault.jsonrpc_error(400, -32602, "no such pending request", 0)
    outcome, statuses = await answer_rejected(guarded_client, fault)
    assert statuses == [400]
    assert outcome.error_type == "UnknownPendingRequestError"
