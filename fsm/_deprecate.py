"""Deprecation warnings for names that moved, modelled on trio's ``trio._deprecate``.

:func:`warn_deprecated` says what is deprecated, since which release, and what to use
instead, pointing the warning at the caller's line. :func:`moved_module` is the whole body
of a module that moved: an old path keeps working for one minor release, each name read
from it warning once per place that reads it (Python's default filter) and coming from
the new module.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["moved_module", "warn_deprecated"]


def _stringify(thing: object) -> str:
    if isinstance(thing, str):
        return thing
    name = getattr(thing, "__qualname__", None) or getattr(thing, "__name__", None)
    module = getattr(thing, "__module__", None)
    if name and module:
        return f"{module}.{name}"
    return str(thing)


def warn_deprecated(
    thing: object, version: str, *, instead: object | None, stacklevel: int = 2
) -> None:
    """Warn (:class:`DeprecationWarning`) that ``thing`` is deprecated since ``version``;
    ``instead`` says what to use (``None``: nothing replaces it). ``stacklevel`` as
    :func:`warnings.warn` counts it from the caller of this function: 2, the default,
    blames whoever called that caller."""
    message = f"{_stringify(thing)} is deprecated since dead-or-resumable {version}"
    if instead is None:
        message += " with no replacement"
    else:
        message += f"; use {_stringify(instead)} instead"
    warnings.warn(DeprecationWarning(message), stacklevel=stacklevel + 1)


def moved_module(old: str, new: str, version: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for module ``old``, which moved to ``new`` in ``version``:
    each name read from ``old`` warns, blaming the line that reads it, and is ``new``'s.

    Use it as the old module's whole body: ``__getattr__ = moved_module(__name__, ...)``.
    A name ``new`` does not have raises :class:`AttributeError` without a warning, as do
    dunder names but ``__all__`` (read without a warning: ``import *`` warns per name).
    """

    def __getattr__(name: str) -> Any:
        # other dunders (__path__, __wrapped__, ...) are the old module's own business
        forwarded = not name.startswith("__") or name == "__all__"
        value = getattr(importlib.import_module(new), name, _MISSING) if forwarded else _MISSING
        if value is _MISSING:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        if name != "__all__":  # `import *` reads it, then warns for each name it imports
            warn_deprecated(f"{old}.{name}", version, instead=f"{new}.{name}")
        return value

    return __getattr__


_MISSING = object()
