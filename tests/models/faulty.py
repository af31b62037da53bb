"""The frame of a client that breaks one property on purpose, which the eras' tests use to
prove a world's restated properties can fail: each says only how it reacts."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar


class _Ending(Protocol):
    @property
    def ended(self) -> bool: ...


S = TypeVar("S", bound=_Ending)


class FaultyClient(Generic[S]):
    """A client policy named after its ``fault``, starting in ``start``: once its state
    has ``ended`` it does nothing more; until then :meth:`react` answers each input."""

    start: S

    def __init__(self, fault: str) -> None:
        self.fault = self.name = fault

    def init(self) -> S:
        return self.start

    def step(self, c: S, t: float, inp: Any) -> tuple[S, tuple[Any, ...]]:
        if c.ended:
            return c, ()
        return self.react(c, t, inp)

    def react(self, c: S, t: float, inp: Any) -> tuple[S, tuple[Any, ...]]:
        """The state after ``inp`` and the outputs, while the call has not ended."""
        raise NotImplementedError
