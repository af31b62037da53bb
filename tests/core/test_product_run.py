"""``ProductRun``: the one runtime that fires a product's transitions and applies its rows,
shown on a product of its own (a job and its watchers), on both engines."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fsm.errors import InteractionFailed
from fsm.machines.product import Cause, ProductRun
from fsm.machines.spec import (
    Broadcast,
    Coupling,
    MachineSpec,
    ProductSpec,
    Scope,
    SpecError,
    Transition,
)
from fsm.machines.tables import InvalidTransition


def _rows(table: str) -> tuple[Transition, ...]:
    """Transitions from lines of ``trigger source dest``."""
    return tuple(Transition(*line.split()) for line in table.strip().splitlines())


JOB = MachineSpec(
    name="job",
    states=("idle", "busy", "done", "failed"),
    initial="idle",
    terminal=frozenset({"done", "failed"}),
    transitions=_rows(
        """
        start  idle  busy
        finish busy  done
        crash  busy  failed
        stop   idle  done
        stop   busy  done
        """
    ),
)
WATCH = MachineSpec(
    name="watch",
    states=("watching", "seen", "orphaned"),
    initial="watching",
    terminal=frozenset({"seen", "orphaned"}),
    transitions=_rows("see watching seen\norphan watching orphaned"),
)


def _product(
    fires: tuple[tuple[str, str], ...] = (("job", "stop"), ("watch", "see")),
) -> ProductSpec:
    return ProductSpec(
        name="jobs",
        machines=(JOB, WATCH),
        broadcasts=(Broadcast("shutdown", "session", fires),),
        couplings=(
            Coupling(
                "failed_job_orphans_watchers",
                "job",
                frozenset({"failed"}),
                "watch",
                frozenset({"watching"}),
                "orphan",
            ),
        ),
    )


class Inst:
    """An instance: a machine name, a state and a cause, as the runtime requires."""

    def __init__(self, machine: MachineSpec, name: str) -> None:
        self.machine, self.name = machine.name, name
        self.state = machine.initial
        self.cause: Cause | None = None


class Owner:
    """A decider's side of the contract: who a row reaches, what an end means."""

    def __init__(self, engine: str) -> None:
        self.jobs = [Inst(JOB, "j1"), Inst(JOB, "j2")]
        self.watchers = [Inst(WATCH, "w1"), Inst(WATCH, "w2")]
        self.fired: list[tuple[str, str, str, str]] = []
        self.ended: list[tuple[str, str, str, str]] = []
        self.run = ProductRun[Inst](
            _product(),
            engine,  # type: ignore[arg-type]
            members=self.members,
            on_terminal=self.on_terminal,
            on_fire=lambda *t: self.fired.append(t),
        )

    def members(self, machine: str, scope: Scope, anchor: Inst | None) -> Sequence[Inst]:
        return list(self.jobs if machine == "job" else self.watchers)

    def on_terminal(self, inst: Inst, old: str, trigger: str) -> None:
        self.ended.append((inst.name, old, trigger, inst.state))

    def states(self) -> list[str]:
        return [i.state for i in (*self.jobs, *self.watchers)]


BOOM = Cause(InteractionFailed, "j1 crashed", None, ("exit 1",))


def test_fire_takes_the_declared_row_and_reports_it(engine: str) -> None:
    owner = Owner(engine)
    assert owner.run.fire(owner.jobs[0], "start") == "busy"
    assert owner.states() == ["busy", "idle", "watching", "watching"]
    assert owner.fired == [("job", "idle", "start", "busy")]
    assert owner.ended == []


def test_a_coupling_applies_on_settle_and_hands_on_the_cause(engine: str) -> None:
    owner = Owner(engine)
    j1 = owner.jobs[0]
    owner.run.fire(j1, "start")
    j1.cause = BOOM
    owner.run.fire(j1, "crash")
    assert owner.ended == [("j1", "busy", "crash", "failed")]  # told at once
    assert owner.states() == ["failed", "idle", "watching", "watching"]  # rows wait for settle
    owner.run.settle()
    assert owner.states() == ["failed", "idle", "orphaned", "orphaned"]
    assert [w.cause for w in owner.watchers] == [BOOM, BOOM]
    assert owner.ended[1:] == [
        ("w1", "watching", "orphan", "orphaned"),
        ("w2", "watching", "orphan", "orphaned"),
    ]


