"""How a guarded session's surface is compared with the installed SDK's (either line).

:func:`unclassified` finds the SDK session's public coroutine methods a guarded session
neither offers nor excludes (:data:`fsm.adapters.core.NOT_RACED`): what a new SDK release
added. :func:`signature_mismatches` compares a guarded method's signature with the
SDK's, :func:`parameters_not_taken` a ``guarded_session`` with the SDK functions it
passes keywords on to. Each returns what is wrong (empty: nothing), so a test can also
show that the check fails on a changed SDK.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fsm.adapters.core import NOT_RACED, NOT_TAKEN, RACED_METHODS

__all__ = [
    "coroutine_methods",
    "offered",
    "parameters_not_taken",
    "signature_mismatches",
    "unclassified",
]


def coroutine_methods(cls: type) -> set[str]:
    """The public coroutine methods of ``cls``, inherited ones included, also when a
    decorator (``@deprecated``) hides that they are coroutine functions."""
    names = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, staticmethod | classmethod):
            attr = attr.__func__
        if callable(attr) and inspect.iscoroutinefunction(inspect.unwrap(attr)):
            names.add(name)
    return names


def offered(guarded: type) -> set[str]:
    """The request methods ``guarded`` offers (its coroutine methods named in
    ``RACED_METHODS``)."""
    return coroutine_methods(guarded) & set(RACED_METHODS)


def unclassified(sdk: type, guarded: type) -> set[str]:
    """The public coroutine methods of the SDK's session class ``sdk`` that ``guarded``
    does not offer and ``NOT_RACED`` does not list."""
    return coroutine_methods(sdk) - offered(guarded) - set(NOT_RACED)


def _params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def signature_mismatches(sdk_fn: Callable[..., Any], guarded_fn: Callable[..., Any]) -> list[str]:
    """How ``guarded_fn``'s signature fails to mirror ``sdk_fn``'s: every SDK parameter
    must be there with the same kind and default, the positional ones in the same order;
    a parameter the SDK lacks (a newer release's) must be keyword-only with default
    ``None`` or ``False`` (left out when not used)."""
    sdk = {p.name: p for p in _params(sdk_fn)}
    ours = {p.name: p for p in _params(guarded_fn)}
    wrong = []
    for name, p in sdk.items():
        q = ours.get(name)
        if q is None:
            wrong.append(f"{name}: missing")
        elif (q.kind, q.default) != (p.kind, p.default):
            wrong.append(
                f"{name}: {q.kind.name}={q.default!r}, the SDK's {p.kind.name}={p.default!r}"
            )
    for name, q in ours.items():
        if name not in sdk and not (
            q.kind is inspect.Parameter.KEYWORD_ONLY and q.default in (None, False)
        ):
            wrong.append(f"{name}: not the SDK's, and not a keyword defaulting to None/False")
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    order_sdk = [n for n, p in sdk.items() if p.kind in positional]
    order_ours = [n for n, q in ours.items() if q.kind in positional]
    if order_sdk != order_ours:
        wrong.append(f"positional order {order_ours}, the SDK's {order_sdk}")
    return wrong


def parameters_not_taken(
    guarded_session: Callable[..., Any], *sdk_fns: Callable[..., Any]
) -> list[str]:
    """The parameters of ``sdk_fns`` (``ClientSession.__init__``,
    ``streamable_http_client``) that ``guarded_session`` does not take as a keyword with
    the SDK's default, unless ``NOT_TAKEN`` says why."""
    ours = {p.name: p for p in _params(guarded_session)}
    wrong = []
    for fn in sdk_fns:
        for p in _params(fn):
            if p.name in NOT_TAKEN:
                continue
            q = ours.get(p.name)
            if q is None:
                wrong.append(f"{fn.__qualname__}: {p.name} not taken")
            elif q.kind is not inspect.Parameter.KEYWORD_ONLY or q.default != p.default:
                wrong.append(f"{fn.__qualname__}: {p.name} taken as {q.kind.name}={q.default!r}")
    return wrong
