"""The library's policy against servers that replay everything, on every resume.

A resumed SSE connection may replay from wherever the server chooses. Here the server
replays from the start of its buffer whatever ``Last-Event-ID`` the client sent, the
network may cut the stream any number of times (``cuts=None``), and the guard remembers
exactly only the newest event id of a stream (``max_seen_event_ids=1``): every replayed
event has left that window. What keeps P7 (the cursor never moves back) and L1 (the
client stops resuming) is the rest of the stream's history, kept as fingerprints
(:mod:`fsm.sse.history`):

* ``guarded-replay[...]``: the shipped history, against deadlines silent or cancelling,
  answers to unknown requests accepted or rejected, the user answering or not. P1-P7 and
  L1 hold.
* ``guarded-replay[history-full]``: a history that keeps no fingerprint, so it is full
  once the stream's second event arrives; the next loss ends the stream
  (``history-full``). All hold.
* ``guarded-replay[rewinds]``: the server also sends its buffer again from the start on a
  live connection (a broken server: ids are unique within a session). The guard checks a
  live connection's ids against its window only, so it takes those repeats as new; at
  the loss it looks the cursor up in the fingerprints, and here, with the window holding
  nothing but a repeat, ends the stream (``cursor-unknown``) instead of naming an old id.
  All hold.
* ``unverified-cursor``: the same guard and server, but the loss resumes from the last
  id recorded, unchecked. It must fail P7 (the resume names a repeated, older id).
* ``window-only``: the guard as it was before the history, whose seen window simply
  forgot its oldest ids, with no cap on resumes: a replayed id that left the window
  counts as new. It must fail P7 (the next resume names an older cursor) and L1 (every
  replay looks like progress, so the budget of resumes without progress never runs out).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from fsm import GuardConfig
from fsm.sse.history import EventHistory
from fsm.worlds.sse import Bounds, Deadline, Outcome, UserMode, World

from .guarded import CONFIG, GuardPolicy

LEGEND = (
    "guarded-replay[deadline,answer,user]: as in guarded.py, against a server that "
    "replays its whole buffer on every resume; history-full, rewinds, unverified-cursor, "
    "window-only: the cases the module docstring lists"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

REPLAY_CONFIG = replace(CONFIG, max_seen_event_ids=1)
"""The shipped policy's knobs with a window of one exact id: every replay leaves it."""


class WindowOnlyHistory(EventHistory):
    """The retention of the guard before fingerprints: the window forgets its oldest id
    and nothing else remembers it (never full, no fingerprints)."""

    __slots__ = ()

    def record_live(self, event_id: str) -> bool:
        if event_id in self._seen:
            return False
        self._seen.add(event_id)
        self.recent.append(event_id)
        if len(self.recent) > self.window:
            self._seen.discard(self.recent.pop(0))
        return True

    def record(self, event_id: str) -> bool:
        return self.record_live(event_id)


class UnverifiedHistory(EventHistory):
    """The shipped history, but whose :meth:`newest` trusts the last id recorded: what a
    resume would name if a live stretch's repeats were never looked up."""

    __slots__ = ()

    def newest(self) -> str | None:
        return self.recent[-1] if self.recent else None


WINDOW_ONLY_CONFIG = replace(
    REPLAY_CONFIG, event_history=WindowOnlyHistory, max_resumes_per_stream=None
)
"""The window-only guard: no fingerprints, no absolute cap on resumes."""


def _bounds(deadline: Deadline, unknown: Outcome, user: UserMode, rewinds: int = 0) -> Bounds:
    return Bounds(
        requests=1,
        cuts=None,
        post_faults=1,
        deadline=deadline,
        unknown_answer=unknown,
        user=user,
        replay="start",
        rewinds=rewinds,
    )


def _world(config: GuardConfig, bounds: Bounds, name: str, expect: tuple[str, ...] = ()) -> Any:
    return World(GuardPolicy(config), bounds, name=name, expect=expect)


def variants() -> list[World[Any]]:
    """The shipped history against every replay-everything variant, and its limits."""
    deadlines: tuple[Deadline, ...] = ("silent", "cancel")
    unknowns: tuple[Outcome, ...] = ("202", "rpc")
    users: tuple[UserMode, ...] = ("answers", "never")
    policy = GuardPolicy(REPLAY_CONFIG)  # one memo of guard steps for the sweep
    worlds: list[World[Any]] = [
        World(policy, _bounds(d, u, user), name=f"guarded-replay[{d},{u},{user}]")
        for d, u, user in itertools.product(deadlines, unknowns, users)
    ]
    tiny = replace(REPLAY_CONFIG, max_event_history=0)
    worlds.append(_world(tiny, _bounds("silent", "rpc", "answers"), "guarded-replay[history-full]"))
    rewinding = _bounds("silent", "rpc", "answers", rewinds=1)
    worlds.append(_world(REPLAY_CONFIG, rewinding, "guarded-replay[rewinds]"))
    unverified = replace(REPLAY_CONFIG, event_history=UnverifiedHistory)
    worlds.append(_world(unverified, rewinding, "unverified-cursor", ("P7",)))
    worlds.append(
        _world(WINDOW_ONLY_CONFIG, _bounds("silent", "rpc", "answers"), "window-only", ("P7", "L1"))
    )
    return worlds


MODELS = variants()
