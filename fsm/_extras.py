"""Optional parts say which extra to install when a module they need is missing."""

from __future__ import annotations

import importlib.util

__all__ = ["missing_extra", "require"]


def missing_extra(extra: str, feature: str, exc: ModuleNotFoundError) -> ModuleNotFoundError:
    """The error to raise instead of ``exc`` (an import of ``feature`` that failed): it
    names the missing module and the extra that installs it, with the command.

    Use it around the imports of an optional part::

        try:
            import httpx2
        except ModuleNotFoundError as exc:
            raise missing_extra("gateway", "fsm.gateway.app", exc) from exc
    """
    if not exc.name or exc.name.partition(".")[0] == "fsm":  # not a missing extra: a bug
        return ModuleNotFoundError(str(exc), name=exc.name)
    return ModuleNotFoundError(
        f"{feature} needs {exc.name}: pip install 'dead-or-resumable[{extra}]'",
        name=exc.name,
    )


def require(extra: str, feature: str, *modules: str) -> None:
    """Raise :func:`missing_extra`'s error for the first of ``modules`` (top-level names)
    that is not installed: for a part that checks before it imports anything."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise missing_extra(
                extra, feature, ModuleNotFoundError(f"No module named {module!r}", name=module)
            )
