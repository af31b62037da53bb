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


Action = Present | Withdraw | Submit | Resume | Wait | Fail | Complete | Ignore | Refuse
