"""The HTTP side of the guarded transport: reading a response (what it says of the
session's credentials among it), the responses it makes locally, the names of streams,
the JSON-RPC error that ends a failed interaction.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import anyio

from fsm.adapters._transport.sse import SseFrame, SseParser
from fsm.errors import (
    InteractionFailed,
)
from fsm.messages import valid_id
from fsm.outcomes import SubmissionResult

logger = logging.getLogger(__name__)


class HttpLib(Protocol):
    """The HTTP library module an SDK line speaks (``httpx2`` for mcp 2.x, ``httpx`` for
    1.x): one API, distinct types, so the transport's classes are bound to each
    (:func:`~fsm.adapters._transport.transport.bind`). These are the names it uses."""

    @property
    def __name__(self) -> str: ...
    @property
    def AsyncClient(self) -> type[Any]: ...
    @property
    def AsyncBaseTransport(self) -> type[Any]: ...
    @property
    def AsyncByteStream(self) -> type[Any]: ...
    @property
    def Request(self) -> Callable[..., HttpRequest]: ...
    @property
    def Response(self) -> Callable[..., HttpResponse]: ...
    @property
    def Timeout(self) -> type[Any]: ...
    @property
    def HTTPError(self) -> type[Exception]: ...
    @property
    def TransportError(self) -> type[Exception]: ...


class HttpHeaders(Protocol):
    """The headers of a request or response, as both HTTP libraries give them
    (case-insensitive lookup)."""

    @overload
    def get(self, key: str, /) -> str | None: ...
    @overload
    def get(self, key: str, default: str) -> str: ...
    def __getitem__(self, key: str) -> str: ...
    def keys(self) -> Iterable[str]: ...
    def __contains__(self, key: object) -> bool: ...
    def multi_items(self) -> Iterable[tuple[str, str]]: ...
    @property
    def raw(self) -> list[tuple[bytes, bytes]]: ...


class HttpRequest(Protocol):
    """What the transport core reads of an outgoing request of either HTTP library."""

    @property
    def method(self) -> str: ...
    @property
    def headers(self) -> HttpHeaders: ...
    @property
    def content(self) -> bytes: ...
    @property
    def url(self) -> Any: ...
    @property
    def extensions(self) -> dict[str, Any]: ...


class HttpResponse(Protocol):
    """What the transport core reads of a response of either HTTP library."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> HttpHeaders: ...
    @property
    def extensions(self) -> Mapping[str, Any]: ...
    @property
    def stream(self) -> Any: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    def aiter_raw(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


if TYPE_CHECKING:  # the protocols describe the HTTP library the type checker sees
    import httpx2

    def _conforms(req: httpx2.Request, resp: httpx2.Response) -> tuple[HttpRequest, HttpResponse]:
        return req, resp


_T = TypeVar("_T")

LOCAL_HEADER = "x-fsm-guard"
STRIP_HEADERS = ("content-length", "content-encoding", "transfer-encoding")


async def aclose_response(resp: HttpResponse) -> None:
    await resp.aclose()


def origin_of(stream: str) -> Any:
    if not stream.startswith("post:"):
        return None
    raw = stream[5:]
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def stream_name(origin: Any) -> str:
    return f"post:{json.dumps(origin)}"


MAX_TRACKED_ID = 256
"""The longest JSON text (characters) of a request id whose call is tracked
(:func:`tracked_id`); also the longest stream name a gateway's event ids carry whole
(:data:`fsm.gateway.ids.WHOLE_NAME_MAX`)."""


def tracked_id(origin: object) -> bool:
    """Whether a call whose request id is ``origin`` is tracked: an id the guard takes
    (:func:`~fsm.messages.valid_id`, an integer or a string) whose JSON text is at most
    :data:`MAX_TRACKED_ID` characters. Any other call is forwarded untracked, as it came:
    everything the guard remembers of an ended call is named by its id (its stream,
    ``post:<id>``, in tables bounded by count, not size), so a session's memory would
    grow with its ids' length. An SDK's client numbers its requests (0, 1, ...)."""
    if isinstance(origin, str) and len(origin) > MAX_TRACKED_ID:
        return False  # its JSON text is longer still: not encoded to find out
    return valid_id(origin) and len(json.dumps(origin)) <= MAX_TRACKED_ID


RESULT_BODY_LIMIT = 64 * 1024
"""Bytes of a response body read to classify an answer POST or a failed resume GET."""

RESULT_TEXT_LIMIT = 1024
"""Characters of a body that is not a JSON object kept as text for the outcome tables."""

RESULT_READ_S = 10.0
"""Seconds a body read to classify an answer POST or a failed resume GET may take in all:
a body that comes slower than that (a byte at a time, each within the read timeout) is
taken as far as it came, so it cannot hold the guard's decision, and its patience and
budgets, for hours."""


async def http_result(resp: HttpResponse) -> SubmissionResult:
    """What the outcome tables (:mod:`fsm.outcomes`) read of a response that opened no
    event stream: its status, the JSON object its body holds (``None`` if the body is
    empty, not JSON, not an object, or longer than 64 KiB: only that much is read),
    ``Retry-After`` in seconds, and, for a body that is not a JSON object, its first
    :data:`RESULT_TEXT_LIMIT` characters as text (a server that refuses in plain text).
    Closes ``resp``; a body that breaks off while read (any exception of the HTTP
    library, whichever it is), or is not whole after :data:`RESULT_READ_S`, is taken as
    far as it came."""
    data = bytearray()
    try:
        with anyio.move_on_after(RESULT_READ_S):
            async for chunk in resp.aiter_bytes():
                data += chunk
                if len(data) > RESULT_BODY_LIMIT:
                    break
    except Exception as exc:
        logger.debug("response body broke off: %r", exc)
    finally:
        await resp.aclose()
    parsed: Mapping[str, Any] | None = None
    if data and len(data) <= RESULT_BODY_LIMIT:
        with contextlib.suppress(ValueError, RecursionError):
            value = json.loads(bytes(data))
            parsed = value if isinstance(value, Mapping) else None
    text = None
    if data and parsed is None:
        head = bytes(data[: RESULT_TEXT_LIMIT * 4]).decode("utf-8", errors="replace")
        text = head[:RESULT_TEXT_LIMIT].strip() or None
    return SubmissionResult(resp.status_code, parsed, None, retry_after(resp), text)


def retry_after(resp: HttpResponse) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def opens_stream(resp: HttpResponse) -> bool:
    """Whether ``resp`` is an open event stream (``200``, ``text/event-stream``)."""
    ctype = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
    return resp.status_code == 200 and ctype == "text/event-stream"


_DECODED: dict[str, frozenset[str]] = {}


def decoded_codings(hx: HttpLib) -> frozenset[str]:
    """The content codings (lower case, ``identity`` among them) a response of ``hx``
    decodes as it is read. The library reads a body in any other coding as if it had
    none, silently. It names the set nowhere public, and the set depends on what is
    installed (``br`` only with a brotli module, ``zstd`` only with a zstd one); its
    clients ask for exactly those codings in their default ``Accept-Encoding``, read here
    from a client that never connects (the library's base transport, nothing taken from
    the environment). Made once per library."""
    known = _DECODED.get(hx.__name__)
    if known is None:
        client = hx.AsyncClient(transport=hx.AsyncBaseTransport(), trust_env=False)
        named = client.headers.get("accept-encoding", "")
        codings = {coding.strip().lower() for coding in named.split(",")} - {""}
        known = _DECODED[hx.__name__] = frozenset(codings | {"identity"})
    return known


def undecoded(hx: HttpLib, resp: HttpResponse) -> bool:
    """Whether ``resp``'s ``Content-Encoding`` names a coding ``hx`` does not decode
    (:func:`decoded_codings`): its body, as the library reads it, is still in that
    coding. Such a body is never parsed (as events or JSON) here: it goes on as it
    came, its bytes still encoded and the field that names their coding kept
    (:func:`wrap_response`), for its reader to decode as it would the upstream's own."""
    decoded = decoded_codings(hx)
    return any(
        coding.strip().lower() not in decoded
        for name, value in resp.headers.multi_items()
        if name.lower() == "content-encoding"
        for coding in value.split(",")
        if coding.strip()
    )


def decodable_accept(hx: HttpLib, value: str) -> str:
    """``value``, a client's ``Accept-Encoding``, less the codings ``hx`` does not decode
    (:func:`decoded_codings`; ``*`` among them, which lets the upstream pick any): what
    the upstream is asked for, so that every body it sends can be read here (an event
    stream tracked) while the client still gets only codings it asked for. ``identity``
    if none is left (what an empty field means, said plainly: no field at all would let
    the upstream pick any coding)."""
    decoded = decoded_codings(hx)
    kept = [
        element.strip()
        for element in value.split(",")
        if element.partition(";")[0].strip().lower() in decoded
    ]
    return ", ".join(kept) or "identity"


def answer_result(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The result an answer ``body`` (a JSON-RPC response: an ``id``, no ``method``)
    gives the request it answers, as the guard reads it: its ``result``, a JSON object,
    if the body holds no ``error`` member at all; else ``None``. A body holding both is
    read two ways (the mcp SDK's server takes the error, a refusal; a reader that looks
    for ``result`` first takes the result): the guard takes neither reading, records
    nothing of it and lets the upstream, which decides, read the body as it came."""
    result = body.get("result")
    if "error" in body or not isinstance(result, Mapping):
        return None
    return result


def says_accepted(request: HttpRequest, resp: HttpResponse) -> bool:
    """Whether ``resp`` says the upstream took the input of ``request``: ``202`` to a
    ``POST``, the transport's answer to responses and notifications it accepts (input it
    cannot accept gets an HTTP error; a ``200`` may carry a JSON-RPC error). It says
    nothing of the credentials ``request`` carries: a server whose check is in its
    protocol layer answers a notification ``202`` before the check. Only a JSON-RPC
    result proves those (:func:`holds_result`)."""
    return request.method == "POST" and resp.status_code == 202


PROOF_BYTES = 64 * 1024
"""Bytes of a response read, at the most, for the JSON-RPC result of :func:`holds_result`."""


async def holds_result(resp: HttpResponse, rid: str | int, limit: int = PROOF_BYTES) -> bool:
    """Whether ``resp``, a 2xx, carries the JSON-RPC result of request ``rid`` (a
    response with that id, of the same type, and a ``result``) in its first ``limit``
    bytes: a JSON body (an object, or a batch holding it) or an event stream (the one
    SSE parser reads it; the events before the response are skipped). ``False`` for a
    JSON-RPC error, another body, a longer one, or one that breaks off first. Leaves
    ``resp`` open (the caller closes it)."""
    if resp.status_code >= 300:
        return False
    if opens_stream(resp):
        parser, read = SseParser(limit), 0
        try:
            async for chunk in resp.aiter_bytes():
                read += len(chunk)
                if read > limit:
                    return False
                if _has_result(parser.feed(chunk), rid):
                    return True
            return _has_result(parser.finish(), rid)  # a last event ended by a bare CR
        except Exception as exc:  # EventTooLarge, or whatever ends a body abruptly
            logger.debug("a body read for a result broke off: %r", exc)
        return False
    data = bytearray()
    try:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > limit:
                return False
    except Exception as exc:
        logger.debug("a body read for a result broke off: %r", exc)
        return False
    value = _loads(bytes(data))
    batch = value if isinstance(value, list) else [value]
    return any(_is_result(item, rid) for item in batch)


def _loads(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _has_result(frames: Iterable[SseFrame], rid: str | int) -> bool:
    """Whether one of ``frames`` carries the JSON-RPC result of request ``rid``."""
    return any(f.has_data and f.utf8 and _is_result(_loads(f.data), rid) for f in frames)


def _is_result(message: Any, rid: str | int) -> bool:
    if not isinstance(message, dict) or "method" in message or "error" in message:
        return False
    got = message.get("id")
    return type(got) is type(rid) and got == rid and "result" in message


def json_sendable(value: Any) -> bool:
    """Whether ``value`` can go in a request body as JSON (RFC 8259) in UTF-8: no NaN or
    infinity, no string holding a lone surrogate, nothing ``json`` cannot write."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return True


def json_body(request: HttpRequest) -> Any:
    """``request``'s body as JSON (``None``: none, or not JSON), parsed once per request
    (kept in its extensions: a request's body does not change while it is handled)."""
    known = request.extensions.get(_PARSED, _UNPARSED)
    if known is not _UNPARSED:
        return known
    try:
        value = json.loads(request.content) if request.content else None
    except (ValueError, RecursionError):
        value = None
    request.extensions[_PARSED] = value
    return value


_PARSED = "fsm.json_body"
_UNPARSED = object()


def local_response(
    hx: HttpLib,
    request: HttpRequest,
    status: int,
    body: bytes = b"",
    ctype: str = "application/json",
) -> HttpResponse:
    """A response made here (``x-fsm-guard: 1``), an ``hx.Response``."""
    return hx.Response(
        status,
        headers={"content-type": ctype, LOCAL_HEADER: "1"},
        content=body,
        request=request,
    )


SESSION_GONE_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
).encode()

