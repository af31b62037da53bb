"""What a task run means to the property monitor: ``tasks/*`` traffic read as
:mod:`fsm.properties` observations (``docs/tasks.md``, "P1-P7 and L1 for tasks").

The one reading of a task run, shared by the checker's tasks world
(:mod:`fsm.worlds.tasks`), the tasks conformance kit (:mod:`fsm.testing.tasks_kit`) and
the event logs the audit judges (:mod:`fsm.audit`), so all three judge the same run the
same way:

* a key is a request key ``(task, key)``; the interaction is the task;
* a ``tasks/get`` result is a delivery of each key it lists, naming the first key of its
  question the user answered, if any (P2 counts an answered question's prompts across
  keys, P4 takes a re-ask's answer from its question), and, while the task is live, a
  cancellation of each key the previous result listed that it no longer lists, unless
  that key's question was taken (its answer consumed);
* -32602 on ``tasks/update`` is a terminal rejection of the answers it carried; on
  ``tasks/get`` the death of every key the previous result listed;
* a ``tasks/update`` is a submission of each answer it carries and a resume of the task.

Keys and questions are opaque here (hashable): the world passes integers, the kit the
server's strings. Pure functions: the caller keeps what they read (the keys asked so far,
the previous listing, the questions taken).
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal

from fsm import properties as P
from fsm.errors import RequestKey

Listing = Sequence[tuple[RequestKey, Hashable]]
"""``((request key, question), ...)``: keys and the question each asks, in order."""

LIVE = frozenset({"working", "input_required"})
"""The statuses of a task that has not ended."""


def answered_head(asked: Listing, question: Hashable, monitor: P.MonitorState) -> RequestKey | None:
    """The first key of ``question`` the user answered (whose answer a re-ask of it
    takes), or None: a question not answered yet is no re-ask, whatever key asked it."""
    return next((k for k, q in asked if q == question and k in monitor.answers), None)


def polled(
    monitor: P.MonitorState,
    task: str,
    t: float,
    status: str,
    listed: Listing,
    asked: Listing,
    seen: Iterable[RequestKey],
    taken: Container[Hashable],
) -> list[P.Observation]:
    """A ``tasks/get`` result with ``status`` listing ``listed`` at time ``t``: a delivery
    of each listed key, then (task live) a cancellation of each key of the previous
    result (``seen``) no longer listed whose question is not in ``taken``. ``asked``:
    every key issued so far with its question, oldest first (it must hold ``seen``)."""
    out: list[P.Observation] = []
    for k, q in listed:
        head = answered_head(asked, q, monitor)
        out.append(
            P.Delivered(
                k,
                task,
                t,
                replayed=k in monitor.presented,
                question=head if head is not None and head != k else None,
            )
        )
    if status in LIVE:
        now = {k for k, _ in listed}
        question = dict(asked)
        out += [P.Cancelled(k) for k in seen if k not in now and question[k] not in taken]
    return out


def gone(
    request: Literal["get", "update"], carried: Iterable[RequestKey], seen: Iterable[RequestKey]
) -> list[P.Observation]:
    """-32602 (the task expired or was purged) on ``request``: on ``update``, a terminal
    rejection of the answers it ``carried``; on ``get``, the death of every key the
    previous result listed (``seen``)."""
    if request == "update":
        return [P.Rejected(k) for k in carried]
    return [P.Cancelled(k) for k in seen]


def updated(
    task: str, answers: Iterable[tuple[RequestKey, Mapping[str, Any]]]
) -> list[P.Observation]:
    """A ``tasks/update`` carrying ``answers``: a submission of each, and a resume."""
    out: list[P.Observation] = [P.Submitted(k, dict(a)) for k, a in answers]
    out.append(P.Resumed(task, "update"))
    return out
