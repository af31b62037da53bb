"""Parse one SSE event's data into a JSON-RPC message the guard can reason about.

Parsing never raises: anything that is not a well-formed JSON-RPC 2.0 message comes
back as :class:`Malformed` with a reason, and the guard answers it with an ``Ignore``
action (a documented decision, never a crash or a silent drop). Ids must be ``int``
or ``str`` (``bool`` and ``float`` are rejected: ``True == 1`` in Python); ``1`` and
``"1"`` stay distinct.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsm.errors import RequestId

MAX_MESSAGE_BYTES = 1 << 20
"""Payloads larger than this (1 MiB, the mcp SDK's SSE event limit) are rejected."""


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """A server-to-client request (``elicitation/create``, ``ping``, ...)."""

    id: RequestId
    method: str
    params: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification; ``cancelled_id`` is set for a well-formed ``notifications/cancelled``."""

    method: str
    params: Mapping[str, Any] | None
    cancelled_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A response (result or error) to a client request."""

    id: RequestId | None
    is_error: bool


@dataclass(frozen=True, slots=True)
class Malformed:
    """Not a JSON-RPC 2.0 message; ``reason`` says why."""

    reason: str


Message = ServerRequest | Notification | Response | Malformed

CANCELLED = "notifications/cancelled"


_NO_PARAMS: Mapping[str, Any] = {}


def is_plain_notification(msg: object) -> bool:
    """Whether a decoded message is a notification that needs no decision: ``jsonrpc``
    "2.0", no ``id``, a non-empty string ``method`` other than a cancellation, ``params``
    absent or an object (progress, logging). The guard takes such a message by its event
    id alone (:meth:`fsm.sse.guard.Guard.on_plain_notification`)."""
    if not (type(msg) is dict or isinstance(msg, Mapping)):
        return False
    if "id" in msg or msg.get("jsonrpc") != "2.0":
        return False
    method = msg.get("method")
    params = msg.get("params", _NO_PARAMS)
    return (
        type(method) is str
        and method != ""
        and method != CANCELLED
        and (type(params) is dict or isinstance(params, Mapping))
    )


def valid_id(value: object) -> bool:
    """Whether ``value`` is a JSON-RPC id this library accepts (``int`` or ``str``)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def parse(data: str | bytes | Mapping[str, Any] | None) -> Message:
    """Classify ``data`` (raw SSE data or an already-decoded object). Never raises."""
    if data is None or data == "" or data == b"":
        return Malformed("empty data")
    if isinstance(data, str | bytes):
        if len(data) > MAX_MESSAGE_BYTES:
            return Malformed(f"payload over {MAX_MESSAGE_BYTES} bytes")
        try:
            obj: object = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            return Malformed(f"not JSON: {exc}")
        except RecursionError:  # e.g. 10,000 nested brackets: hostile, never a crash
            return Malformed("not JSON: nested too deeply")
    else:
        obj = data
    if not isinstance(obj, Mapping):
        return Malformed("not a JSON object (batches are not part of 2025-06-18 and later)")
    return _classify(obj)


def _classify(obj: Mapping[str, Any]) -> Message:
    if obj.get("jsonrpc") != "2.0":
        return Malformed("missing jsonrpc: '2.0'")
    params = obj.get("params")
    if params is not None and not isinstance(params, Mapping):
        return Malformed("params is not an object")
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str) or not method:
            return Malformed("method is not a non-empty string")
        if "id" not in obj:
            cancelled = params.get("requestId") if params is not None else None
            if method == CANCELLED:
                if not valid_id(cancelled):
                    return Malformed("notifications/cancelled without a valid requestId")
                return Notification(method, params, cancelled)
            return Notification(method, params)
        rid = obj["id"]
        if not valid_id(rid):
            return Malformed(f"request id {rid!r} is not an int or a string")
        return ServerRequest(rid, method, params)
    if "result" in obj or "error" in obj:
        rid = obj.get("id")
        if rid is not None and not valid_id(rid):
            return Malformed(f"response id {rid!r} is not an int, a string or null")
        return Response(rid, "error" in obj)
    return Malformed("neither a request, a notification nor a response")


def params_digest(params: Mapping[str, Any] | None) -> int:
    """A fingerprint of ``params`` without ``_meta``: canonical JSON (sorted keys), hashed.

    Stable across processes (snapshots restore anywhere). ``_meta`` is left out because a
    server may add a marker (a liveness assertion, a progress token) to a copy of the
    same request. The guard uses it to notice a request id reused with other parameters;
    the MRTR rules use it, with the method, as the identity of a question.
    """
    body = {k: v for k, v in params.items() if k != "_meta"} if params is not None else None
    text = json.dumps(body, sort_keys=True, default=repr).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")
