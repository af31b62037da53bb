"""The MRTR rules around mcp 2.3.0's ``Client`` (protocol 2026-07-28).

``await guarded_call_tool(client, name, arguments)`` replaces ``client.call_tool``: it
drives the input rounds itself through the SDK's public manual mode
(``client.session.call_tool(..., allow_input_required=True)``) and lets
:class:`fsm.mrtr.call.MrtrCall` decide every step. The questions are answered by the callbacks
registered on the ``Client`` as usual (``elicitation_callback``, ...), through the SDK's
own ``session.dispatch_input_request``; the callback's ``context.request_id`` is the
question's identity (method + canonical params), not the round-local key. So:

* a callback runs at most once per question per call; a re-asked question is answered
  from the stored answer (bounded), never shown again;
* a question that outlives ``config.question_ttl_s`` (clock injected) is withdrawn (its
  callback task is cancelled) and the call raises :class:`~fsm.errors.RequestStateExpiredError`;
  a late answer is not sent into the expired state;
* ``-32602 invalid_request_state`` and the other terminal rows raise one typed error; a
  lost retry is resent (same answers, same state), bounded; rounds are capped;
* it returns the final ``CallToolResult`` or raises exactly one
  :class:`~fsm.errors.InteractionFailed` subclass, which is an ``MCPError`` too (code
  -32000, ``error.data["reason"]`` its reason: :mod:`fsm.adapters.sdkerrors`), chained
  to the callback's exception or to the SDK's error of the round that ended the call.

**Durable** (``store=``, with the application's ``call_id`` for the call): the call is a
:class:`~fsm.durable.calls.DurableCall`; each ``Persist`` is written to the store in a
worker thread (``anyio.to_thread``) and awaited before the next action, so a question is
on disk before its callback runs and an answer before the retry that carries it. Called
again after a crash with the same store file and ``call_id``, it restarts the call from
its record: a question on screen at the crash goes to its callback once more, with
``context.meta["fsm/reshown"]`` true (never twice, never an answered one); the retry in
flight is sent again with the stored answers and ``requestState``; a call whose end was
recorded raises its stored error, or :class:`~fsm.errors.InteractionFailed` (reason
``ended-before-restart``) if it had completed (its result is not stored): ``call_id`` names
one call, so a new call takes an id no earlier call used. A write the store refuses (a full
disk, a record longer than ``codec.MAX_VALUE_BYTES``) ends the call with that
:class:`~fsm.errors.StoreError` itself (not an ``MCPError``, as a guarded session's opening
raises it), the callbacks' tasks cancelled. The clock defaults to ``time.time`` then (a
question's age must mean the same across processes).

``on_action`` sees every action the rules emit (for logs and the demo). What it relies
on: ``Client.session``, ``ClientSession.call_tool(..., input_responses=, request_state=,
allow_input_required=True)``, ``ClientSession.dispatch_input_request`` and
``ClientRequestContext``, all public in mcp 2.3.0. A question left unanswered ends the call
(reason ``cancelled``; :mod:`fsm.adapters._asking` tells the ways apart): its callback
returned ``ErrorData`` (as the SDK's driver ends it); its callback raised (chained to the
callback's exception); or it is shown again after a restart and the SDK cannot parse its
stored request (chained to the SDK's ``pydantic.ValidationError``, the callback never
called). A result the SDK cannot parse (``pydantic.ValidationError``, e.g. an
input-required result without ``resultType``) is judged ``unparseable-result``:
:class:`~fsm.errors.MalformedInputRequiredError`, whose message says the client's SDK
rejected the round's result (the server answered), chained to the SDK's error. Limits:
one call per invocation; the tool's output schema is validated by the SDK on each round
as usual.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from typing import Any

from fsm._extras import missing_extra

try:
    import anyio
    from mcp import types
    from mcp.client.client import Client
    from pydantic import TypeAdapter
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters.mrtr", exc) from exc

from fsm import actions as act
from fsm import events as ev
from fsm.adapters import _asking, _stored
from fsm.adapters._stored import RESHOWN_META
from fsm.durable.store import Store
from fsm.errors import InteractionFailed, RequestKey
from fsm.mrtr import call as mrtr
from fsm.mrtr.call import MrtrAction, MrtrCall, MrtrConfig, MrtrEvent
from fsm.questions import question_id

__all__ = ["RESHOWN_META", "guarded_call_tool"]

_CALLS = itertools.count(1)

_RESPONSE: TypeAdapter[Any] = TypeAdapter(types.InputResponse)


async def guarded_call_tool(
    client: Client,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    config: MrtrConfig | None = None,
    clock: Callable[[], float] | None = None,
    on_action: Callable[[MrtrAction], None] | None = None,
    store: Store | None = None,
    call_id: str | None = None,
) -> types.CallToolResult:
    """Call tool ``name`` under the MRTR rules; see the module docstring. ``store`` and
    ``call_id`` come together (``ValueError`` otherwise, or for a stored record of a
    task); ``clock`` defaults to ``time.monotonic``, ``time.time`` with a store."""
    if (store is None) != (call_id is None):
        raise ValueError("store and call_id come together")
    if clock is None:
        clock = time.monotonic if store is None else time.time
    decider = MrtrCall(call_id or f"call:{next(_CALLS)}", clock=clock, config=config)
    # the application's call_id names the call across processes: its record is this call's
    call, restarted = await _stored.start(decider, store, "mrtr", resumed=True)
    session = client.session
    requests: dict[RequestKey, Any] = {}  # question -> the SDK's InputRequest model
    answers: dict[RequestKey, Any] = {}  # question -> the callback's InputResponse model
    causes: list[Exception] = []  # what left a question unanswered (an SDK or callback error)
    prompts: dict[RequestKey, anyio.CancelScope] = {}
    final: types.CallToolResult | None = None
    done = anyio.Event()
    failure: InteractionFailed | None = None
    round_error: list[Exception] = []  # what the SDK raised for the round in flight
    cause: BaseException | None = None
    inbox: _stored.Inbox[MrtrEvent] = _stored.Inbox()
    post = inbox.post

    async def send(responses: dict[str, Any] | None, state: str | None) -> None:
        nonlocal final
        try:
            result = await session.call_tool(
                name,
                dict(arguments) if arguments is not None else None,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
        except Exception as exc:  # every failed round goes to the table
            round_error[:] = [exc]
            post(mrtr.RoundFailed(_stored.as_outcome(exc)))
            return
        round_error.clear()
        body = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(result, types.InputRequiredResult):
            for server_key, req in (result.input_requests or {}).items():
                params = body["inputRequests"][server_key].get("params")
                requests[(decider.call, question_id(req.method, params))] = req
        else:
            final = result
        post(mrtr.RoundResult(body))

    async def ask(shown: act.Present) -> None:
        key = shown.key
        with _stored.prompt_scope(prompts, key):  # down however its callback ends
            # a question shown again after a restart has no SDK model: parsed from the store
            got = await _asking.ask_callback(session, shown, requests.get(key))
            if isinstance(got, _asking.Unanswered):  # ends the call, chained to its cause
                if got.cause is not None:
                    causes.append(got.cause)
                post(mrtr.CallCancelled(got.reason))
            else:
                answers[key] = got
                dumped = got.model_dump(by_alias=True, exclude_none=True, mode="json")
                post(ev.UserAnswered(key, dumped))

    # The loop sends every request itself: while one is in flight nothing is showing (a
    # retry goes only once every question has its answer), so nothing else can happen.
    # A restart (the process before this one ended mid-call) sends what its actions say.
    outgoing: tuple[dict[str, Any] | None, str | None, float] | None = (
        (None, None, 0.0) if restarted is None else None
    )

    async def take(action: Any, event: Any) -> None:
        nonlocal outgoing, failure, cause
        if await _stored.take_common(action, store, on_action, prompts, tg, ask):
            return
        if isinstance(action, mrtr.Retry):
            # The rules chose which stored answer goes under which key; send the
            # callback's own object for it (not re-validated from JSON), or the stored
            # answer after a restart.
            chosen = None
            if action.input_responses is not None:
                chosen = {
                    k: answers[q]
                    if q in answers
                    else _RESPONSE.validate_python(action.input_responses[k])
                    for k, q in action.questions.items()
                }
            outgoing = (chosen, action.request_state, action.delay_s)
        elif isinstance(action, act.Fail):
            failure = action.error
            if isinstance(event, mrtr.RoundFailed) and round_error:
                cause = round_error[0]  # the SDK's error that ended the call
            done.set()
        elif isinstance(action, act.Complete):
            done.set()

    with _stored.store_failure():  # a refused write ends the call as that StoreError
        async with anyio.create_task_group() as tg:
            for action in restarted or ():
                await take(action, None)
            while not done.is_set():
                if outgoing is not None:
                    responses, state, delay = outgoing
                    outgoing = None
                    if delay > 0:
                        await anyio.sleep(delay)
                    await send(responses, state)
                for event in await inbox.take(decider.deadline(), clock, mrtr.Tick()):
                    for action in call.feed(event):
                        await take(action, event)
            tg.cancel_scope.cancel()
    if failure is not None:
        raise _stored.ERRORS.wrap(failure) from (causes[0] if causes else cause)
    assert final is not None
    return final
