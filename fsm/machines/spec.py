"""Declarations: machines and their product, as plain data.

A :class:`MachineSpec` is the single declaration of one state machine. Three readers
consume it and nothing else:

* :mod:`fsm.machines.runtime` builds a ``transitions.Machine`` from it (what clients embed);
* :mod:`fsm.machines.tables` compiles it to a plain ``dict`` (what the model checker explores);
* the diagram renderer draws it.

A :class:`ProductSpec` composes machines with *declared* synchronisations, in the
spirit of h11's state module: event-triggered :class:`Broadcast` rules (one event fans
out to related machines) and state-triggered :class:`Coupling` rules (a joint
configuration forces an event), applied to a fixed point. Every synchronisation of the
product is one of these rows, so the runtime, the checker and the diagrams all see it.
Every era binds an origin (a stream, a call, a task) to its questions by the same three
rows, declared by :func:`origin_product`; :meth:`MachineSpec.documented` declares each
state with its description.

Machines are deterministic: at most one transition per ``(state, trigger)``. Guards are
*labels* (shown on diagrams, documented here); the policy evaluates them before it
chooses a trigger, so the tables stay total functions that can be compared pairwise.
Definition-time validation (:meth:`MachineSpec.validate`) rejects unknown states,
nondeterminism, transitions out of terminal states, unreachable states and non-terminal
states without a way out, with a :class:`SpecError` naming the offending rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Self


class SpecError(ValueError):
    """A declaration is inconsistent (raised at definition time, never at run time)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of a machine table: ``trigger`` moves ``source`` to ``dest``.

    ``guard`` is a human-readable label of the condition the policy checks before it
    fires this trigger (e.g. ``"budget left"``); ``doc`` says what the row means.
    """

    trigger: str
    source: str
    dest: str
    guard: str = ""
    doc: str = ""


def each(
    trigger: str, sources: Iterable[str], dest: str, *, guard: str = "", doc: str = ""
) -> tuple[Transition, ...]:
    """The same row from each of ``sources``: one :class:`Transition` a source, in order.

    A declaration spreads it (``*each("abort", LIVE, "dead", doc=...)``) where one event
    ends a machine from any of several states; the rows are exactly those written one by
    one, so the tables, the runtime and the diagrams see no difference.
    """
    return tuple(Transition(trigger, s, dest, guard=guard, doc=doc) for s in sources)


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """A deterministic finite state machine, declared once.

    ``terminal`` states have no outgoing transitions. The spec validates itself on
    construction; an invalid declaration raises :class:`SpecError`.
    """

    name: str
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    transitions: tuple[Transition, ...]
    doc: str = ""
    state_docs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def documented(
        cls,
        name: str,
        *,
        doc: str,
        states: Iterable[tuple[str, str]],
        initial: str,
        terminal: frozenset[str],
        transitions: tuple[Transition, ...],
    ) -> Self:
        """The machine whose ``states`` are declared each with its one-line description,
        ``(state, doc)`` in order: one list gives both :attr:`states` and
        :attr:`state_docs`, so every state has its description and every description a
        state."""
        described = tuple(states)
        names = tuple(state for state, _ in described)
        return cls(name, names, initial, terminal, transitions, doc, described)

    @property
    def triggers(self) -> tuple[str, ...]:
        """Every trigger name, in declaration order, without repeats."""
        return tuple(dict.fromkeys(t.trigger for t in self.transitions))

    def state_doc(self, state: str) -> str:
        """The one-line description of ``state`` (empty if none was declared)."""
        return dict(self.state_docs).get(state, "")

    def outgoing(self, state: str) -> Iterator[Transition]:
        """The transitions whose source is ``state``, in declaration order."""
        return (t for t in self.transitions if t.source == state)

    def validate(self) -> None:
        """Check the declaration; raise :class:`SpecError` listing every problem."""
        problems: list[str] = []
        known = set(self.states)
        if len(known) != len(self.states):
            problems.append("duplicate state names")
        if self.initial not in known:
            problems.append(f"initial state {self.initial!r} is not declared")
        problems += [f"terminal state {s!r} is not declared" for s in self.terminal - known]
        seen: dict[tuple[str, str], Transition] = {}
        for t in self.transitions:
            for end in (t.source, t.dest):
                if end not in known:
                    problems.append(f"{t.trigger}: state {end!r} is not declared")
            if t.source in self.terminal:
                problems.append(f"{t.trigger}: leaves terminal state {t.source!r}")
            if (t.source, t.trigger) in seen:
                problems.append(
                    f"{t.trigger}: two transitions from {t.source!r} (nondeterministic)"
                )
            seen[(t.source, t.trigger)] = t
        reachable = _reachable(self.initial, self.transitions)
        problems += [f"state {s!r} is unreachable" for s in self.states if s not in reachable]
        problems += [
            f"non-terminal state {s!r} has no outgoing transition"
            for s in self.states
            if s not in self.terminal and not any(t.source == s for t in self.transitions)
        ]
        if problems:
            raise SpecError(f"machine {self.name!r}: " + "; ".join(problems))


def _reachable(initial: str, transitions: Iterable[Transition]) -> set[str]:
    edges: dict[str, list[str]] = {}
    for t in transitions:
        edges.setdefault(t.source, []).append(t.dest)
    seen, todo = {initial}, [initial]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


Scope = Literal["origin", "session"]
"""Which instances a synchronisation reaches: those of the same origin, or of the session."""


@dataclass(frozen=True, slots=True)
class Broadcast:
    """Event-triggered synchronisation: when ``event`` happens, fire ``fires`` rows.

    ``fires`` lists ``(machine name, trigger)`` pairs; each is fired on every instance of
    that machine within ``scope`` that is not yet terminal (so a broadcast never fails
    on an instance that already finished).
    """

    event: str
    scope: Scope
    fires: tuple[tuple[str, str], ...]
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Coupling:
    """State-triggered synchronisation on a joint configuration.

    When an instance of ``when_machine`` is in one of ``when_states`` and an instance of
    ``then_machine`` in the same ``scope`` is in one of ``then_states``, fire
    ``then_trigger`` on the latter. Couplings are applied repeatedly until none applies
    (a fixed point; the product validator proves it terminates because every coupling
    moves its target into a terminal state).
    """

    name: str
    when_machine: str
    when_states: frozenset[str]
    then_machine: str
    then_states: frozenset[str]
    then_trigger: str
    scope: Scope = "origin"
    doc: str = ""


@dataclass(frozen=True, slots=True)
class ProductSpec:
    """Machines composed by declared synchronisations."""

    name: str
    machines: tuple[MachineSpec, ...]
    broadcasts: tuple[Broadcast, ...]
    couplings: tuple[Coupling, ...]
    doc: str = ""
    _by_name: dict[str, MachineSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({m.name: m for m in self.machines})
        self.validate()

    def machine(self, name: str) -> MachineSpec:
        """The component machine called ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise SpecError(f"product {self.name!r} has no machine {name!r}") from None

    def broadcast(self, event: str) -> Broadcast:
        """The broadcast row for ``event``."""
        for row in self.broadcasts:
            if row.event == event:
                return row
        raise SpecError(f"product {self.name!r} has no broadcast {event!r}")

    def validate(self) -> None:
        """Every row names declared machines, states and triggers; couplings terminate."""
        problems: list[str] = []
        for b in self.broadcasts:
            for machine, trigger in b.fires:
                if machine not in self._by_name:
                    problems.append(f"broadcast {b.event}: unknown machine {machine!r}")
                elif trigger not in self._by_name[machine].triggers:
                    problems.append(f"broadcast {b.event}: {machine} has no trigger {trigger!r}")
        for c in self.couplings:
            if c.when_machine not in self._by_name or c.then_machine not in self._by_name:
                problems.append(f"coupling {c.name}: unknown machine")
                continue
            when, then = self._by_name[c.when_machine], self._by_name[c.then_machine]
            problems += [
                f"coupling {c.name}: {s!r} not a state of {when.name}"
                for s in c.when_states - set(when.states)
            ]
            for s in sorted(c.then_states):
                row = next((t for t in then.outgoing(s) if t.trigger == c.then_trigger), None)
                if row is None:
                    problems.append(
                        f"coupling {c.name}: {then.name} cannot {c.then_trigger} in {s}"
                    )
                elif row.dest not in then.terminal:
                    problems.append(f"coupling {c.name}: target {row.dest!r} is not terminal")
        if problems:
            raise SpecError(f"product {self.name!r}: " + "; ".join(problems))


