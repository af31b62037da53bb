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

The checker must find P2 and P7 violated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from fsm.world import Bounds, Input, Output, World

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

    def step(self, c: Sdk, inp: Input) -> tuple[Sdk, tuple[Output, ...]]:
        if inp[0] == "session":  # a new session and tool call: a fresh call's state
            return Sdk(), ()
        if c.ended:
            return c, ()
        kind = inp[0]
        if kind == "event":
            _, index, what, r = inp
            c = c._replace(last=index)
            if what == "req":
                return c, (("present", r),)
            if what == "cancel":
                return c, (("withdraw", r),)
            if what == "resp":
                return c._replace(ended=True), (("end", "completed"),)
            return c, ()
        if kind == "cut" and not c.resumed:  # the POST stream broke
            if c.last is None:
                return c._replace(ended=True), (("end", "failed"),)
            return c._replace(param=c.last, attempt=0), (("wait",),)
        if kind in ("cut", "resume_404"):
            if kind == "cut" and inp[1]:  # clean end: advanced cursor, attempt reset
                return c._replace(param=c.last, attempt=0, resumed=False), (("wait",),)
            attempt = c.attempt + 1  # abrupt: the stale parameter is reused
            if attempt >= MAX_RECONNECTION_ATTEMPTS:
                return c._replace(ended=True), (("end", "failed"),)
            return c._replace(attempt=attempt, resumed=False), (("wait",),)
        if kind == "timer":
            return c._replace(resumed=True), (("resume", c.param if c.param is not None else 0),)
        if kind == "answer":
            return c, (("submit", inp[1], (("action", "accept"),)),)
        if kind == "outcome" and inp[2] == "neterr":
            return c._replace(ended=True), (("end", "failed"),)
        return c, ()


MODEL = World(
    SdkPolicy(),
    Bounds(requests=1, cuts=2, post_faults=0, deadline="silent", unknown_answer="202"),
    name="mcp-sdk-2.3.0",
    expect=("P2", "P7"),
)
