"""MRTR (protocol 2026-07-28): what the rules cost per input round, alone and end to end.

``guard``: one round of a call through :class:`fsm.mrtr.call.MrtrCall` is an
``InputRequiredResult`` with one new question (the rules sort it, present it once) and the
user's answer (stored, the retry emitted). A 10-round call is fed from a fresh call per
run, on the compiled tables (``MrtrCall``'s default engine) and on the ``transitions``
runtime; the figure is the median per round (target <= 50 us on the default engine),
next to the bare cost of building the same events.

``e2e``: the real test server's ``survey(10)`` tool asks ten distinct questions, one per
round (10 ``InputRequiredResult`` rounds, 11 requests). The plain SDK driver
(``Client.call_tool``) and :func:`fsm.adapters.mrtr.guarded_call_tool` run it
interleaved, ``CALLS`` calls per sample, ``REPEATS`` samples each, on 127.0.0.1 with
server and client in one process and loop; the figure is the ratio of median process CPU
time (target <= 1.05), with wall time alongside.
"""

from __future__ import annotations

import gc
import statistics
import time
import timeit
from typing import Any

from bench.results import alternating, record, run_quietly, table
from fsm import actions as act
from fsm import events as ev
from fsm.mrtr.call import MrtrCall, RoundResult

ROUNDS = 10
REPEATS = 200
E2E_REPEATS = 11
CALLS = 5
TARGET_US = 50.0
TARGET_RATIO = 1.05


def _round(n: int) -> dict[str, Any]:
    ask = {
        "method": "elicitation/create",
        "params": {"message": f"Question {n + 1} of {ROUNDS}?", "requestedSchema": {}},
    }
    return {
        "resultType": "input_required",
        "inputRequests": {"confirm": ask},
        "requestState": str(n),
    }


def _call(engine: str) -> float:
    """Seconds for one 10-round call fed from scratch."""
    rounds = [RoundResult(_round(n)) for n in range(ROUNDS)]
    answer = {"action": "accept", "content": {}}
    started = time.perf_counter()
    call = MrtrCall("bench", clock=time.monotonic, engine=engine)  # type: ignore[arg-type]
    for result in rounds:
        present = call.feed(result)[0]
        assert isinstance(present, act.Present)
        call.feed(ev.UserAnswered(present.key, answer))
    call.feed(RoundResult({"content": []}))
    return time.perf_counter() - started


def bench_guard() -> dict[str, float]:
    bare = statistics.median(
        timeit.repeat(
            "[RoundResult(_round(n)) for n in range(ROUNDS)]",
            globals={"RoundResult": RoundResult, "_round": _round, "ROUNDS": ROUNDS},
            repeat=REPEATS,
            number=1,
        )
    )
    out = {"bare": bare / ROUNDS * 1e6}
    for engine in ("tables", "transitions"):
        runs = [_call(engine) for _ in range(REPEATS)]
        out[engine] = statistics.median(runs) / ROUNDS * 1e6
    return out


async def _e2e(repeats: int) -> dict[str, list[tuple[float, float]]]:
    from mcp import types
    from mcp.client.session import ClientRequestContext

    from fsm.adapters.mrtr import guarded_call_tool
    from fsm.wire.mrtr_server import running_mrtr_server
    from fsm.wire.sdk import modern_client

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return types.ElicitResult(action="accept", content={})

    times: dict[str, list[tuple[float, float]]] = {"plain": [], "guarded": []}
    async with (
        running_mrtr_server(ttl=60.0) as server,
        modern_client(server.url, elicitation_callback=user) as client,
    ):

        async def sample(kind: str) -> tuple[float, float]:
            gc.collect()
            started, cpu = time.perf_counter(), time.process_time()
            for _ in range(CALLS):
                if kind == "plain":
                    result = await client.call_tool("survey", {"questions": ROUNDS})
                else:
                    result = await guarded_call_tool(client, "survey", {"questions": ROUNDS})
                assert not result.is_error
            return time.perf_counter() - started, time.process_time() - cpu

        await sample("plain")  # warm-up
        await sample("guarded")
        for kind in alternating(("plain", "guarded"), repeats):
            times[kind].append(await sample(kind))
    return times


def bench_e2e(repeats: int = E2E_REPEATS) -> dict[str, float]:
    times = run_quietly(_e2e, repeats)
    out: dict[str, float] = {}
    for kind, samples in times.items():
        out[f"{kind}_wall"] = statistics.median(w for w, _ in samples) / CALLS
        out[f"{kind}_cpu"] = statistics.median(c for _, c in samples) / CALLS
    return out


def main() -> None:
    g = bench_guard()
    table(
        [
            ("build the round's events (bare)", g["bare"]),
            ("MrtrCall, compiled tables", g["tables"]),
            ("MrtrCall, transitions runtime", g["transitions"]),
        ],
        header=(f"one MRTR round ({ROUNDS}-round call)", "us/round"),
    )
    verdict = "meets" if g["tables"] <= TARGET_US else "misses"
    print(
        f"MrtrCall's default engine (compiled tables) {verdict} the target of {TARGET_US:g} "
        "us/round; the transitions runtime is the reference the tables are proved against"
    )
    record("mrtr_round_us_tables", round(g["tables"], 2), "us")
    record("mrtr_round_us_transitions", round(g["transitions"], 2), "us")
    e = bench_e2e()
    ratio = e["guarded_cpu"] / e["plain_cpu"]
    wall = e["guarded_wall"] / e["plain_wall"]
    table(
        [
            ("plain mcp 2.3.0 Client.call_tool", e["plain_wall"], e["plain_cpu"]),
            ("guarded_call_tool", e["guarded_wall"], e["guarded_cpu"]),
        ],
        header=(f"{ROUNDS}-round call, real server", "wall s/call", "cpu s/call"),
    )
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print(
        f"guarded/plain CPU {ratio:.3f} (wall {wall:.3f}): {verdict} the target of {TARGET_RATIO}"
    )
    record("mrtr_e2e_10_rounds_plain_cpu_s", round(e["plain_cpu"], 4), "s")
    record("mrtr_e2e_10_rounds_guarded_cpu_s", round(e["guarded_cpu"], 4), "s")
    record("mrtr_e2e_guarded_over_plain_cpu", round(ratio, 3), "ratio")
    record("mrtr_e2e_guarded_over_plain_wall", round(wall, 3), "ratio")


if __name__ == "__main__":
    main()
