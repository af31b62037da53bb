"""Log records captured while a block runs, for tests that check what was logged (a
secret nowhere in a line, no traceback escaping the code under test), whatever the
logging configuration of the process: :func:`captured` puts a handler of its own on a
logger, a :class:`Records`."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Iterator

__all__ = ["Records", "captured"]


class Records(logging.Handler):
    """A handler that keeps every record it is given (``records``), in order."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def at_info_or_above(self) -> list[str]:
        """Each record at ``INFO`` or above as a handler formats it: logger, message and
        the traceback of its exception, if it has one."""
        out = []
        for r in self.records:
            if r.levelno >= logging.INFO:
                trace = logging.Formatter().formatException(r.exc_info) if r.exc_info else ""
                out.append(f"{r.name}: {r.getMessage()}\n{trace}")
        return out

    def tracebacks(self, through: str) -> list[str]:
        """The tracebacks of the logged exceptions that passed through the source file
        ``through`` (a path's tail, ``"fsm/gateway/app.py"``)."""
        out = []
        for record in self.records:
            if record.exc_info and record.exc_info[1] is not None:
                text = "".join(traceback.format_exception(*record.exc_info))
                if through in text:
                    out.append(text)
        return out


@contextlib.contextmanager
def captured(name: str, level: int | None = None) -> Iterator[Records]:
    """Every record the logger ``name`` (and its children) handles while the block runs;
    ``level``: the logger's level meanwhile (default: as it is)."""
    handler = Records()
    logger = logging.getLogger(name)
    old = logger.level
    if level is not None:
        logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
