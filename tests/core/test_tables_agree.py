"""The ``transitions`` runtime and the compiled tables agree on every (state, trigger)
pair, and the spec validator rejects malformed declarations by name."""

from __future__ import annotations

import pytest

from fsm.machines.resumption import LIVENESS, PRODUCT, TRANSPORT
from fsm.machines.rounds import MRTR_PRODUCT, ROUNDS
from fsm.machines.runtime import TransitionsMachine
from fsm.machines.spec import Broadcast, Coupling, MachineSpec, ProductSpec, SpecError, Transition
from fsm.machines.tables import CompiledMachine, InvalidTransition

# (states, triggers, declared transitions), pinned: a change to a machine must be deliberate.
SHAPES = {"transport": (6, 9, 22), "liveness": (8, 14, 32), "rounds": (6, 12, 19)}
MACHINES = [TRANSPORT, LIVENESS, ROUNDS]


def _outcome(engine: object, state: str, trigger: str) -> str:
    try:
        return engine.fire(state, trigger)  # type: ignore[attr-defined,no-any-return]
    except InvalidTransition as exc:
        assert (exc.machine, exc.state, exc.trigger) == (engine.spec.name, state, trigger)  # type: ignore[attr-defined]
        return "<invalid>"


@pytest.mark.parametrize("spec", MACHINES, ids=lambda s: s.name)
def test_runtime_and_table_agree_on_every_pair(spec: MachineSpec) -> None:
    runtime, table = TransitionsMachine(spec), CompiledMachine.compile(spec)
    n_states, n_triggers, n_transitions = SHAPES[spec.name]
    assert (len(spec.states), len(spec.triggers), len(spec.transitions)) == SHAPES[spec.name]
    declared = {(t.source, t.trigger): t.dest for t in spec.transitions}
    checked = valid = 0
    for state in spec.states:
        for trigger in spec.triggers:
            got_runtime = _outcome(runtime, state, trigger)
            got_table = _outcome(table, state, trigger)
            assert got_runtime == got_table, (state, trigger)
            assert got_runtime == declared.get((state, trigger), "<invalid>")
            assert runtime.allows(state, trigger) == table.allows(state, trigger)
            assert table.allows(state, trigger) == ((state, trigger) in declared)
            assert table.step(state, trigger) == declared.get((state, trigger))
            checked += 1
            valid += got_table != "<invalid>"
    assert checked == n_states * n_triggers
    assert valid == n_transitions == len(table.table)


def test_pair_count_over_both_machines() -> None:
    total = sum(len(m.states) * len(m.triggers) for m in PRODUCT.machines)
    assert total == 6 * 9 + 8 * 14 == 166
    assert sum(len(m.states) * len(m.triggers) for m in MRTR_PRODUCT.machines) == 6 * 12 + 8 * 14


@pytest.mark.parametrize("spec", MACHINES, ids=lambda s: s.name)
def test_both_engines_reject_unknown_states_and_triggers(spec: MachineSpec) -> None:
    for engine in (TransitionsMachine(spec), CompiledMachine.compile(spec)):
        with pytest.raises(InvalidTransition):
            engine.fire("no-such-state", spec.triggers[0])
        with pytest.raises(InvalidTransition):
            engine.fire(spec.initial, "no-such-trigger")
        assert not engine.allows("no-such-state", spec.triggers[0])
        assert not engine.allows(spec.initial, "no-such-trigger")


@pytest.mark.parametrize("spec", MACHINES, ids=lambda s: s.name)
def test_runtime_state_does_not_leak_between_fires(spec: MachineSpec) -> None:
    """One shared model serves every instance: each fire starts from the state given."""
    runtime = TransitionsMachine(spec)
    first = spec.transitions[0]
    assert runtime.fire(first.source, first.trigger) == first.dest
    with pytest.raises(InvalidTransition):
        runtime.fire(next(iter(spec.terminal)), first.trigger)
    assert runtime.fire(first.source, first.trigger) == first.dest


# ------------------------------------------------------------------ the validator

_T = Transition


def _spec(**overrides: object) -> MachineSpec:
    fields: dict[str, object] = {
        "name": "m",
        "states": ("a", "b", "z"),
        "initial": "a",
        "terminal": frozenset({"z"}),
        "transitions": (_T("go", "a", "b"), _T("end", "b", "z")),
    }
    fields.update(overrides)
    return MachineSpec(**fields)  # type: ignore[arg-type]


