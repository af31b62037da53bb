"""Where a model went wrong: the file and line in the model's own code.

An exception raised while a model is loaded or explored passes through the checker, the
library's worlds and the standard library before it reaches the reader; the line that
matters is the model author's. :func:`raised_at` finds it:

* an exception that names its own place, as :class:`SyntaxError` does (``filename`` a
  string and ``lineno`` an integer, both set), is taken at its word: a world that catches
  a policy's bad return names the policy's line this way;
* otherwise the innermost frame of its traceback that is the model's code: not in the
  library (the ``fsm`` package, except the shipped models in ``fsm/models``), not in the
  standard library or an installed package, not generated (``<string>``).

No frame of the model's code (an error inside the library with no model code on the way)
gives None. Files are shown relative to the working directory when they are inside it.

What the model's code raises is the model's failure, whatever its class: ``SystemExit``
(an ``exit()`` in a hook) and pytest's outcomes (``pytest.importorskip`` in a model file)
are ``BaseException`` but not ``Exception``, and are reported as a model error all the
same. Only what stops the run itself passes through (:func:`interrupts`): the loader and
the checker ask it, in one place, where they catch what the model raised.
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path as FilePath

_LIBRARY = FilePath(__file__).resolve().parents[1]
"""The ``fsm`` package: the checker's parent."""
_SHIPPED_MODELS = _LIBRARY / "models"
"""The shipped models, when installed as ``fsm.models``: model code, not the library's."""
_EXTERNAL = tuple(
    dict.fromkeys(
        str(FilePath(p).resolve())
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(key))
    )
)
"""The standard library and the installed packages."""


@dataclass(frozen=True)
class Location:
    """A line of a model's code: ``file`` (as the traceback or the exception names it),
    ``line`` (1-based), the ``function`` it is in and the ``source`` text of the line
    (stripped), each None when unknown."""

    file: str
    line: int
    function: str | None = None
    source: str | None = None

    def __str__(self) -> str:
        """``FILE:LINE``, the file relative to the working directory when inside it."""
        return f"{shown(self.file)}:{self.line}"

    def format_text(self) -> str:
        """``at FILE:LINE, in FUNCTION: SOURCE`` (the parts that are known)."""
        where = f"at {self}"
        if self.function:
            where += f", in {self.function}"
        return f"{where}: {self.source}" if self.source else where


def shown(file: str) -> str:
    """``file`` relative to the working directory when it is inside it, else as given."""
    try:
        path = FilePath(file).resolve()
        return str(path.relative_to(FilePath.cwd()))
    except (OSError, ValueError):
        return file


def is_model_code(file: str) -> bool:
    """Whether ``file`` is a model's code: a real file outside the library (but the shipped
    models are model code), the standard library and installed packages."""
    if not file or file.startswith("<"):
        return False
    path = FilePath(file).resolve()
    if path.is_relative_to(_SHIPPED_MODELS):
        return True
    if path.is_relative_to(_LIBRARY):
        return False
    text = str(path)
    return not any(text == root or text.startswith(root + os.sep) for root in _EXTERNAL)


def located(file: str, line: int, function: str | None = None) -> Location:
    """A :class:`Location` with the source text of ``file``'s line ``line`` read in."""
    source = linecache.getline(file, line).strip() or None
    return Location(file, line, function, source)


def raised_at(exc: BaseException) -> Location | None:
    """Where in a model's code ``exc`` was raised (see the module docstring), or None."""
    filename, lineno = getattr(exc, "filename", None), getattr(exc, "lineno", None)
    if isinstance(filename, str) and filename and type(lineno) is int and lineno > 0:
        function = getattr(exc, "function", None)
        return located(filename, lineno, function if isinstance(function, str) else None)
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if frame.lineno is not None and is_model_code(frame.filename):
            return located(frame.filename, frame.lineno, frame.name)
    return None


def interrupts(exc: BaseException) -> bool:
    """Whether ``exc``, caught while a model's code ran, stops the run rather than reports
    the model's failure: :class:`KeyboardInterrupt` (the user's Ctrl-C),
    :class:`GeneratorExit` (a generator being closed) and :mod:`asyncio`'s
    ``CancelledError`` (a task being cancelled) propagate; anything else the model raised,
    ``SystemExit`` and pytest's ``Skipped`` included, is a model error."""
    if isinstance(exc, KeyboardInterrupt | GeneratorExit):
        return True
    asyncio = sys.modules.get("asyncio")  # not imported: nothing was cancelled
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


def what_raised(exc: BaseException) -> str:
    """``KIND: MESSAGE`` for ``exc`` (``SystemExit: 3``), ``KIND`` alone when it says
    nothing (a bare ``sys.exit()``)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
