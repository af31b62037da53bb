"""Which SDK releases an adapter accepts: version ranges, checked once at session start.

An adapter relies on behaviour of the SDK that is not a documented contract (how it reads
response bodies, which statuses it ignores, which callbacks it awaits inline), so it states
the range of releases it was written against and :func:`check_sdk_version` refuses others
unless told not to. The error names the ranges (this adapter's and, for the other SDK line,
the adapter that serves it), so a user on the wrong line learns where to go.

Pure stdlib: importing this module imports no SDK.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

__all__ = ["SdkRange", "check_sdk_version", "release_of"]

_RELEASE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def release_of(version: str) -> tuple[int, int, int] | None:
    """``(major, minor, micro)`` of a final release (``"2.1"`` is ``(2, 1, 0)``); ``None``
    for a pre-release, a dev build or anything unparsable (never inside a range)."""
    m = _RELEASE.fullmatch(version.strip())
    if m is None:
        return None
    major, minor, micro = (int(g) if g is not None else 0 for g in m.groups())
    return (major, minor, micro)


def _dotted(release: tuple[int, ...]) -> str:
    return ".".join(str(n) for n in release)


@dataclass(frozen=True)
class SdkRange:
    """Releases ``low <= v < high`` of ``package``, served by the adapter ``adapter``."""

    package: str
    low: tuple[int, int, int]
    high: tuple[int, int, int]
    adapter: str

    def __contains__(self, version: object) -> bool:
        release = release_of(version) if isinstance(version, str) else None
        return release is not None and self.low <= release < self.high

    def __str__(self) -> str:
        return f"{self.package}>={_dotted(self.low)},<{_dotted(self.high)}"


def check_sdk_version(
    supported: SdkRange,
    *,
    others: Sequence[SdkRange] = (),
    strict: bool = True,
) -> str:
    """The installed version of ``supported.package``.

    Raises ``RuntimeError`` when ``strict`` and it is outside ``supported``; the message
    names the range, the installed version, and the adapter of any range in ``others``
    that contains it. Raises ``RuntimeError`` too when the package is not installed.
    """
    try:
        version = metadata.version(supported.package)
    except metadata.PackageNotFoundError as exc:
        raise RuntimeError(f"{supported.adapter} needs {supported}; it is not installed") from exc
    if strict and version not in supported:
        hint = "".join(f"; for {o} use {o.adapter}" for o in others if version in o)
        raise RuntimeError(
            f"{supported.adapter} supports {supported}, found {supported.package} {version}"
            f"{hint}; pass strict_sdk=False to try anyway"
        )
    return version


MCP2 = SdkRange("mcp", (2, 0, 0), (3, 0, 0), "fsm.adapters.mcp2")
"""The mcp 2.x line (``httpx2``, concurrent dispatch): every release from 2.0.0 on is tested."""

MCP1 = SdkRange("mcp", (1, 24, 0), (2, 0, 0), "fsm.adapters.mcp1")
"""The mcp 1.x maintenance line from 1.24 (the first with ``streamable_http_client``)."""
