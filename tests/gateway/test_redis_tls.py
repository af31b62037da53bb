"""The Redis store over TLS (``rediss://``), against a TLS-only ``redis-server`` on
127.0.0.1 whose certificate a throwaway authority issued (:mod:`support.redis_server`,
``tls=True``).

A store trusting that authority (the ``ssl_ca_certs`` keyword of
:meth:`RedisStore.from_url`, or redis-py's own ``?ssl_ca_certs=`` query parameter) claims,
leases and answers; one trusting another authority, or only the system's, fails closed at
:meth:`RedisStore.connect`, as does a plaintext client on the TLS port.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import trustme

from fsm.gateway.redis_store import RedisStore
from fsm.gateway.store import ClaimStatus, Cursor, StoreUnavailableError
from support.redis_server import RedisServer, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def tls_server() -> Iterator[RedisServer]:
    with redis_server(tls=True, password="tls-test-pw") as running:
        yield running


async def _works(store: RedisStore, session: str) -> None:
    await store.connect()
    await store.begin_session(session)
    assert await store.claim(session, 1, stream="get", cursor=Cursor(2, "ev2")) is True
    assert await store.claim(session, 1) is False
    assert await store.claim(session, 2, owner="a", lease_s=30) is True
    assert await store.renew(session, 2, "a", 30) is True
    await store.save_answer(session, 2, {"action": "accept"})
    assert await store.answer_of(session, 2) == {"action": "accept"}
    assert await store.claim_status(session, 2) == ClaimStatus(
        claimed=True, owner="a", lapsed=False, answer={"action": "accept"}
    )
    assert await store.cursor_of(session, "get") == Cursor(2, "ev2")


async def test_the_server_is_tls_only(tls_server: RedisServer) -> None:
    assert tls_server.url.startswith("rediss://:tls-test-pw@127.0.0.1:")
    assert tls_server.ca_file is not None and tls_server.ca_file.is_file()


async def test_a_store_trusting_the_servers_authority_works(tls_server: RedisServer) -> None:
    store = RedisStore.from_url(
        tls_server.url, ssl_ca_certs=str(tls_server.ca_file), namespace="tls-keyword"
    )
    try:
        await _works(store, "s")
        assert "tls-test-pw" not in repr(store)
    finally:
        await store.aclose()


async def test_the_authority_may_come_in_the_url(tls_server: RedisServer) -> None:
    url = f"{tls_server.url}?ssl_ca_certs={tls_server.ca_file}"
    store = RedisStore.from_url(url, namespace="tls-query")
    try:
        await _works(store, "s")
    finally:
        await store.aclose()


@pytest.mark.parametrize("trust", ["another authority", "the system's authorities"])
async def test_a_certificate_that_does_not_verify_fails_closed_at_connect(
    tls_server: RedisServer, tmp_path: Path, trust: str
) -> None:
    ca: str | None = None
    if trust == "another authority":
        ca = str(tmp_path / "other-ca.pem")
        trustme.CA().cert_pem.write_to_path(ca)
    store = RedisStore.from_url(tls_server.url, ssl_ca_certs=ca, timeout_s=5)
    try:
        with anyio.fail_after(30), pytest.raises(StoreUnavailableError) as got:
            await store.connect()
        assert str(got.value) == "redis store: connect failed"  # what clients are told
        assert "CERTIFICATE_VERIFY_FAILED" in str(got.value.__cause__)  # logged, chained
        assert got.value.reason == "store-unavailable"
        with anyio.fail_after(30), pytest.raises(StoreUnavailableError):
            await store.begin_session("s")  # and every operation after it
    finally:
        await store.aclose()


async def test_a_plaintext_client_on_the_tls_port_fails_closed(tls_server: RedisServer) -> None:
    url = tls_server.url.replace("rediss://", "redis://", 1)
    store = RedisStore.from_url(url, timeout_s=0.5)
    try:
        with anyio.fail_after(30), pytest.raises(StoreUnavailableError, match="connect failed"):
            await store.connect()
    finally:
        await store.aclose()
