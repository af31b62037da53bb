"""The gateway's upstream connections: an ``httpx2`` transport on an ``aiohttp`` connector.

The guarded-transport core speaks ``httpx2`` (it is the SDK's HTTP library), so the
gateway keeps ``httpx2``'s request and response types and swaps only what moves the
bytes. ``httpx2``'s own transport (``httpcore2`` on ``h11`` and ``anyio`` streams) parses
every upstream response in Python; ``aiohttp``'s parser and connection pool are C
(``llhttp``) and dict lookups. In a run by hand, streaming server-sent events through
this transport cost a client process a third of the CPU of ``httpx2``'s default
transport; a replica on it took 0.77x the CPU of one on ``httpx2``'s pools, side by side
(docs/gateway.md).

Contract: :class:`AiohttpTransport` is an ``httpx2.AsyncBaseTransport``. It sends a
request's method, URL and headers as given (nothing added but ``Host`` when missing and
the body's ``Content-Length``: no ``User-Agent``, ``Accept``, ``Accept-Encoding`` or
``Content-Type`` of its own), never follows a redirect, keeps no cookie, reads no proxy
from the environment, and does not decode the body (``httpx2`` decodes it for
``aiter_bytes``). Failures are raised as ``httpx2``'s exceptions (:func:`_translated`),
while sending and while the body is read; their text, ``repr`` and traceback never hold
the request's URL (its query string may carry a client's key). A body closed before its
end closes its connection (the upstream sees the client go); a body read to its end
returns the connection to the pool.

Limits: it runs on an ``asyncio`` loop only (uvloop included), HTTP/1.1 only; of a
request's ``timeout`` extension, ``connect`` bounds opening a connection, ``pool`` the
wait for one (both together: aiohttp's ``connect`` is the two; past it, ``ConnectTimeout``),
``read`` the wait for each piece of the response (``ReadTimeout``); ``write`` is not applied
(aiohttp has no write timeout). A response with a header line (or status line) longer
than :data:`MAX_FIELD` bytes, or with more than :data:`MAX_HEADERS` header lines, fails
the request (``RemoteProtocolError``); ``h11`` bounded the whole head at 16 KiB instead.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import lru_cache

import aiohttp
import httpx2
import yarl

__all__ = ["MAX_FIELD", "MAX_HEADERS", "AiohttpTransport"]

MAX_FIELD = 16 * 1024
"""Bytes of one response header line (or the status line) accepted."""

MAX_HEADERS = 128
"""Header lines of one response accepted."""

_NOT_SENT = (b"content-length", b"transfer-encoding")
"""Request headers left to aiohttp, which frames the body itself."""

_NO_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
"""Headers aiohttp would add of its own; a request sends them only if it has them."""

_NO_TIMEOUT = aiohttp.ClientTimeout(total=None)
"""aiohttp's default bounds a whole request (5 minutes): a stream may run for hours."""


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport whose connections are an ``aiohttp`` connector's (see the
    module docstring). ``connections`` caps connections open at once (``None``: no cap);
    an idle connection is kept ``idle_s`` seconds for reuse; ``tls`` verifies HTTPS
    upstreams (default: ``httpx2``'s context). Make it on the loop that will use it."""

    def __init__(
        self,
        *,
        connections: int | None = None,
        idle_s: float = 1.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if connections is not None and connections < 1:
            raise ValueError("connections must be None or >= 1")
        connector = aiohttp.TCPConnector(
            limit=connections or 0,
            keepalive_timeout=idle_s,
            ssl=tls if tls is not None else httpx2.create_ssl_context(),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=_NO_AUTO_HEADERS,
            auto_decompress=False,
            trust_env=False,
            timeout=_NO_TIMEOUT,
            max_line_size=MAX_FIELD,
            max_field_size=MAX_FIELD,
            max_headers=MAX_HEADERS,
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            body = request.content
        except httpx2.RequestNotRead:
            body = await request.aread()
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() not in _NOT_SENT
        ]
        with _translated(request):
            resp = await self._session.request(
                request.method,
                _url(str(request.url)),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=_timeout(request.extensions.get("timeout")),
            )
        return httpx2.Response(
            resp.status,
            headers=resp.raw_headers,
            stream=_Body(resp, request),
            extensions={
                "http_version": b"HTTP/%d.%d" % (resp.version or (1, 1)),
                "reason_phrase": (resp.reason or "").encode("latin-1", "replace"),
            },
        )

    async def aclose(self) -> None:
        await self._session.close()


class _Body(httpx2.AsyncByteStream):
    """A response body as it arrives; closing it before its end closes the connection."""

    def __init__(self, resp: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._resp, self._request = resp, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._resp.content
        with _translated(self._request):
            while True:
                try:
                    piece = await content.readany()
                except aiohttp.ClientPayloadError:
                    rest = _unread(content)
                    if rest:  # what came before the cut, then the cut
                        yield rest
                    raise
                if not piece:
                    return
                yield piece

    async def aclose(self) -> None:
        if self._resp.content.at_eof():
            self._resp.release()
        else:
            self._resp.close()


def _unread(content: aiohttp.StreamReader) -> bytes:
    """The bytes ``content`` received and no read took yet. A body cut off (the upstream
    closed mid-body) makes aiohttp's reads raise before they hand over what it buffered,
    which is what the upstream sent before the cut: an event followed by a crash would be
    lost with it (a relay passes it on; the guard takes its id as the cursor to resume
    from). The buffer is aiohttp's own (``StreamReader._buffer``); without one, nothing."""
    buffered = getattr(content, "_buffer", None)
    return b"".join(bytes(chunk) for chunk in buffered) if buffered else b""


@contextlib.contextmanager
def _translated(request: httpx2.Request) -> Iterator[None]:
    """aiohttp's failures as the ``httpx2`` exceptions the core handles. Their text is
    :func:`_told`'s, never the request's URL, and aiohttp's exception is not chained to
    them: a log line or a traceback of one would otherwise carry the URL's query string,
    which may hold a client's credential (``?key=...``)."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError:  # past ``connect`` + ``pool``
        raise httpx2.ConnectTimeout("connect timeout", request=request) from None
    except (TimeoutError, aiohttp.SocketTimeoutError):
        raise httpx2.ReadTimeout("read timeout", request=request) from None
    except aiohttp.ClientConnectorError as exc:  # refused, DNS, TLS handshake
        raise httpx2.ConnectError(_told(exc), request=request) from None
    except (
        aiohttp.ServerDisconnectedError,
        aiohttp.ClientPayloadError,
        aiohttp.ClientResponseError,
    ) as exc:  # closed early, broken framing, a malformed response
        raise httpx2.RemoteProtocolError(_told(exc), request=request) from None
    except (aiohttp.ClientOSError, aiohttp.ClientConnectionError) as exc:
        raise httpx2.ReadError(_told(exc), request=request) from None
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
        raise httpx2.UnsupportedProtocol(_told(exc), request=request) from None
    except aiohttp.ClientError as exc:  # any other failure of the connection
        raise httpx2.NetworkError(_told(exc), request=request) from None


_TOLD_WHOLE = (
    aiohttp.ClientOSError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientPayloadError,
)
"""aiohttp's failures whose text describes the connection or the response, never the
request: an OS error (a connector's names the upstream's host and port, no path or
query), a disconnect, a broken body."""


def _told(exc: BaseException) -> str:
    """What an ``httpx2`` exception made of aiohttp's ``exc`` says: its type, and the
    text of a failure of :data:`_TOLD_WHOLE` or a malformed response's status and parser
    message (what the upstream sent wrong). Nothing else of aiohttp's text: a
    ``ClientResponseError``'s, a connect timeout's, an invalid URL's hold the request's
    URL, query string included."""
    kind = type(exc).__name__
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"{kind}: {exc.status}, {exc.message}"
    text = str(exc) if isinstance(exc, _TOLD_WHOLE) else ""
    return f"{kind}: {text}" if text else kind


@lru_cache(maxsize=256)
def _url(url: str) -> yarl.URL:
    """``url`` as aiohttp takes it, unchanged (already encoded by ``httpx2``)."""
    return yarl.URL(url, encoded=True)


def _timeout(given: Mapping[str, float | None] | None) -> aiohttp.ClientTimeout:
    """A request's ``httpx2`` timeouts in aiohttp's terms (see the module docstring)."""
    if not given:
        return _NO_TIMEOUT
    return _timeouts(given.get("connect"), given.get("pool"), given.get("read"))


@lru_cache(maxsize=64)
def _timeouts(
    connect: float | None, pool: float | None, read: float | None
) -> aiohttp.ClientTimeout:
    waits = [t for t in (connect, pool) if t is not None]
    return aiohttp.ClientTimeout(
        total=None,
        connect=sum(waits) if waits else None,
        sock_connect=connect,
        sock_read=read,
    )
