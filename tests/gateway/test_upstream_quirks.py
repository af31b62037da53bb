"""What the gateway passes on as it came, and leaves untracked: a response field whose
value is not ASCII, and a request whose id the guard cannot track.

| input | what the gateway does | test |
|---|---|---|
| an upstream response field whose value is not ASCII (``x-note: café``), on an event stream or an ``initialize`` answer | passed on with its bytes as they came, the call's result with it | ``test_a_field_that_is_not_ascii_passes_as_it_came`` |
| a request whose id is neither a string nor an integer (``1.0``, ``true``, an object, an array) | forwarded untracked: the client gets the upstream's response as it came, one outcome, no error of the gateway's | ``test_a_request_id_the_guard_cannot_track_goes_untracked`` |

Real loopback HTTP (the scripted upstream); every wait is on a response.
"""  # noqa: E501 (a Markdown table's rows are one line each)

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NOTE = (b"x-note", "café".encode())


async def test_a_field_that_is_not_ascii_passes_as_it_came() -> None:
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.result(7))], response_headers=[NOTE])
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=30) as http:
        init = await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r:
            body = b"".join([c async for c in r.aiter_raw()])
            got = (r.status_code, NOTE in r.headers.raw)
    assert (init.status_code, NOTE in init.headers.raw) == (200, True)
    assert got == (200, True)
    assert [json.loads(data) for _, data in scripted.parse(body) if data] == [scripted.result(7)]


@pytest.mark.parametrize("rid", [1.0, True, {"a": 1}, [1, 2]], ids=repr)
async def test_a_request_id_the_guard_cannot_track_goes_untracked(rid: Any) -> None:
    def echo(message: dict[str, Any], _headers: dict[str, str]) -> list[bytes]:
        return [
            scripted.sse("e1", scripted.PROGRESS),
            scripted.sse("e2", scripted.result(message["id"])),
        ]

    up = scripted.Upstream(script=echo)
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=30) as http:
        await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        call = {**scripted.CALL, "id": rid}
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=call, headers=headers) as r:
            body = b"".join([c async for c in r.aiter_raw()])
            status = r.status_code
    messages = [json.loads(data) for _, data in scripted.parse(body) if data]
    assert (status, messages[-1:], sum("error" in m for m in messages)) == (
        200,
        [scripted.result(rid)],
        0,
    )