ENDED_CODE = -32000
"""The JSON-RPC error code of the response that ends an interaction the guard failed."""


def refusal(request: HttpRequest, message: str, reason: str) -> bytes:
    """The JSON-RPC error (code :data:`ENDED_CODE`, ``data.reason`` ``reason``) for a
    request refused here, before it was sent."""
    body = json_body(request)
    rid = body.get("id") if isinstance(body, dict) else None
    error = {"code": ENDED_CODE, "message": message, "data": {"reason": reason}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()


def too_many_streams(request: HttpRequest) -> bytes:
    """The JSON-RPC error for a request whose stream would pass the session's cap."""
    message = "too many open streams in this session; close one and retry"
    return refusal(request, message, "too-many-streams")


def ending_error(origin: Any, err: InteractionFailed | None) -> dict[str, Any]:
    """The JSON-RPC error response for request ``origin`` whose interaction the guard ended
    with ``err``: code :data:`ENDED_CODE`, ``message`` "<reason>: <error>", ``data`` the
    error's :meth:`~fsm.errors.InteractionFailed.to_json` (``reason``, ``key``,
    ``stream``, ``evidence``)."""
    if err is None:
        error: dict[str, Any] = {
            "code": ENDED_CODE,
            "message": "interaction ended by the guard",
            "data": {"reason": "ended"},
        }
    else:
        error = {"code": ENDED_CODE, "message": f"{err.reason}: {err}", "data": err.to_json()}
    return {"jsonrpc": "2.0", "id": origin, "error": error}


def post_failed(hx: HttpLib, request: HttpRequest, body: Any, why: str) -> HttpResponse:
    """A POST that got no usable response, answered locally so the SDK's writer survives.

    A request gets a JSON-RPC error for its id saying ``why`` (its caller sees the SDK's
    error type; the server may or may not have received it); a notification or answer
    gets 202.
    """
    if isinstance(body, dict) and "method" in body and "id" in body:
        payload = {
            "jsonrpc": "2.0",
            "id": body["id"],
            "error": {
                "code": -32000,
                "message": why,
            },
        }
        return local_response(hx, request, 200, json.dumps(payload).encode())
    return local_response(hx, request, 202)


def body_method(request: HttpRequest) -> str | None:
    """The JSON-RPC method of a POST body (``None`` if none)."""
    body = json_body(request)
    if isinstance(body, dict) and isinstance(body.get("method"), str):
        return str(body["method"])
    return None


_STRIPPED = frozenset(name.encode() for name in STRIP_HEADERS)
_CODED = _STRIPPED - {b"content-encoding"}


def wrap_response(
    hx: HttpLib, resp: HttpResponse, request: HttpRequest, stream: Any
) -> HttpResponse:
    """``resp`` with the body ``stream``: its fields as their bytes came (a value that is
    not ASCII passes as it came, never decoded and encoded again), the framing ones
    (:data:`STRIP_HEADERS`) left out. A :class:`Passthrough` of a body in a coding
    ``hx`` does not decode (:func:`undecoded`) passes its bytes as they came, and keeps
    the ``Content-Encoding`` that names their coding (the library would pass them on
    decoded by none of it, and the field dropped, label them plain)."""
    raw = isinstance(stream, Passthrough) and undecoded(hx, resp)
    if raw:
        stream.raw = True
    dropped = _CODED if raw else _STRIPPED
    headers = [(k, v) for k, v in resp.headers.raw if k.lower() not in dropped]
    return hx.Response(
        resp.status_code,
        headers=headers,
        stream=stream,
        request=request,
        extensions=dict(resp.extensions),
    )


class Passthrough:
    """A forwarded body, unchanged (bound to the HTTP library by :func:`bind`): as the
    library decodes it, or, if :attr:`raw`, its bytes as they came."""

    def __init__(self, resp: HttpResponse) -> None:
        self.resp = resp
        self.raw = False
        """The body is passed on still encoded (set by :func:`wrap_response`)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self.resp.aiter_raw() if self.raw else self.resp.aiter_bytes()
        async for chunk in chunks:
            yield chunk

    async def aclose(self) -> None:
        await self.resp.aclose()
