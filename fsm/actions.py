"""What the guard tells the client to do: one frozen dataclass per kind of action.

An empty tuple of actions means "nothing special: process the event as usual" (the
hot path for progress and log notifications).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsm.errors import CapacityError, InteractionFailed, RequestKey
from fsm.events import StreamId


@dataclass(frozen=True, slots=True)
class Present:
    """Hand the request to the user or handler. Once per key for interactive methods."""

    key: RequestKey
    method: str
    params: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Reshown(Present):
    """Present ``key`` again after a restart: it was shown (or about to be) when the
    client's process ended, and never answered. At most once per key, ever (the store
    records the re-show before it is made); show it marked as asked again after a restart."""


@dataclass(frozen=True, slots=True)
class Persist:
    """Write ``delta`` to the durable store, and have it on disk, before taking any later
    action of the same tuple: it comes first, so a question is recorded before it is
    shown and an answer before it is submitted (write-ahead). ``delta`` is the era's
    record of what changed (:class:`fsm.sse.guard.SseDelta` for the SSE guard). Emitted
    only by a guard configured ``durable``; never for a progress event. See
    docs/durability.md."""

    delta: object


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Take down the prompt of ``key``: the request died while it was showing."""

    key: RequestKey
    reason: str


@dataclass(frozen=True, slots=True)
class Submit:
    """POST ``answer`` as the JSON-RPC result for ``key`` after ``delay_s`` seconds.

    ``answer`` is always the one the user gave for this key; ``attempt`` counts from 1.
    """

    key: RequestKey
    answer: Mapping[str, Any]
    attempt: int
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Resume:
    """GET the stream again with ``Last-Event-ID: cursor`` (the newest id seen)."""

    stream: StreamId
    cursor: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Back off ``delay_s`` seconds, then feed ``TimerFired(stream)``."""

    stream: StreamId
    delay_s: float


@dataclass(frozen=True, slots=True)
class Fail:
    """The interaction ended without completing; raise ``error`` to its caller. Once."""

    interaction: str
    error: InteractionFailed


@dataclass(frozen=True, slots=True)
class Complete:
    """The interaction ended normally (its origin's response arrived). Once."""

    interaction: str


@dataclass(frozen=True, slots=True)
class Ignore:
    """Drop this event or input; ``reason`` is a stable identifier, ``detail`` prose."""

    reason: str
    detail: str = ""
    key: RequestKey | None = None
    stream: StreamId | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not present ``key``: answer the server with a JSON-RPC error instead."""

    key: RequestKey
    error: CapacityError


Action = Persist | Present | Withdraw | Submit | Resume | Wait | Fail | Complete | Ignore | Refuse
