"""DOT to SVG/PNG through pygraphviz (which bundles the Graphviz engine).

pygraphviz is an optional extra: it is imported lazily, inside the functions, so
``import fsm`` and ``import fsm.render`` never need it. Without it, every function
here raises :class:`RenderEngineMissing` with an installation hint.
"""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install 'dead-or-resumable[diagrams]'"


class RenderEngineMissing(RuntimeError):
    """pygraphviz is not importable; the message says how to install it."""

    def __init__(self, reason: str = "") -> None:
        detail = f" ({reason})" if reason else ""
        super().__init__(
            f"rendering SVG needs pygraphviz, which is not installed{detail}: run {INSTALL_HINT}"
        )


def _engine() -> Any:
    try:
        import pygraphviz
    except ImportError as exc:  # also covers a broken native library
        raise RenderEngineMissing(type(exc).__name__) from exc
    return pygraphviz


def require_engine() -> None:
    """Raise :class:`RenderEngineMissing` now if rendering would fail for lack of it."""
    _engine()


def _draw(dot: str, fmt: str) -> bytes:
    graph = _engine().AGraph(string=dot)
    data = graph.draw(format=fmt, prog="dot")
    if not isinstance(data, bytes):
        raise RuntimeError(f"graphviz returned no {fmt} output")
    return data


def render_svg(dot: str) -> str:
    """The SVG document for ``dot``, laid out by Graphviz ``dot``."""
    return _draw(dot, "svg").decode("utf-8")


def render_png(dot: str) -> bytes:
    """PNG bytes for ``dot`` (for looking at a diagram; not committed)."""
    return _draw(dot, "png")
