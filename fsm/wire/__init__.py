"""The wire scenarios: faults on a real loopback MCP server, run against any client and
judged by P1-P7 (extra ``mcp``).

Each scenario (:data:`SCENARIOS`) starts a real mcp streamable-HTTP server on 127.0.0.1
(:mod:`fsm.wire.server`) behind a fault-injecting proxy (:mod:`fsm.wire.proxy`), has the
client under test call a destructive tool that asks the user "Delete 3 files?", injects
its fault (cut streams, a deadline that fires while the client is away, a replayed
cancellation, a failed answer POST, an expired session) and judges what the client did
from the wire and the user's side (:mod:`fsm.wire.verdict`)::

    from fsm.wire import SCENARIOS, plain_client, run_sync

    verdict = run_sync("seed", plain_client)
    print(verdict.summary())  # seed: broke P2, P7 ...

The ``mrtr_*`` scenarios do the same in protocol 2026-07-28 (mcp 2.x): the tool asks in
``InputRequiredResult`` rounds on :mod:`fsm.wire.mrtr_rig`, whose client clock the
scenario moves by command (``env.clock``), and the two ready factories below are there
mcp's ``Client(url)`` and :func:`fsm.adapters.mrtr.guarded_call_tool`.

The client under test
---------------------
A :data:`ClientUnderTest` is a factory: called with a :class:`ClientEnv` (``url``: the
MCP endpoint; ``on_present``: the person, called when the client shows an elicitation,
returning the answer; ``http_client``: the HTTP client to use), it returns an async
context manager yielding an initialised client with ``await call_tool(name,
arguments)``. A factory keeps one session open for the whole scenario: the scenarios
drive the tool call under test and also a few calls of their own through it (a ``ping``
round trip to let the client act on what it received; a probe after an expired
session). Ready ones: :func:`plain_client` (mcp ``ClientSession``, the installed line,
unguarded) and :func:`guarded_client` (the same client through
:func:`fsm.adapters.mcp2.guarded_session`). For a client in another language, run it as
a subprocess that reads commands (call a tool, answer a prompt) and writes events
(a prompt shown, a result) as JSON lines, and wrap that in a factory: the project's
tests drive the official TypeScript SDK client so (its ``tests/support/ts_client.py``).

Everything here runs on 127.0.0.1; faults are explicit commands, never timers; every wait
has a safety timeout (``timeout`` of :func:`run`). asyncio only (the proxy and the
servers are asyncio's).
"""

from __future__ import annotations

from fsm._extras import require

require("mcp", "fsm.wire", "mcp", "uvicorn")

from collections.abc import Awaitable, Callable  # noqa: E402

import anyio  # noqa: E402

from fsm.wire.rig import (  # noqa: E402
    CONFIRM,
    ClientEnv,
    ClientFactory,
    ElicitAnswer,
    Outcome,
    PresentationRequest,
    ScenarioClient,
    ScenarioResult,
    guarded_client,
    plain_client,
)
from fsm.wire.scenarios import SCENARIOS, Scenario  # noqa: E402
from fsm.wire.verdict import Verdict, judge  # noqa: E402

__all__ = [
    "CONFIRM",
    "SCENARIOS",
    "ClientEnv",
    "ClientUnderTest",
    "ElicitAnswer",
    "Outcome",
    "PresentationRequest",
    "Presenter",
    "Scenario",
    "ScenarioClient",
    "ScenarioResult",
    "Verdict",
    "guarded_client",
    "judge",
    "plain_client",
    "run",
    "run_sync",
]

ClientUnderTest = ClientFactory
"""A client factory (see the module docstring): ``factory(env: ClientEnv)`` returns an
async context manager yielding a :class:`ScenarioClient`."""

Presenter = Callable[[PresentationRequest], Awaitable[ElicitAnswer]]
"""``ClientEnv.on_present``: the person. Call it exactly when the client shows a prompt,
send back what it returns; never for a prompt the client decides not to show."""


async def run(
    scenario: str | Scenario, client: ClientUnderTest, *, timeout: float = 30.0
) -> Verdict:
    """Run ``scenario`` (a :class:`Scenario` or its name in :data:`SCENARIOS`) against
    ``client`` on a fresh rig and judge it. Raises ``KeyError`` for an unknown name and
    ``TimeoutError`` when the scenario does not finish within ``timeout`` seconds (a
    client that hangs). asyncio only."""
    chosen = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    return judge(await chosen.run(client, timeout=timeout))


def run_sync(
    scenario: str | Scenario, client: ClientUnderTest, *, timeout: float = 30.0
) -> Verdict:
    """:func:`run` in an event loop of its own (from code not already in one)."""

    async def main() -> Verdict:
        return await run(scenario, client, timeout=timeout)

    return anyio.run(main)
