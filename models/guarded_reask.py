"""Question identity in the SSE era: a server-side shim that asks again under a new id.

The TypeScript legacy MRTR shim, the Go SDK's MRTR middleware and the Python v2
``Resolve`` turn one 2026 input request into an ``elicitation/create`` per attempt; when
one loses the answer it received (a restart, another worker), it asks the same question
again under a new JSON-RPC id with identical params. Here the server, having received the
answer to a request, may do that (the world's ``reasks``) with an id it has not used.

* ``mcp-sdk-2.3.0[reask] x2``: the measured mcp 2.3.0 client keys requests by id alone: it
  presents the re-ask, a second prompt for an answered question. It must fail P2.
* ``guarded-reask[resubmit] x2``: the shipped guard resubmits the stored answer under the
  new id (a failing answer POST besides): P1-P7 and L1 hold.

Every variant may cut the tool call's stream once, cleanly or abruptly.
* ``guarded-reask[twice] x3``: the server asks twice again; the guard resubmits once
  (``max_reasks`` 1), then fails the call once with ``QuestionReaskedError``: P1-P7 and
  L1 hold.
* ``guarded-reask[fail] x2``: ``on_reask="fail"``: the first re-ask fails the call: they hold.
* ``keyed-by-id[reask] x2``: the guard keyed by id alone (``questions=False``), as
  it was: it must fail P2, as the SDK does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fsm.worlds.sse import Bounds, World

from .guarded import CONFIG, GuardPolicy
from .mcp_sdk_2_3 import SdkPolicy

LEGEND = (
    "guarded-reask[variant]: the server loses an answer it received and asks the same "
    "question again under a new id (twice: two re-asks); resubmit: the shipped guard; "
    "fail: on_reask=fail; keyed-by-id: the guard with questions=False; "
    "mcp-sdk-2.3.0[reask]: the measured SDK client against that server; xN: N request ids"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""


def reasking(reasks: int = 1, *, cuts: int = 1, post_faults: int = 0) -> Bounds:
    """One question, asked again ``reasks`` times under new ids (``1 + reasks`` ids),
    and ``cuts`` cuts of the tool call's stream."""
    return Bounds(requests=1 + reasks, reasks=reasks, cuts=cuts, post_faults=post_faults)


def variants() -> list[World[Any]]:
    """The SDK found violating, the guard holding, and the guard without the rule."""
    guard = GuardPolicy(CONFIG)
    return [
        World(SdkPolicy(), reasking(), name="mcp-sdk-2.3.0[reask] x2", expect=("P2",)),
        World(guard, reasking(post_faults=1), name="guarded-reask[resubmit] x2"),
        World(guard, reasking(2), name="guarded-reask[twice] x3"),
        World(
            GuardPolicy(replace(CONFIG, on_reask="fail")),
            reasking(),
            name="guarded-reask[fail] x2",
        ),
        World(
            GuardPolicy(replace(CONFIG, questions=False), name="questions-off"),
            reasking(),
            name="keyed-by-id[reask] x2",
            expect=("P2",),
        ),
    ]


MODELS = variants()