def test_kill_is_cause_fire_settle(engine: str) -> None:
    owner = Owner(engine)
    owner.run.fire(owner.jobs[1], "start")
    owner.run.kill(owner.jobs[1], "crash", BOOM)
    assert owner.states() == ["idle", "failed", "orphaned", "orphaned"]
    assert owner.watchers[0].cause is BOOM


def test_a_broadcast_fires_every_member_not_yet_terminal(engine: str) -> None:
    owner = Owner(engine)
    owner.run.fire(owner.watchers[0], "see")
    owner.fired.clear()

    def why(inst: Inst) -> Cause:
        return Cause(InteractionFailed, f"{inst.name} shut down", None, ())

    owner.run.broadcast("shutdown", None, why)
    assert owner.states() == ["done", "done", "seen", "seen"]
    assert owner.fired == [  # in row order, then member order; w1 was already terminal
        ("job", "idle", "stop", "done"),
        ("job", "idle", "stop", "done"),
        ("watch", "watching", "see", "seen"),
    ]
    assert owner.watchers[0].cause is None
    assert owner.watchers[1].cause == Cause(InteractionFailed, "w2 shut down", None, ())


def test_a_row_the_machine_has_not_in_this_state_raises_and_changes_nothing(engine: str) -> None:
    owner = Owner(engine)
    with pytest.raises(InvalidTransition):
        owner.run.fire(owner.jobs[0], "finish")  # finish is declared from busy only
    assert owner.states() == ["idle", "idle", "watching", "watching"]
    assert owner.fired == owner.ended == []


def test_an_undeclared_broadcast_is_refused(engine: str) -> None:
    with pytest.raises(SpecError, match="no broadcast 'reboot'"):
        Owner(engine).run.broadcast("reboot", None)


def test_a_misdeclared_row_never_reaches_the_runtime() -> None:
    """A broadcast naming a trigger its machine does not have is rejected when the
    product is declared, so no runtime is ever built on it."""
    with pytest.raises(SpecError, match="watch has no trigger 'wave'"):
        _product(fires=(("job", "stop"), ("watch", "wave")))


class ScopedOwner(Owner):
    """An owner whose rows of scope ``origin`` reach only the anchor's own watcher (j1's
    is w1), and whose product has a coupling from the job before the one that orphans."""

    def __init__(self, engine: str) -> None:
        super().__init__(engine)
        base = _product()
        done_first = Coupling(
            "done_job_releases_watchers",
            "job",
            frozenset({"done"}),
            "watch",
            frozenset({"watching"}),
            "see",
        )
        product = ProductSpec(
            name="jobs-scoped",
            machines=base.machines,
            broadcasts=base.broadcasts,
            couplings=(done_first, *base.couplings),
        )
        self.run = ProductRun[Inst](
            product,
            engine,  # type: ignore[arg-type]
            members=self.members,
            on_terminal=self.on_terminal,
        )

    def members(self, machine: str, scope: Scope, anchor: Inst | None) -> Sequence[Inst]:
        pool = self.jobs if machine == "job" else self.watchers
        if scope == "origin" and anchor is not None:
            return [i for i in pool if i.name[1:] == anchor.name[1:]]
        return list(pool)


def test_a_coupling_that_does_not_apply_leaves_the_next_to_apply(engine: str) -> None:
    owner = ScopedOwner(engine)
    owner.run.fire(owner.jobs[0], "start")
    owner.run.kill(owner.jobs[0], "crash", BOOM)
    assert owner.watchers[0].state == "orphaned"  # the second coupling, not the first


def test_a_coupling_reaches_only_its_scope(engine: str) -> None:
    owner = ScopedOwner(engine)
    owner.run.fire(owner.jobs[0], "start")
    owner.run.kill(owner.jobs[0], "crash", BOOM)
    assert [w.state for w in owner.watchers] == ["orphaned", "watching"]
