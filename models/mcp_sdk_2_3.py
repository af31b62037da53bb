"""The official mcp 2.3.0 Python client, as measured (streamable HTTP, 2025-11-25).

* No de-duplication: the dispatcher runs the elicitation callback for every delivery of
  a request id (``mcp/shared/jsonrpc_dispatcher.py``: duplicate ids blind-overwrite).
* A POST stream that breaks after an event id reconnects with ``Last-Event-ID``; a clean
  end of the resumed connection reconnects with the *advanced* cursor and resets the
  attempt count (unbounded), an abrupt failure reconnects with the *original* cursor (the
  stale-cursor bug) and counts an attempt; after 2 attempts the call fails with -32000.
* The outcome of an answer POST is ignored (4xx/5xx swallowed); a connection error on it
  kills the transport, so the call fails with "Connection closed".
* ``notifications/cancelled`` cancels the running callback (the prompt is withdrawn).
* A request is keyed by its id alone: a question asked again under a new id (a
  server-side shim that lost the answer) runs the callback again (``models/guarded_reask.py``).

The checker must find P2 and P7 violated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from fsm.worlds import sse as world

MAX_RECONNECTION_ATTEMPTS = 2


class Sdk(NamedTuple):
    """last: newest id on the current connection; param: the reconnect's cursor argument."""

    last: int | None = None
    param: int | None = None
    attempt: int = 0
    resumed: bool = False
    ended: bool = False


class SdkPolicy:
    """``_handle_sse_response`` / ``_handle_reconnection`` of mcp 2.3.0, as a policy."""

    name = "mcp-sdk-2.3.0"

    def init(self) -> Sdk:
        return Sdk()

    def rename(self, c: Sdk, ids: Mapping[int, int], session: int) -> Sdk:
        """``c`` holds no request id: renaming leaves it as it is."""
        return c

    def step(self, c: Sdk, inp: world.Input) -> tuple[Sdk, tuple[world.Output, ...]]:
        if isinstance(inp, world.NewSession):  # a new session and tool call: a fresh call's state
            return Sdk(), ()
        if c.ended:
            return c, ()
        if isinstance(inp, world.Event):
            c = c._replace(last=inp.event_id)
            if inp.what == "req":
                return c, (world.Present(inp.request),)
            if inp.what == "cancel":
                return c, (world.Withdraw(inp.request),)
            if inp.what == "resp":
                return c._replace(ended=True), (world.End("completed"),)
            return c, ()
        if isinstance(inp, world.Reask):  # an elicitation like any other: its id is new
            return c._replace(last=inp.event_id), (world.Present(inp.request),)
        if isinstance(inp, world.Cut) and not c.resumed:  # the POST stream broke
            if c.last is None:
                return c._replace(ended=True), (world.End("failed"),)
            return c._replace(param=c.last, attempt=0), (world.Wait(),)
        if isinstance(inp, world.Cut | world.ResumeRefused | world.ResumeConflict):
            if isinstance(inp, world.Cut) and inp.clean:  # clean end: cursor advanced, attempt 0
                return c._replace(param=c.last, attempt=0, resumed=False), (world.Wait(),)
            attempt = c.attempt + 1  # abrupt: the stale parameter is reused
            if attempt >= MAX_RECONNECTION_ATTEMPTS:
                return c._replace(ended=True), (world.End("failed"),)
            return c._replace(attempt=attempt, resumed=False), (world.Wait(),)
        if isinstance(inp, world.Timer):
            return c._replace(resumed=True), (world.Resume(c.param if c.param is not None else 0),)
        if isinstance(inp, world.Answer):
            return c, (world.Submit(inp.request, (("action", "accept"),)),)
        if isinstance(inp, world.PostOutcome) and inp.outcome == "neterr":
            return c._replace(ended=True), (world.End("failed"),)
        return c, ()


MODEL = world.World(
    SdkPolicy(),
    world.Bounds(requests=1, cuts=2, post_faults=0, deadline="silent", unknown_answer="202"),
    name="mcp-sdk-2.3.0",
    expect=("P2", "P7"),
)
