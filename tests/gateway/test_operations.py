"""The gateway in operation, in-process: its health and readiness endpoints (any
``Host``, no session touched; readiness follows the store and the drain), what its
metrics count (presentations, blanked replays, failures by reason, rewritten cursors,
store operations, sessions and streams), and what a drain does to an open stream.

Faults are explicit: Redis stopped and started again (support.redis_server), an upstream
that replays the same events on every resume, a client resuming with an old event id."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.gateway.app import HEALTH_PATH, READY_PATH, Gateway  # noqa: E402
from fsm.gateway.redis_store import RedisStore  # noqa: E402
from support.redis_server import RedisServer  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def sample(gateway: Gateway, name: str, labels: Mapping[str, str] | None = None) -> float:
    value = gateway.metrics.registry.get_sample_value(name, dict(labels or {}))
    return 0.0 if value is None else value


def total(gateway: Gateway, name: str) -> float:
    """A counter's value summed over its labels."""
    return sum(
        s.value
        for metric in gateway.metrics.registry.collect()
        for s in metric.samples
        if s.name == name
    )


def origin(url: str) -> str:
    return url.rsplit("/", 1)[0]


# --------------------------------------------------------------------------- probes


async def test_health_and_readiness_answer_any_host_and_touch_no_session() -> None:
    """``/-/healthz`` and ``/-/readyz`` answer ``200`` whatever the ``Host`` (a load
    balancer's probe names the replica's own address, outside the host policy), without a
    session: nothing reaches the upstream, nothing is held."""
    up = scripted.Upstream()
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        for path in (HEALTH_PATH, READY_PATH):
            r = await http.get(origin(gw.url) + path, headers={"host": "10.1.2.3:8100"})
            assert (r.status_code, r.json()) == (200, {"status": "ok"}), path
            assert r.headers["cache-control"] == "no-store"
        mcp = await http.get(gw.url, headers={"host": "10.1.2.3:8100"})
        assert mcp.status_code == 421  # the MCP endpoint keeps the host policy
        assert up.requests == [] and gw.gateway.sessions == 0


def test_an_upstream_path_under_the_gateways_own_is_refused() -> None:
    with pytest.raises(ValueError, match="must not begin with /-/"):
        Gateway("http://127.0.0.1:9/-/healthz")


async def test_readiness_follows_the_store_and_the_drain(server: RedisServer) -> None:
    """Readiness is ``503`` while Redis does not answer and again ``200`` once it does;
    ``503`` once the gateway drains, while health stays ``200`` (the process is alive)."""
    store = RedisStore.from_url(server.url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    up = scripted.Upstream()
    async with (
        scripted.gateway_for(up, store=store) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        ready, health = origin(gw.url) + READY_PATH, origin(gw.url) + HEALTH_PATH
        assert (await http.get(ready)).status_code == 200
        await anyio.to_thread.run_sync(server.stop)
        try:
            r = await http.get(ready)
            assert (r.status_code, r.json()) == (503, {"status": "store unavailable"})
            assert (await http.get(health)).status_code == 200
        finally:
            await anyio.to_thread.run_sync(server.start)
        assert (await http.get(ready)).status_code == 200
        assert await gw.gateway.drain(0) == 0
        r = await http.get(ready)
        assert (r.status_code, r.json()) == (503, {"status": "draining"})
        assert (await http.get(health)).status_code == 200
        assert sample(gw.gateway, "fsm_gateway_draining") == 1
        assert sample(gw.gateway, "fsm_gateway_store_errors_total", {"op": "ping"}) == 1
        assert up.requests == []


# --------------------------------------------------------------------------- metrics


async def test_metrics_count_presentations_blanks_and_failures() -> None:
    """The upstream cuts every connection and replays the same events on every resume:
    the request is presented once (one claim won, one store round trip for it), its
    replays are blanked, and the call ends with ``resume-budget-spent``: each counted.
    The session is held, no stream is open after the call."""
    same: list[scripted.Piece] = [
        scripted.sse("e1", scripted.PROGRESS),
        scripted.sse("e2", scripted.elicit(1)),
    ]
    up = scripted.Upstream(call=same, replay=lambda cursor: same, complete=False)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        r = await http.post(
            gw.url, json=scripted.CALL, headers={**scripted.HEAD, "mcp-session-id": scripted.SID}
        )
        events = scripted.parse(r.content)
        g = gw.gateway
        resumes = sum(1 for method, _, _ in up.requests if method == "GET")
        assert sample(g, "fsm_gateway_presentations_total") == 1
        assert total(g, "fsm_gateway_blanked_total") == resumes >= 1
        reason = {"reason": "resume-budget-spent"}
        assert sample(g, "fsm_gateway_failures_total", reason) == 1
        assert total(g, "fsm_gateway_failures_total") == 1
        claims = {"op": "claim"}
        assert sample(g, "fsm_gateway_store_round_trip_seconds_count", claims) == 1
        begun = {"op": "begin_session"}
        assert sample(g, "fsm_gateway_store_round_trip_seconds_count", begun) == 1
        assert sample(g, "fsm_gateway_sessions") == 1
        assert await g.drain(scripted.GUARD) == 0  # returns once the call's request ended here
        assert sample(g, "fsm_gateway_streams") == 0
        assert sample(g, "fsm_gateway_requests_in_flight") == 0
    ended = [json.loads(d) for _, d in events if d and "error" in json.loads(d)]
    assert [e["error"]["data"]["reason"] for e in ended] == ["resume-budget-spent"]


async def test_a_resume_from_an_old_event_counts_a_rewritten_cursor() -> None:
    """A client resumes its open call stream with the id of its first event although the
    gateway passed on a newer one: the stream is resumed upstream from the newer one
    (the cursor rewritten, counted); a live stream counts in ``streams`` meanwhile."""
    hold = anyio.Event()
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), scripted.sse("e2", scripted.PROGRESS)],
        hold=hold,
        replay=lambda cursor: [scripted.sse("e3", scripted.result(7))],
    )
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as old:
            seen: list[tuple[str | None, str]] = []
            pieces = old.aiter_raw()
            with anyio.fail_after(scripted.GUARD):
                while len(seen) < 2:
                    seen += scripted.parse(await pieces.__anext__())
            assert sample(gw.gateway, "fsm_gateway_streams") == 1
            first = seen[0][0]
            assert first is not None
            resume = {**h, "last-event-id": first}
            r = await http.get(gw.url, headers=resume)
        hold.set()
        assert [json.loads(d) for _, d in scripted.parse(r.content) if d] == [scripted.result(7)]
        [(_, get, _)] = [req for req in up.requests if req[0] == "GET"]
        assert get["last-event-id"] == "e2"
        assert sample(gw.gateway, "fsm_gateway_cursor_rewrites_total") == 1


