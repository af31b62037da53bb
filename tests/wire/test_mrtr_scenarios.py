"""The MRTR wire scenarios (protocol 2026-07-28) measured: what the plain mcp 2.x
``Client`` does on the wire in each, what the guarded path does instead, and that the
verdict's MRTR reading can fail (a late answer judged by the scenario's clock, a retry
after a terminal rejection)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from fsm.wire.sdk import MCP_MAJOR

if MCP_MAJOR < 2:
    pytest.skip("protocol 2026-07-28 needs mcp 2.x", allow_module_level=True)

from mcp import types
from mcp.client.session import ClientRequestContext

from fsm.wire import (
    SCENARIOS,
    ClientEnv,
    PresentationRequest,
    ScenarioClient,
    guarded_client,
    judge,
    plain_client,
    run,
)
from fsm.wire.mrtr_rig import (
    QUESTION_AGE_S,
    MrtrStep,
    ScenarioClock,
    open_mrtr_rig,
    run_mrtr_scenario,
)
from fsm.wire.rig import MRTR_PROTOCOL
from fsm.wire.sdk import modern_client

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_the_plain_client_sends_the_late_answer_into_the_expired_state() -> None:
    """Shown at 0 s, answered at 541 s on the client's clock (age 540 s): the plain
    driver sends it anyway (P6), gets HTTP 400 with -32602 and fails with it."""
    verdict = await run("mrtr_expiry", plain_client)
    assert set(verdict.broken) == {"P6"}, verdict.summary()
    assert "'Delete 3 files?'" in verdict.broken["P6"][0]
    assert verdict.answer_statuses == (400,)
    assert (verdict.outcome.code, verdict.outcome.reason) == (-32602, "invalid_request_state")
    (shown,) = verdict.result.presentations
    assert shown.answered_at is not None and shown.answered_at - shown.at == QUESTION_AGE_S + 1


async def test_the_guarded_path_sends_nothing_and_names_the_age() -> None:
    verdict = await run("mrtr_expiry", guarded_client)
    assert verdict.passed, verdict.summary()
    assert verdict.answer_statuses == ()  # no retry carried the late answer
    assert verdict.outcome.error_type == "RequestStateExpiredError"
    assert verdict.outcome.reason == "aged-out"


async def test_a_late_answer_is_judged_by_the_age_the_scenario_holds_the_client_to() -> None:
    """The same traffic, judged with an age above 541 s, breaks nothing: P6 comes from
    the clock, not from the rejection."""
    plain = await run("mrtr_expiry", plain_client)
    patient = judge(dataclasses.replace(plain.result, question_age_s=600.0))
    assert plain.broken and patient.passed, patient.summary()


async def test_a_question_asked_again_is_one_question_whatever_its_round() -> None:
    plain = await run("mrtr_reask", plain_client)
    guarded = await run("mrtr_reask", guarded_client)
    assert set(plain.broken) == {"P2"} and guarded.passed, guarded.summary()
    assert len(plain.result.presentations) == 2 and len(guarded.result.presentations) == 1
    assert plain.answer_statuses == guarded.answer_statuses == (200, 200)
    assert plain.outcome.text == guarded.outcome.text == "Deleted 3 files after 2 answers"


@contextlib.asynccontextmanager
async def retrying_client(env: ClientEnv) -> AsyncIterator[ScenarioClient]:
    """A driver that takes every failed round for transient: it sends the same answers
    and state once more (P3 forbids it after ``invalid_request_state``)."""

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        answer = await env.on_present(PresentationRequest(None, context.request_id, params.message))
        return types.ElicitResult(action=answer.action, content=answer.content)

    class Retrying:
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            session = client.session
            result = await session.call_tool(name, arguments, allow_input_required=True)
            assert isinstance(result, types.InputRequiredResult)
            ((key, request),) = (result.input_requests or {}).items()
            ctx = ClientRequestContext(session=session, request_id=key, meta=None)
            answer = await session.dispatch_input_request(ctx, request)
            assert isinstance(answer, types.ElicitResult)
            answers: dict[str, Any] = {key: answer}
            state = result.request_state
            for attempt in range(2):
                try:
                    return await session.call_tool(
                        name,
                        arguments,
                        input_responses=answers,
                        request_state=state,
                        allow_input_required=True,
                    )
                except Exception:
                    if attempt:
                        raise

    async with modern_client(env.url, elicitation_callback=on_elicit) as client:
        yield Retrying()


async def test_a_retry_after_the_rejection_breaks_p3() -> None:
    verdict = await run("mrtr_restart", retrying_client)
    assert set(verdict.broken) == {"P3"}, verdict.summary()
    assert verdict.answer_statuses == (400, 400)


async def test_the_restart_is_a_rejection_either_client_takes_for_final() -> None:
    plain = await run("mrtr_restart", plain_client)
    guarded = await run("mrtr_restart", guarded_client)
    assert plain.passed and guarded.passed, plain.summary() + guarded.summary()
    assert plain.answer_statuses == guarded.answer_statuses == (400,)
    assert plain.outcome.code == -32602
    assert guarded.outcome.reason == "invalid-request-state"


def test_the_clock_moves_only_forward_by_command() -> None:
    clock = ScenarioClock()
    clock.advance(541.0)
    assert clock.now() == 541.0
    with pytest.raises(ValueError):
        clock.advance(-1.0)


def test_every_mrtr_scenario_runs_on_its_own_rig() -> None:
    mrtr = {n for n, s in SCENARIOS.items() if s.protocol == "2026-07-28"}
    assert mrtr == {"mrtr_expiry", "mrtr_reask", "mrtr_restart"}


@pytest.mark.parametrize(
    ("factory", "reason"),
    [(plain_client, "invalid_request_state"), (guarded_client, "aged-out")],
    ids=["plain", "guarded"],
)
async def test_a_probe_that_never_returns_does_not_move_the_rig_to_an_older_protocol(
    factory: Any, reason: str
) -> None:
    """The SDK's default ``mode="auto"`` probes ``server/discover`` with a 10 s timeout
    and, when it runs out, falls back to ``initialize`` (2025-11-25): on a loaded machine
    the 2026 server then answers as an old one and the scenario hangs. Here the proxy
    holds every probe for good (a slow machine, by command): the rig's clients name
    2026-07-28 outright, so none is sent, every request carries that version and the
    scenario ends as it does on an idle machine."""
    scenario = SCENARIOS["mrtr_expiry"]
    async with open_mrtr_rig() as rig:
        rig.proxy.hold_next(lambda ex: ex.rpc_method == "server/discover")
        step = cast("MrtrStep", scenario.step)
        result = await run_mrtr_scenario(step, factory, rig=rig, name=scenario.name)
    requests = [e for e in result.traffic if e.kind == "request"]
    methods = [e.json.get("method") for e in requests if isinstance(e.json, dict)]
    assert "tools/call" in methods
    assert "server/discover" not in methods and "initialize" not in methods
    assert {e.headers.get("mcp-protocol-version") for e in requests} == {MRTR_PROTOCOL}
    assert result.outcome.reason == reason
