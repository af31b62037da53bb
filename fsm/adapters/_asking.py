"""How the one-call adapters (:mod:`fsm.adapters.mrtr`, :mod:`fsm.adapters.tasks`) put a
question to the application: :func:`ask_callback` hands it to the callback registered on
mcp 2.x's ``Client`` through the SDK's ``ClientSession.dispatch_input_request``, in the
context :func:`prompt_context` builds, and returns the callback's answer or why there is
none (:class:`Unanswered`). A question goes unanswered three ways, each told apart:

* the SDK cannot parse the request (a question shown again from its stored text after a
  restart, a task's input request without a field the SDK requires): the callback is
  never called; the cause is the SDK's ``pydantic.ValidationError``;
* the callback raised: the cause is its exception;
* the callback returned ``ErrorData`` (it refused): no cause.

The reasons name the question by its key's id, quoted (``repr``: a task's key is the
server's text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fsm._extras import missing_extra

try:
    import pydantic
    from mcp import types
    from mcp.client.session import ClientRequestContext, ClientSession
except ModuleNotFoundError as exc:
    raise missing_extra("mcp", "fsm.adapters._asking", exc) from exc

from fsm import actions as act
from fsm.adapters._stored import RESHOWN_META

__all__ = ["Unanswered", "ask_callback", "prompt_context"]

_INPUT_REQUEST: pydantic.TypeAdapter[types.InputRequest] = pydantic.TypeAdapter(types.InputRequest)


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A question the callback did not answer: ``reason``, what the call is cancelled
    with; ``cause``, the exception behind it (``None``: the callback refused)."""

    reason: str
    cause: Exception | None


def prompt_context(session: ClientSession, shown: act.Present) -> ClientRequestContext:
    """The context a question's callback gets: ``request_id`` the key's id, and
    ``meta[RESHOWN_META]`` true for a question shown again after a restart."""
    meta: Any = {RESHOWN_META: True} if isinstance(shown, act.Reshown) else None
    return ClientRequestContext(session=session, request_id=str(shown.key[1]), meta=meta)


async def ask_callback(
    session: ClientSession, shown: act.Present, request: types.InputRequest | None = None
) -> types.InputResponse | Unanswered:
    """The answer of ``session``'s callback to the question ``shown``, or why there is
    none (see the module docstring). ``request``: the SDK's model of the question as it
    parsed it from the server's result; ``None``: parsed here from ``shown``'s method and
    params. Cancellation (the prompt withdrawn) propagates."""
    name = shown.key[1]
    if request is None:
        try:
            request = _INPUT_REQUEST.validate_python(
                {"method": shown.method, "params": shown.params}
            )
        except pydantic.ValidationError as exc:
            return Unanswered(f"the SDK cannot parse input request {name!r}", exc)
    try:
        answer = await session.dispatch_input_request(prompt_context(session, shown), request)
    except Exception as exc:  # a callback bug
        return Unanswered(f"the callback for {name!r} raised {type(exc).__name__}", exc)
    if isinstance(answer, types.ErrorData):
        return Unanswered(f"the callback refused {name!r}: {answer.message}", None)
    return answer
