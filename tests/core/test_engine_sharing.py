"""Engines are shared (:func:`fsm.machines.tables.make_engines`): one compiled table per
declaration in a process, one ``transitions`` engine per declaration and thread, so a
process holding many guards pays for each declaration once."""

from __future__ import annotations

import threading

import pytest

from fsm.machines.resumption import LIVENESS, TRANSPORT
from fsm.machines.tables import make_engines


@pytest.mark.parametrize("name", ["tables", "transitions"])
def test_two_callers_get_the_same_engines(name: str) -> None:
    first = make_engines([TRANSPORT, LIVENESS], name)  # type: ignore[arg-type]
    second = make_engines([TRANSPORT, LIVENESS], name)  # type: ignore[arg-type]
    assert all(first[m] is second[m] for m in first)


def test_a_transitions_engine_is_not_shared_across_threads() -> None:
    here = make_engines([TRANSPORT], "transitions")[TRANSPORT.name]
    there: list[object] = []
    worker = threading.Thread(
        target=lambda: there.append(make_engines([TRANSPORT], "transitions")[TRANSPORT.name])
    )
    worker.start()
    worker.join()
    assert there and there[0] is not here
    tables_here = make_engines([TRANSPORT], "tables")[TRANSPORT.name]
    worker = threading.Thread(
        target=lambda: there.append(make_engines([TRANSPORT], "tables")[TRANSPORT.name])
    )
    worker.start()
    worker.join()
    assert there[1] is tables_here  # immutable: one for the process
