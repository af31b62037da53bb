"""The product runtime: the one loop that applies a product's declared rows to instances.

Theory of operation
-------------------
A product (:class:`~fsm.machines.spec.ProductSpec`) is machines plus rows: per machine, its
transitions; across machines, event-triggered :class:`~fsm.machines.spec.Broadcast` rows and
state-triggered :class:`~fsm.machines.spec.Coupling` rows. A *decider* (:class:`fsm.sse.guard.Guard`
for SSE sessions, :class:`fsm.mrtr.call.MrtrCall` for multi round-trip calls) owns the machine
instances, reads its inputs, and decides which trigger to fire; a :class:`ProductRun`
fires it and applies every row that follows, to a fixed point. The rules of the room:

1. A decider decides; only :meth:`ProductRun.fire` changes a machine's state. (Restoring
   a snapshot rebuilds instances in the states it recorded: that is no transition.)
2. Every cross-machine effect is a row of the product, applied here: a broadcast by
   :meth:`ProductRun.broadcast`, the couplings by :meth:`ProductRun.settle`. What a
   decider does to a second machine by hand escapes the model checker and the diagrams.
3. This module knows nothing of HTTP, SSE or JSON-RPC. An instance is anything with a
   ``machine`` name, a ``state`` and a ``cause``; the owner says which instances a row
   reaches (``members``) and what a terminal state means to it (``on_terminal``: take a
   prompt down, end an interaction).

What is not a row yet: the *guards* of transitions ("budget left", "first delivery") are
labels on the diagrams; the deciders evaluate them in Python before they choose a
trigger. A change to such a condition shows on no diagram unless its label changes too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

from fsm.errors import InteractionFailed, RequestKey
from fsm.machines.spec import ProductSpec, Scope, SpecError
from fsm.machines.tables import Engine, EngineName, make_engines


class Cause(NamedTuple):
    """Why an instance died, kept as data until a ``Fail`` action is built from it.

    A coupling passes its source's cause on to the instance it kills (unless that one
    already has its own), so one failure is reported with the evidence that started it.
    """

    error: type[InteractionFailed]
    message: str
    key: RequestKey | None
    evidence: tuple[str, ...]
    reason: str | None = None

    def build(self, stream: str | None) -> InteractionFailed:
        """The error to raise or report, naming ``stream``."""
        return self.error(
            self.message, key=self.key, stream=stream, reason=self.reason, evidence=self.evidence
        )


class Instance(Protocol):
    """One instance of one machine of the product, as :class:`ProductRun` sees it."""

    @property
    def machine(self) -> str:
        """The name of the machine this is an instance of (fixed for its life)."""
        ...

    state: str
    cause: Cause | None


InstT = TypeVar("InstT", bound=Instance)

FireHook = Callable[[str, str, str, str], None]
"""``on_fire(machine, source, trigger, dest)``, told every declared transition taken."""


class ProductRun(Generic[InstT]):
    """Fires the declared transitions of one product's instances and applies its rows.

    ``members(machine, scope, anchor)`` lists the instances of ``machine`` a row reaches
    in ``scope`` from ``anchor`` (the broadcast's anchor, or the instance whose new state
    triggered a coupling), terminal ones included: this runtime skips those. It must
    return a fresh sequence: firing may make the owner forget finished instances.
    ``on_terminal(inst, old, trigger)`` is called once when ``inst`` enters a terminal
    state from ``old``; it must not fire anything (the couplings are :meth:`settle`'s).
    ``engine`` picks the ``transitions`` runtime or the compiled tables: both fire the
    same rows (``tests/core/test_tables_agree.py``).
    """

    __slots__ = (
        "_broadcasts",
        "_couplings",
        "_dirty",
        "_engines",
        "_members",
        "_on_terminal",
        "_terminal",
        "on_fire",
        "product",
    )

    def __init__(
        self,
        product: ProductSpec,
        engine: EngineName,
        members: Callable[[str, Scope, InstT | None], Sequence[InstT]],
        on_terminal: Callable[[InstT, str, str], None],
        on_fire: FireHook | None = None,
    ) -> None:
        self.product = product
        self.on_fire = on_fire
        self._engines: dict[str, Engine] = make_engines(product.machines, engine)
        self._terminal = {m.name: m.terminal for m in product.machines}
        self._broadcasts = {b.event: b for b in product.broadcasts}
        self._couplings = {
            m.name: tuple(c for c in product.couplings if c.when_machine == m.name)
            for m in product.machines
        }
        self._members = members
        self._on_terminal = on_terminal
        self._dirty: deque[InstT] = deque()

    def terminal(self, machine: str) -> frozenset[str]:
        """The terminal states of ``machine``."""
        return self._terminal[machine]

    def fire(self, inst: InstT, trigger: str) -> str:
        """Take the declared transition ``trigger`` of ``inst`` and return its new state.

        Raises :class:`~fsm.machines.tables.InvalidTransition` (``inst`` unchanged) when its
        machine has no such row from its state. A terminal state queues ``inst`` for
        :meth:`settle` and calls ``on_terminal``; nothing else is applied until then."""
        machine = inst.machine
        old = inst.state
        new = self._engines[machine].fire(old, trigger)
        inst.state = new
        if self.on_fire is not None:
            self.on_fire(machine, old, trigger, new)
        if new in self._terminal[machine]:
            self._dirty.append(inst)
            self._on_terminal(inst, old, trigger)
        return new

    def kill(self, inst: InstT, trigger: str, cause: Cause | None) -> None:
        """Record ``cause`` on ``inst``, fire ``trigger`` (one that ends it), then settle."""
        inst.cause = cause
        self.fire(inst, trigger)
        self.settle()

    def broadcast(
        self, event: str, anchor: InstT | None, cause: Callable[[InstT], Cause] | None = None
    ) -> None:
        """Apply the broadcast row of ``event`` from ``anchor``, then settle: each of its
        ``(machine, trigger)`` pairs fires on every member not yet terminal, in order;
        ``cause(member)``, when given, is recorded on each first. Raises
        :class:`~fsm.machines.spec.SpecError` if the product declares no such broadcast."""
        row = self._broadcasts.get(event)
        if row is None:
            raise SpecError(f"product {self.product.name!r} has no broadcast {event!r}")
        for machine, trigger in row.fires:
            ended = self._terminal[machine]
            for inst in self._members(machine, row.scope, anchor):
                if inst.state in ended:
                    continue
                if cause is not None:
                    inst.cause = cause(inst)
                self.fire(inst, trigger)
        self.settle()

    def settle(self) -> None:
        """Apply the couplings until none applies (a fixed point), oldest change first.

        A coupling whose source is in one of its ``when_states`` fires ``then_trigger``
        on every member in one of its ``then_states``, handing on the source's cause to
        a target without one. It terminates: every coupling's target ends terminal
        (:meth:`~fsm.machines.spec.ProductSpec.validate`), and only terminal instances
        are queued."""
        dirty = self._dirty
        while dirty:
            inst = dirty.popleft()
            for c in self._couplings[inst.machine]:
                if inst.state not in c.when_states:
                    continue
                for target in self._members(c.then_machine, c.scope, inst):
                    if target.state in c.then_states:
                        if target.cause is None:
                            target.cause = inst.cause
                        self.fire(target, c.then_trigger)
