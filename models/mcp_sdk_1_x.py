"""The official mcp 1.x Python client (1.24-1.30), as measured (streamable HTTP, 2025-11-25).

Each behaviour below is pinned first by a plain-client end-to-end test on mcp 1.30 server
and client (``tests/e2e_v1/test_plain_client_v1.py``) or read from the 1.30.0 wheel (its modules
``mcp.client.streamable_http`` and ``mcp.shared.session``):

* **Serial dispatch.** ``BaseSession._receive_loop`` awaits the elicitation callback
  inline: while a prompt is open nothing else is processed. A replayed duplicate or a
  ``notifications/cancelled`` that arrives meanwhile waits; after the answer the
  duplicate is presented again (no de-duplication), and a cancellation of the open prompt
  only reaches a callback that has already returned.
* **Stale cursor.** As in 2.x: an abrupt failure of a resumed connection reconnects with
  the *original* cursor and counts an attempt; a clean end reconnects with the advanced
  cursor, attempt reset.
* **Silent exhaustion.** After 2 attempts ``_handle_reconnection`` returns without an
  error, and a POST stream that breaks before any event id is not resumed at all: no
  outcome reaches the call, which waits forever (``read_timeout_seconds=None``).
* **Writer death.** An answer POST answered with a status >= 400 other than 404, or
  failing to connect, raises in ``post_writer``: the session closes and the call fails.
  404 is ignored.

The checker must find P2, P7 and P5 (as ``P5-quiescent``: a hang) violated.
"""

from __future__ import annotations

from typing import NamedTuple

from fsm.worlds import sse as world

MAX_RECONNECTION_ATTEMPTS = 2


class Sdk1(NamedTuple):
    """last: newest id on the current connection; param: the reconnect's cursor argument;
    open: the request whose callback is running (``None``: the loop is free); queue: the
    inputs the blocked receive loop has not read yet; ended: the client stopped reacting
    (with an outcome or, silently, without one)."""

    last: int | None = None
    param: int | None = None
    attempt: int = 0
    resumed: bool = False
    ended: bool = False
    open: int | None = None
    queue: tuple[world.Event, ...] = ()


class Sdk1Policy:
    """``_handle_sse_response`` / ``_handle_reconnection`` / ``post_writer`` of mcp 1.30."""

    name = "mcp-sdk-1.x"

    def init(self) -> Sdk1:
        return Sdk1()

    def step(self, c: Sdk1, inp: world.Input) -> tuple[Sdk1, tuple[world.Output, ...]]:
        if c.ended:
            return c, ()
        if isinstance(inp, world.Event):
            c = c._replace(last=inp.event_id)  # the transport tracks ids before dispatch
            if c.open is not None:  # the receive loop is blocked in the callback
                return c._replace(queue=(*c.queue, inp)), ()
            return self._dispatch(c, inp)
        if isinstance(inp, world.Cut) and not c.resumed:  # the POST stream broke
            if c.last is None:  # no event id: not resumed, nothing reported
                return c._replace(ended=True), ()
            return c._replace(param=c.last, attempt=0), (world.Wait(),)
        if isinstance(inp, world.Cut | world.ResumeRefused | world.ResumeConflict):
            if isinstance(inp, world.Cut) and inp.clean:  # clean end: cursor advanced, attempt 0
                return c._replace(param=c.last, attempt=0, resumed=False), (world.Wait(),)
            attempt = c.attempt + 1  # abrupt (or 404): the stale parameter is reused
            if attempt >= MAX_RECONNECTION_ATTEMPTS:
                return c._replace(ended=True), ()  # returns silently: the call hangs
            return c._replace(attempt=attempt, resumed=False), (world.Wait(),)
        if isinstance(inp, world.Timer):
            return c._replace(resumed=True), (world.Resume(c.param if c.param is not None else 0),)
        if isinstance(inp, world.Answer) and inp.request == c.open:
            out: list[world.Output] = [world.Submit(inp.request, (("action", "accept"),))]
            c = c._replace(open=None)
            while c.queue and c.open is None and not c.ended:  # the loop reads on
                event, rest = c.queue[0], c.queue[1:]
                c, more = self._dispatch(c._replace(queue=rest), event)
                out += more
            return c, tuple(out)
        if isinstance(inp, world.PostOutcome) and inp.outcome in ("rpc", "500rpc", "neterr"):
            return c._replace(ended=True), (world.End("failed"),)  # post_writer died
        return c, ()

    def _dispatch(self, c: Sdk1, event: world.Event) -> tuple[Sdk1, tuple[world.Output, ...]]:
        if event.what == "req":
            return c._replace(open=event.request), (world.Present(event.request),)
        if event.what == "resp":
            return c._replace(ended=True), (world.End("completed"),)
        return c, ()  # a cancellation for a callback no longer running: nothing to cancel


MODEL = world.World(
    Sdk1Policy(),
    world.Bounds(requests=1, cuts=3, post_faults=0, deadline="silent", unknown_answer="rpc"),
    name="mcp-sdk-1.x",
    expect=("P2", "P5-quiescent", "P7"),
)
