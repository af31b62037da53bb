"""The library's typed errors as the SDK's own error type: what an adapter raises is both.

An application that already catches the SDK's JSON-RPC error (``mcp.MCPError`` on mcp
2.x, ``mcp.shared.exceptions.McpError`` on 1.x) catches a guard's typed error there too,
and one that catches the library's class (``except SessionExpiredError``) still does::

    try:
        result = await session.call_tool("delete_files", {"files": ["a.txt"]})
    except MCPError as err:  # a SessionExpiredError too, or any other typed error
        print(err.error.code, err.error.data["reason"])

An adapter converts what it raises (:meth:`SdkErrorType.wrap`): the raised error is an
instance of a subclass of both the library's class and the SDK's, made once per pair,
with the library's class name, message, ``key``, ``stream``, ``reason`` and
``evidence``. Its ``error`` is the SDK's ``ErrorData``: ``code`` :data:`CODE`
(-32000, the code of the JSON-RPC error an adapter puts on a stream the guard ended, so
the same ending reads the same from either side), ``message`` the error's message, and
``data`` its :meth:`~fsm.errors.InteractionFailed.to_json` (``error``, ``reason``,
``message``, ``key``, ``stream``, ``evidence``). ``error`` is computed from the error's
fields when read.

This module imports no SDK: a binding hands it the SDK line's exception class and its
``ErrorData`` model (:class:`SdkErrorType`). What it relies on, true of both lines:
the SDK's exception keeps its whole state in ``error`` (mcp 2.x derives ``code``,
``message`` and ``data`` from it; 1.x has only ``error``), so the SDK's ``__init__`` is
not run; ``str(err)`` is the library's message on both lines. The adapters convert as
the guard fails an interaction, so :attr:`GuardedConnection.failures
<fsm.adapters.core.GuardedConnection.failures>` holds the very errors raised. Limits:
what a bare ``Guard`` returns in a ``Fail`` stays a plain library error (the core knows
no SDK); ``error`` is read-only (code that assigns it gets ``AttributeError``); a pickled
error unpickles as the same pair of classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsm.adapters._transport.http import ENDED_CODE
from fsm.errors import InteractionFailed

__all__ = ["CODE", "SdkErrorType"]

CODE = ENDED_CODE
"""The JSON-RPC code of every typed error an adapter raises (-32000: an implementation
error of JSON-RPC's server range, the one an adapter's ending error on the wire carries)."""


@dataclass(frozen=True)
class SdkErrorType:
    """One SDK line's JSON-RPC error: its exception class (``exception``) and the model of
    its ``error`` attribute (``error_data``, called with ``code``, ``message``, ``data``
    keywords). Hashable: one made subclass per library class and SDK line."""

    exception: type[Exception]
    error_data: Callable[..., Any]

    def wrap(self, err: InteractionFailed) -> InteractionFailed:
        """``err`` as an instance of the SDK's exception too: a new error of the made
        subclass of ``type(err)`` with ``err``'s message and fields (``err`` itself when
        it already is one). Raise the result ``from`` what caused ``err``, if anything:
        its cause and traceback are not copied."""
        if isinstance(err, self.exception):
            return err
        made = self.subclass(type(err))
        return made(
            str(err), key=err.key, stream=err.stream, reason=err.reason, evidence=err.evidence
        )

    def subclass(self, cls: type[InteractionFailed]) -> type[InteractionFailed]:
        """The subclass of ``cls`` and of the SDK's exception (made on first use, then the
        same class for the same pair)."""
        key = (cls, self)
        made = _MADE.get(key)
        if made is None:
            namespace = {
                "__module__": __name__,
                "__qualname__": cls.__qualname__,
                "__doc__": f"{cls.__doc__ or cls.__name__}\n\nAlso the SDK's "
                f"{self.exception.__name__} (made by fsm.adapters.sdkerrors).",
                "_sdk": self,
                "_library": cls,
            }
            made = _MADE[key] = type(cls.__name__, (cls, _AsSdkError, self.exception), namespace)
        return made


_MADE: dict[tuple[type[InteractionFailed], SdkErrorType], type[InteractionFailed]] = {}


class _AsSdkError:
    """The part of a made subclass that stands between the library's error and the SDK's:
    it ends ``InteractionFailed.__init__``'s chain (the SDK's ``__init__`` takes other
    arguments), keeps ``str()`` the library's message (mcp 2.x's reads ``error``), and
    derives ``error``. Placed after the library's classes in the method order, before
    the SDK's."""

    _sdk: SdkErrorType
    _library: type[InteractionFailed]

    def __init__(self, message: str, *args: Any, **kwargs: Any) -> None:
        Exception.__init__(self, message)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return Exception.__str__(self)  # type: ignore[arg-type]

    @property
    def error(self) -> Any:
        """The SDK's ``ErrorData``: ``code`` :data:`CODE`, this error's message, and its
        ``to_json()`` as ``data`` (``data["reason"]`` is :attr:`reason`)."""
        me: Any = self
        return self._sdk.error_data(code=CODE, message=str(self), data=me.to_json())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._sdk, self._library, str(self), dict(vars(self))))


def _rebuild(
    sdk: SdkErrorType, cls: type[InteractionFailed], message: str, state: dict[str, Any]
) -> InteractionFailed:
    """Unpickle a made error: the same pair of classes, the same message and fields."""
    err = sdk.subclass(cls)(message)
    vars(err).update(state)
    return err
