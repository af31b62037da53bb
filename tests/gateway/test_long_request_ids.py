"""A request id longer than the bound (:data:`~fsm.adapters._transport.http.MAX_TRACKED_ID`,
256 characters of its JSON text) is not tracked: its call is forwarded as it came, as a
call whose id the guard cannot track (``1.0``) is, so what a session remembers of its
ended calls does not grow with their ids.

| input | what the gateway does | test |
|---|---|---|
| 24 calls of one session, each with a 1 MiB string id | each result reaches the client as the upstream sent it; the session holds what it holds after calls with short ids (well under 2 MiB), not 24 MiB and more | ``test_a_sessions_memory_does_not_grow_with_its_request_ids`` |
| answers to requests never seen here, with 1 MiB ids (and, the control, a short one) | each goes upstream as it came and is taken; none is remembered as relayed (the short one is) | ``test_an_answer_to_a_long_id_never_seen_here_is_relayed_and_not_remembered`` |
| a call whose id's JSON text is 257 characters (and, the controls, ``1.0`` and one of 256) | past the bound, as ``1.0``: its events pass with the upstream's ids, the result as it came, no error of the gateway's, and a resume naming one of its ids is ``400`` (not issued); at the bound: tracked, its ids the gateway's | ``test_an_id_past_the_bound_goes_untracked_as_it_came`` |

Real loopback HTTP (the scripted upstream); every wait is on a response.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.adapters._transport.http import MAX_TRACKED_ID  # noqa: E402
from tests.gateway import gateway_client as client  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def echo(message: dict[str, Any], _headers: dict[str, str]) -> list[bytes]:
    """An upstream's call: a progress event, then the call's result (ids ``e1``, ``e2``)."""
    return [
        scripted.sse("e1", scripted.PROGRESS),
        scripted.sse("e2", scripted.result(message["id"])),
    ]


async def test_a_sessions_memory_does_not_grow_with_its_request_ids() -> None:
    """A client with its own session makes 24 calls whose request ids are 1 MiB strings
    (bodies well within ``max_body``; the upstream takes any string id). Each result
    reaches the client; once they ended, the bytes reachable from the held session
    (``bench.gateway_bench.held_bytes``, the soak's own probe) stay within the documented
    figure for a session's past (docs/gateway.md, Limits, Memory: some 530 KB), far
    below one id's size times the calls."""
    from bench.gateway_bench import held_bytes

    up = scripted.Upstream(script=echo)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        with anyio.fail_after(20):
            for n in range(1, 25):
                rid = f"{n:04d}" + "x" * (1 << 20)
                got = await client.call(http, gw.url, sid, rid)
                assert (got.status, got.results(rid), got.errors()) == (200, 1, [])
        held = held_bytes(gw.gateway)
    assert held < 2 * 1024 * 1024, f"one session holds {held / 2**20:.1f} MiB after its calls ended"


@pytest.mark.parametrize(
    ("rid", "tracked"),
    [
        (1.0, False),  # the control: an id the guard cannot track
        ("x" * (MAX_TRACKED_ID - 2), True),  # JSON text (quotes included): at the bound
        ("x" * (MAX_TRACKED_ID - 1), False),  # one character past it
    ],
    ids=["float", "at-the-bound", "past-the-bound"],
)
async def test_an_id_past_the_bound_goes_untracked_as_it_came(rid: Any, tracked: bool) -> None:
    """A call whose id's JSON text is longer than ``MAX_TRACKED_ID`` is relayed as a call
    with an id the guard cannot track (``1.0``) is: its events pass with the upstream's
    own ids, its result as it came, no error of the gateway's; a resume naming one of
    those ids gets ``400`` (the gateway did not issue it), which the upstream's stream is
    not asked to replay. One whose id is at the bound is tracked: its events carry the
    gateway's ids, and a resume naming one gets its result from the gateway."""
    if isinstance(rid, str):
        assert len(json.dumps(rid)) == MAX_TRACKED_ID + (0 if tracked else 1)
    up = scripted.Upstream(script=echo)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        got = await client.call(http, gw.url, sid, rid)
        ids = [eid for eid, _ in got.events]
        resume = {**scripted.HEAD, "accept": "text/event-stream", "mcp-session-id": sid}
        again = await client.read(http, "GET", gw.url, {**resume, "last-event-id": ids[0]})
    assert (got.status, got.results(rid), got.errors()) == (200, 1, [])
    if tracked:
        assert "e1" not in ids and (again.status, again.results(rid)) == (200, 1)
    else:
        assert (ids, again.status) == (["e1", "e2"], 400)
        assert [m for m in up.requests if m[0] == "GET"] == []  # no resume went upstream


@pytest.mark.parametrize("token", [None, "Bearer fresh"], ids=["proven", "to-prove"])
@pytest.mark.parametrize(("length", "remembered"), [(8, 1), (1 << 20, 0)], ids=["short", "1-MiB"])
async def test_an_answer_to_a_long_id_never_seen_here_is_relayed_and_not_remembered(
    length: int, remembered: int, token: str | None
) -> None:
    """The session's own client answers requests this gateway never saw (another
    replica presented them, say), with ids of ``length`` characters, with the
    credentials it began the session with (proven) or with new ones the upstream
    accepts (relayed, then proven by a ``ping``). Each answer goes upstream as it came
    and is taken (``202``); one with a short id is remembered as relayed (so that no
    replica submits it again), one with an id past the bound is not: the answers the
    session remembers hold no more than short ids."""
    up = scripted.Upstream(script=echo)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        head = {**scripted.HEAD, "mcp-session-id": sid}
        if token is not None:
            head["authorization"] = token
        for n in range(4):
            rid = f"{n:04d}" + "x" * (length - 4)
            answer = {**scripted.ANSWER, "id": rid}
            assert (await http.post(gw.url, json=answer, headers=head)).status_code == 202
        relayed = gw.gateway._sessions[sid].engine.relayed_answers
        assert len(relayed) == 4 * remembered
    answers = [m for m in up.requests if m[0] == "POST" and "method" not in json.loads(m[2])]
    assert len(answers) == 4  # each answer went up