async def test_a_call_open_when_its_client_deletes_the_session_ends_as_closed() -> None:
    """The client deletes its session (the upstream answers the DELETE ``202``) while a
    call of it is open, and the upstream then cuts that call's stream: the call ends
    with the guard's ``session-closed`` error (not a generic end), counted as no
    failure, and nothing is resumed."""
    hold = anyio.Event()
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS)], hold=hold, replay=lambda c: [], complete=False
    )
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as call:
            pieces = call.aiter_raw()
            seen: list[tuple[str | None, str]] = []
            with anyio.fail_after(scripted.GUARD):
                while not seen:
                    seen += scripted.parse(await pieces.__anext__())
            assert (await http.delete(gw.url, headers=h)).status_code == 202
            hold.set()  # the upstream ends the session's streams abruptly
            with anyio.fail_after(scripted.GUARD):
                rest = b"".join([piece async for piece in pieces])
        [ending] = [json.loads(d) for _, d in scripted.parse(rest) if d]
        assert ending["id"] == scripted.CALL["id"]
        assert ending["error"]["data"]["reason"] == "session-closed"
        assert total(gw.gateway, "fsm_gateway_failures_total") == 0
        assert not [r for r in up.requests if r[0] == "GET"]


# --------------------------------------------------------------------------- drain


async def test_a_drain_waits_for_its_bound_then_ends_a_stream_after_its_last_event() -> None:
    """A call's stream that outlasts the drain's bound is ended there, after its last
    whole event: its client reads the events so far and a clean end (it then resumes,
    elsewhere, from that event). A request arriving once the bound passed gets ``503``
    before it reaches the upstream. The drain says it ended one request."""
    hold = anyio.Event()  # never set: the upstream holds the call open
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.PROGRESS)], hold=hold)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        got: list[tuple[str | None, str]] = []
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=h) as stream:
            pieces = stream.aiter_raw()
            with anyio.fail_after(scripted.GUARD):
                got += scripted.parse(await pieces.__anext__())
                ended = await gw.gateway.drain(0.05)
                got += scripted.parse(b"".join([piece async for piece in pieces]))  # a clean end
        assert ended == 1
        assert [json.loads(d) for _, d in got] == [scripted.PROGRESS]
        assert sample(gw.gateway, "fsm_gateway_streams") == 0
        before = len(up.requests)
        late = await http.post(gw.url, json=scripted.CALL, headers=h)
        assert late.status_code == 503 and late.json()["error"]["code"] == -32000
        assert len(up.requests) == before


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
async def test_a_drain_bound_that_never_ends_is_refused_and_changes_nothing(
    seconds: float,
) -> None:
    g = Gateway("http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match=r"^drain: .* is not a finite number of seconds >= 0$"):
        await g.drain(seconds)
    assert not g.draining
