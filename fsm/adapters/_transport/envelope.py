"""The JSON-RPC envelope of a large message, read without building its payload.

What the guard decides about a message depends on its envelope: ``jsonrpc``, ``id``,
``method`` and ``params`` (a request's question), and for a response whether it holds
``result`` or ``error`` (:func:`fsm.messages.parse`). A response of 8 MiB is 8 MiB of
``result`` the guard never reads, and decoding it with :func:`json.loads` is the longest
step of passing it on: a single step that holds the event loop every other session
shares.

:func:`decode` reads such a message with msgspec (the ``gateway`` extra) against a
schema whose ``result`` and ``error`` are left raw: the whole text is still checked to
be JSON, but the payload is skipped, not built. A response comes back with its payload
replaced by :data:`ELIDED`, which the guard and the transport only test for presence.
Everything else (a request, a notification, anything msgspec refuses or reads
differently from :mod:`json`, such as a number out of its range) is decoded in full with
:func:`json.loads`, so the decision is always the one a full decode gives. Without
msgspec installed every message is decoded in full.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["ELIDED", "decode"]


class _Elided:
    """Stands for a payload that was checked but not built."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<elided>"


ELIDED: Final = _Elided()
"""The ``result`` or ``error`` of a large response as :func:`decode` returns it."""

_decoder: Any = None
try:
    import msgspec
except ImportError:  # pragma: no cover - the gateway extra installs it
    msgspec = None  # type: ignore[assignment]
else:

    class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
        jsonrpc: Any = msgspec.UNSET
        id: Any = msgspec.UNSET
        method: Any = msgspec.UNSET
        params: msgspec.Raw = msgspec.UNSET  # type: ignore[assignment]
        result: msgspec.Raw = msgspec.UNSET  # type: ignore[assignment]
        error: msgspec.Raw = msgspec.UNSET  # type: ignore[assignment]

    _decoder = msgspec.json.Decoder(_Envelope)


def decode(data: bytes) -> Any:
    """``data`` decoded as :func:`json.loads` would, except that a response's ``result``
    or ``error`` is :data:`ELIDED` (checked to be JSON, not built). Raises ``ValueError``
    (or ``RecursionError``) where :func:`json.loads` does."""
    if _decoder is not None:
        try:
            env = _decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # not an object, or not JSON: the full decode says which
        else:
            unset = msgspec.UNSET
            if env.method is unset and env.params is unset and _plain_id(env.id):
                msg: dict[str, Any] = {}
                if env.jsonrpc is not unset:
                    msg["jsonrpc"] = env.jsonrpc
                if env.id is not unset:
                    msg["id"] = env.id
                if env.result is not unset:
                    msg["result"] = ELIDED
                if env.error is not unset:
                    msg["error"] = ELIDED
                if "result" in msg or "error" in msg:
                    return msg
    return json.loads(data)


def _plain_id(value: object) -> bool:
    """An id that decodes the same with msgspec as with :mod:`json` (absent, null, a
    string or an integer)."""
    return value is msgspec.UNSET or value is None or type(value) in (str, int)