def origin_product(
    name: str,
    doc: str,
    origin: MachineSpec,
    origin_live: frozenset[str],
    origin_ended: frozenset[str],
    question: MachineSpec,
    question_live: frozenset[str],
    *,
    completes: tuple[str, str],
    aborts: tuple[str, str],
    orphans: tuple[str, str],
    broadcasts: tuple[Broadcast, ...] = (),
) -> ProductSpec:
    """An era's product: an ``origin`` machine (a stream, a call, a task) and the machine
    of its questions, bound by the three rows every era declares, in the ``origin`` scope,
    as ``(name, doc)`` pairs say them:

    * ``completes``: a broadcast that fires ``complete`` on the origin and on each of its
      questions (the origin's result arrived);
    * ``aborts``: a coupling by which a question in ``dead`` fires ``abort`` on the origin
      while it is in ``origin_live`` (the interaction fails once);
    * ``orphans``: a coupling by which the origin in one of ``origin_ended`` fires
      ``orphan`` on every question still in ``question_live`` (nobody reads their answers).

    ``broadcasts`` are the era's further broadcast rows, declared after the completion.
    The machines must declare those triggers and states; :meth:`ProductSpec.validate`
    rejects a product whose rows they do not fit.
    """
    event, says = completes
    completion = Broadcast(
        event, "origin", ((origin.name, "complete"), (question.name, "complete")), doc=says
    )
    (abort_name, abort_doc), (orphan_name, orphan_doc) = aborts, orphans
    dead = frozenset({"dead"})
    return ProductSpec(
        name=name,
        doc=doc,
        machines=(origin, question),
        broadcasts=(completion, *broadcasts),
        couplings=(
            Coupling(
                abort_name, question.name, dead, origin.name, origin_live, "abort", doc=abort_doc
            ),
            Coupling(
                orphan_name,
                origin.name,
                origin_ended,
                question.name,
                question_live,
                "orphan",
                doc=orphan_doc,
            ),
        ),
    )