def test_well_formed_spec_is_accepted() -> None:
    assert _spec().triggers == ("go", "end")


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (
            {"transitions": (_T("go", "a", "b"), _T("end", "b", "nowhere"))},
            "'nowhere' is not declared",
        ),
        ({"initial": "q"}, "initial state 'q' is not declared"),
        (
            {"transitions": (_T("go", "a", "b"), _T("go", "a", "z"), _T("end", "b", "z"))},
            "go: two transitions from 'a' (nondeterministic)",
        ),
        (
            {"transitions": (_T("go", "a", "b"), _T("end", "b", "z"), _T("back", "z", "a"))},
            "back: leaves terminal state 'z'",
        ),
        ({"states": ("a", "b", "c", "z")}, "state 'c' is unreachable"),
        (
            {"transitions": (_T("go", "a", "b"), _T("end", "a", "z"))},
            "non-terminal state 'b' has no outgoing transition",
        ),
        ({"states": ("a", "b", "z", "a")}, "duplicate state names"),
        ({"terminal": frozenset({"z", "y"})}, "terminal state 'y' is not declared"),
    ],
    ids=[
        "unknown-state",
        "unknown-initial",
        "nondeterminism",
        "edge-out-of-terminal",
        "unreachable",
        "stuck-non-terminal",
        "duplicate-state",
        "unknown-terminal",
    ],
)
def test_malformed_spec_raises_spec_error_naming_the_problem(
    overrides: dict[str, object], needle: str
) -> None:
    with pytest.raises(SpecError) as info:
        _spec(**overrides)
    assert needle in str(info.value)
    assert "machine 'm'" in str(info.value)


def test_spec_error_lists_every_problem() -> None:
    with pytest.raises(SpecError) as info:
        _spec(
            states=("a", "b", "c", "z"),
            initial="a",
            transitions=(_T("go", "a", "b"), _T("go", "a", "z")),
        )
    text = str(info.value)
    assert "nondeterministic" in text
    assert "'c' is unreachable" in text


def _product(
    *, broadcasts: tuple[Broadcast, ...] = (), couplings: tuple[Coupling, ...] = ()
) -> ProductSpec:
    return ProductSpec("p", (TRANSPORT, LIVENESS), broadcasts, couplings)


def _coupling(
    *, machine: str = "liveness", when: str = "dead", then: str = "open", trigger: str = "abort"
) -> Coupling:
    """Coupling ``c``: ``machine`` in ``when`` makes the transport ``trigger`` in ``then``."""
    return Coupling("c", machine, frozenset({when}), "transport", frozenset({then}), trigger)


def test_declared_product_is_valid_and_couplings_target_terminal_states() -> None:
    again = _product(broadcasts=PRODUCT.broadcasts, couplings=PRODUCT.couplings)
    assert again.machine("transport") is TRANSPORT
    for c in PRODUCT.couplings:
        then = PRODUCT.machine(c.then_machine)
        for s in c.then_states:
            assert then.outgoing(s)
            row = next(t for t in then.outgoing(s) if t.trigger == c.then_trigger)
            assert row.dest in then.terminal


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (
            {"couplings": (_coupling(trigger="lose"),)},
            "coupling c: target 'broken' is not terminal",
        ),
        ({"couplings": (_coupling(then="done"),)}, "coupling c: transport cannot abort in done"),
        ({"couplings": (_coupling(when="gone"),)}, "coupling c: 'gone' not a state of liveness"),
        ({"couplings": (_coupling(machine="nope"),)}, "coupling c: unknown machine"),
        (
            {"broadcasts": (Broadcast("b", "origin", (("transport", "explode"),)),)},
            "broadcast b: transport has no trigger 'explode'",
        ),
        (
            {"broadcasts": (Broadcast("b", "origin", (("nope", "complete"),)),)},
            "broadcast b: unknown machine 'nope'",
        ),
    ],
    ids=[
        "coupling-to-non-terminal",
        "coupling-trigger-undeclared",
        "coupling-unknown-state",
        "coupling-unknown-machine",
        "broadcast-unknown-trigger",
        "broadcast-unknown-machine",
    ],
)
def test_malformed_product_raises_spec_error_naming_the_problem(
    kwargs: dict[str, tuple[object, ...]], needle: str
) -> None:
    with pytest.raises(SpecError) as info:
        _product(**kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_product_lookup_of_unknown_names_raises() -> None:
    with pytest.raises(SpecError, match="no machine 'x'"):
        PRODUCT.machine("x")
    with pytest.raises(SpecError, match="no broadcast 'x'"):
        PRODUCT.broadcast("x")
