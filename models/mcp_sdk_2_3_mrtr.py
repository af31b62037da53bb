"""The official mcp 2.3.0 Python client's MRTR driver, as measured (protocol 2026-07-28).

``mcp/client/_input_required.py`` (``run_input_required_driver``) and
``Client._drive_input_required`` (``mcp/client/client.py``):

* every round dispatches *every* ``inputRequests`` entry to the callbacks, with the
  round-local key as the callback's request id: no de-duplication, a re-asked question
  is shown again;
* once every callback returned, it retries at once with the answers of that round and the
  newest ``requestState``; a state-only round sleeps (50 ms doubling to 250 ms) and retries;
* a JSON-RPC error on a retry (``-32602 invalid_request_state`` included) propagates as
  ``MCPError``: the call fails, nothing is withdrawn, the answer is lost; a transport
  error propagates the same way;
* past ``input_required_max_rounds`` (10) rounds it raises
  ``InputRequiredRoundsExceededError``;
* it keeps no clock: a prompt stays up however old its state gets.

The checker must find P2 (the same question presented twice: against a re-asking tool,
and against a server that re-asks on an expired state) and P6 (an answer given after the
question's client-side age is sent into a state that has surely expired).
"""

from __future__ import annotations

from typing import NamedTuple

from fsm.worlds import mrtr as world

LEGEND = (
    "mcp-sdk-2.3.0-mrtr[case]: the mcp 2.3.0 client against a re-asking tool, a server "
    "that re-asks on expired state, or one that rejects it"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

MAX_ROUNDS = 10


class Driver(NamedTuple):
    rounds: int = 0
    token: int | None = None
    waiting: frozenset[int] = frozenset()
    answered: tuple[int, ...] = ()
    ended: bool = False


class SdkDriver:
    """``run_input_required_driver`` as a policy."""

    name = "mcp-sdk-2.3.0-mrtr"

    def init(self) -> Driver:
        return Driver()

    def step(
        self, c: Driver, t: float, inp: world.Input
    ) -> tuple[Driver, tuple[world.Output, ...]]:
        if c.ended:
            return c, ()
        if isinstance(inp, world.Complete):
            return c._replace(ended=True), (world.End("completed"),)
        if isinstance(inp, world.InputRequired):
            rounds = c.rounds + 1
            if rounds > MAX_ROUNDS:
                return c._replace(ended=True), (world.End("failed"),)
            waiting = frozenset(inp.questions)
            c = c._replace(rounds=rounds, token=inp.token, waiting=waiting, answered=())
            if not inp.questions:
                return c, (world.Retry(inp.token, ()),)
            return c, tuple(world.Present(q) for q in inp.questions)
        if isinstance(inp, world.Error):
            return c._replace(ended=True), (world.End("failed"),)
        if isinstance(inp, world.Answer) and inp.request in c.waiting:
            q = inp.request
            c = c._replace(waiting=c.waiting - {q}, answered=(*c.answered, q))
            if c.waiting:
                return c, ()
            answers = tuple((q, world.USER_ANSWER) for q in sorted(c.answered))
            return c, (world.Retry(c.token, answers),)
        return c, ()


DRIVER = SdkDriver()

MODELS = [
    world.MrtrWorld(
        DRIVER,
        world.MrtrBounds(reasks=1, expiries=0, lost=0),
        name="mcp-sdk-2.3.0-mrtr[reasking-tool]",
        expect=("P2", "P6"),
    ),
    world.MrtrWorld(
        DRIVER,
        world.MrtrBounds(on_invalid="reask", lost=0),
        name="mcp-sdk-2.3.0-mrtr[reask-on-expiry]",
        expect=("P2", "P6"),
    ),
    world.MrtrWorld(
        DRIVER,
        world.MrtrBounds(on_invalid="reject", lost=0),
        name="mcp-sdk-2.3.0-mrtr[reject-expired]",
        expect=("P6",),
    ),
]
