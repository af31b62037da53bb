"""The explicit-state engine: breadth-first search, then cycle detection for termination.

BFS interns each distinct state once (``dict`` state -> index); the queue is the list of
discovered states itself, so discovery order *is* BFS order and a state's depth never decreases
with its index. For every state the engine keeps its BFS parent and the action that discovered
it (hence shortest counterexamples), and for every expanded state its successor indices in a
compact CSR pair of ``array('i')`` (``offsets``, ``edges``). After the search an iterative
Tarjan finds the cyclic strongly connected components (size > 1, or a self-loop); the reported
lasso goes to the cyclic state of least discovery index (least depth, deterministic ties), then
round the shortest cycle through it inside its component. A model that declares its system
state (``system_state``: a state without what only records, such as a property monitor)
has its cycles found over system states: the monitor's record of a first lap must not
make the loop start one lap late. The lasso is then the shortest over system states, its
last state has the system state of the state where its loop starts, and the checker
proves it a real cycle of the model by going round it until a whole state repeats. System
states are searched only when the graph of whole states has a cycle (a cycle of system
states closes one, by their contract), so a model that terminates pays nothing for them.

While it searches, the engine moves what it has discovered out of the cyclic garbage
collector's view every few thousand states (``gc.freeze``; undone when the search ends): the
graph only grows, so scanning it again and again was up to a third of the run. Collection of
young objects goes on as usual. It is skipped when the process already uses ``gc.freeze``
or has the collector disabled, which it asks when it first moves its graph: counting the
frozen objects walks them all, so a search of fewer than 1,024 states never counts them.

Symmetry: when the model declares one (:class:`~fsm.checker.model.Symmetry`) the engine
interns each state's representative instead of the state, so it explores one state per
orbit; counterexamples found among representatives are rebuilt as concrete paths of the
model (at each step the first action, preferring the one of the same name, whose successor
has the next representative; round a loop again until a concrete state repeats), so they
print in the model's own ids and replay on it unreduced. ``symmetry=False`` explores the
full space.

Everything is deterministic given a deterministic model: same counts, same counterexamples.
Limits: the whole graph is held in memory (a few dozen bytes per state and 4 per edge, plus the
states themselves); states outside the model's boundary and states at ``max_depth`` are not
expanded, so they are part of no cycle and never judged deadlocked. A search stops at
:data:`DEFAULT_MAX_STATES` distinct states unless given another bound (a model whose state
grows without end ends there, incomplete), and warns once (:class:`MemoryUseWarning`) when
the process holds over half the machine's memory.

A model that raises is reported as a :class:`ModelError` naming the line of the model's
own code that raised (:func:`~fsm.checker.location.raised_at`), whatever it raised
(``SystemExit`` too: ``exit()`` in a hook is no verdict); only an interruption (Ctrl-C:
:func:`~fsm.checker.location.interrupts`) passes through.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from array import array
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from time import perf_counter
from types import ModuleType
from typing import Any, Generic, TypedDict, TypeVar, Unpack

from fsm.checker.location import Location, interrupts, raised_at, what_raised
from fsm.checker.model import Model, require_model, resolve_hooks
from fsm.checker.path import Lasso, Path, Step
from fsm.checker.properties import Kind, Property, Verdict
from fsm.checker.report import (
    Coverage,
    Progress,
    ProgressFn,
    PropertyResult,
    Report,
    print_progress,
)

resource: ModuleType | None
try:
    import resource
except ImportError:  # Windows: no peak memory to look at
    resource = None

S = TypeVar("S", bound=Hashable)
A = TypeVar("A")

_PROGRESS_EVERY = 256  # expanded states between two looks at the clock
_FREEZE_EVERY = 1024  # expanded states between two moves of the heap out of the gc's view


class ModelError(Exception):
    """The model raised while being explored; ``path`` leads to the state being expanded (None
    if no state was involved), ``action`` names the action being applied, if any, and
    ``location`` the line of the model's code where it raised (None when no frame of the
    model's code was involved: see :func:`~fsm.checker.location.raised_at`)."""

    def __init__(
        self,
        message: str,
        path: Path | None,
        action: str | None,
        location: Location | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.action = action
        self.location = location

    def format_text(self) -> str:
        """The message, the model's line that raised (``at FILE:LINE, in FUNCTION: SOURCE``),
        then the path to the state where the model raised."""
        lines = [str(self)]
        if self.location is not None:
            lines.append(f"  {self.location.format_text()}")
        if self.path is not None:
            where = f" applying {self.action!r}" if self.action is not None else ""
            lines.append(f"  raised{where} in the state reached by:")
            lines.append(self.path.format_text("  "))
        return "\n".join(lines)


class MemoryUseWarning(UserWarning):
    """A search holds more memory than its limit (``memory_warning``): it may exhaust the
    machine's memory before it ends. Warned once per run, through :mod:`warnings`."""


DEFAULT_MAX_STATES = 2_000_000
"""The bound on distinct states when none is given (``max_states=None`` lifts it): a model
whose state grows without end stops there with an incomplete report, in a few minutes and
a few GB, instead of running until the machine runs out of memory."""

DEFAULT_MEMORY_WARNING = 0.5
"""The share of the machine's physical memory past which a search warns that it may run
out (:class:`MemoryUseWarning`)."""


@contextmanager
def _growing_heap() -> Iterator[Callable[[], None]]:
    """Yield a function that hides every object alive now from the cyclic collector; all are
    visible again on exit. A no-op if the process froze objects itself or disabled the gc,
    which the first call asks: counting the frozen objects walks them all (about a second
    over millions), so a search that ends before it first settles never counts them."""
    ours: bool | None = None  # None: not asked yet

    def settle() -> None:
        nonlocal ours
        if ours is None:
            ours = gc.isenabled() and not gc.get_freeze_count()
        if ours:
            gc.freeze()

    try:
        yield settle
    finally:
        if ours:
            gc.unfreeze()


@contextmanager
def model_errors(doing: str, *, passing: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Turn what model code raised outside the search into a :class:`ModelError`
    (``model raised KIND: MESSAGE (DOING)``, the model's line that raised): whatever it
    raised, ``SystemExit`` included, but an interruption
    (:func:`~fsm.checker.location.interrupts`: Ctrl-C) and the classes in ``passing`` (the
    caller reports those itself), which pass through. For any code that runs a model's
    hooks and reports as ``fsm check`` does (``fsm render``)."""
    try:
        yield
    except ModelError:
        raise
    except BaseException as exc:
        if interrupts(exc) or isinstance(exc, passing):
            raise
        message = f"model raised {what_raised(exc)} ({doing})"
        raise ModelError(message, None, None, raised_at(exc)) from exc


class Checker(Generic[S, A]):
    """Breadth-first model checker for one model.

    ``max_states`` bounds the number of distinct states (default
    :data:`DEFAULT_MAX_STATES`; None: no bound), ``max_depth`` the BFS depth expanded
    (states at that depth are discovered and checked, not expanded; default: none). When a
    bound is hit the report is marked incomplete, names the bound (:attr:`Report.bound`)
    and only discoveries are reported (see :class:`Report`).
    ``progress``: None/False for silence, True for a line on stderr about once a second once the
    run passes one second, or a callable receiving :class:`Progress` snapshots.
    ``symmetry``: explore one representative per orbit when the model declares a symmetry
    (the default), or every state (False).
    ``memory_warning``: the share of the machine's physical memory past which the run warns,
    once, that it may run out (:class:`MemoryUseWarning`, through :mod:`warnings`; default
    :data:`DEFAULT_MEMORY_WARNING`; None: never). It looks at the process's peak resident
    memory every 1,024 states expanded, where the platform tells it (not on Windows).
    """

    def __init__(
        self,
        model: Model[S, A],
        *,
        max_states: int | None = DEFAULT_MAX_STATES,
        max_depth: int | None = None,
        progress: ProgressFn | bool | None = None,
        symmetry: bool = True,
        memory_warning: float | None = DEFAULT_MEMORY_WARNING,
    ) -> None:
        require_model(model)
        self.model = model
        with model_errors("reading its hooks and properties"):
            self.hooks = resolve_hooks(model)
            self.props: tuple[Property[S], ...] = tuple(model.properties())
        names = [p.name for p in self.props]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate property names: {', '.join(duplicates)}")
        for bound in (max_states, max_depth):
            if bound is not None and bound < 0:
                raise ValueError("bounds must be >= 0")
        if memory_warning is not None and not memory_warning > 0:
            raise ValueError("memory_warning is a share of physical memory > 0, or None")
        self.max_states = max_states
        self.max_depth = max_depth
        physical = _physical_memory() if memory_warning is not None else None
        self._memory_limit = None if physical is None else int(physical * (memory_warning or 0))
        self._physical = physical
        self._bound: str | None = None
        self.progress: ProgressFn | None = print_progress if progress is True else progress or None
        declared = self.hooks.symmetry if symmetry else None
        self._canon = declared.representative if declared is not None else None
        self._orbit = declared.orbit_size if declared is not None else None
        self._reset()

    def _reset(self) -> None:
        """Forget any previous run's graph (``run`` may be called again)."""
        self.states: list[S] = []
        self.parent: list[int] = []  # BFS parent index, -1 for initial states
        self.via: list[Any] = []  # the action that discovered each state
        self.offsets = array("i", [0])  # successors of state i: edges[offsets[i]:offsets[i+1]]
        self.edges = array("i")
        self._lasso_searched = False
        self._lasso_found: Lasso | None = None
        self.represented: int | None = 0 if self._orbit is not None else None
        self._bound = None

    # -- search -----------------------------------------------------------------------------

    def run(self) -> Report:
        """Explore the reachable state space and judge every property."""
        self._reset()
        start = perf_counter()
        found: list[int | None] = [None] * len(self.props)
        complete, depth, fired = self._search(found, start)
        with model_errors("building a counterexample"):
            results = tuple(
                self._judge(prop, found[slot], complete) for slot, prop in enumerate(self.props)
            )
        declared = self.hooks.declared
        represented = self.represented if self._canon is not None else len(self.states)
        return Report(
            model=self.hooks.name,
            states=len(self.states),
            transitions=len(self.edges),
            depth=depth,
            seconds=perf_counter() - start,
            complete=complete,
            results=results,
            coverage=Coverage(
                fired=tuple(d for d in declared if d in fired),
                never_fired=tuple(d for d in declared if d not in fired),
            ),
            symmetry=self._canon is not None,
            represented=represented,
            bound=self._bound,
        )

    def _search(self, found: list[int | None], start: float) -> tuple[bool, int, set[str]]:
        """BFS filling the graph; records in ``found[slot]`` the first state index that
        violates (always, deadlock) or satisfies (sometimes) each property.
        Returns (complete, depth of the deepest discovered state, fired transition labels)."""
        with _growing_heap() as settle:
            return self._explore(found, start, settle)

    def _explore(
        self, found: list[int | None], start: float, settle: Callable[[], None]
    ) -> tuple[bool, int, set[str]]:
        states, parent, via, offsets, edges = (
            self.states,
            self.parent,
            self.via,
            self.offsets,
            self.edges,
        )
        index: dict[S, int] = {}
        checks: list[tuple[int, Callable[[S], bool], bool]] = [
            (slot, p.predicate, p.kind is Kind.ALWAYS)
            for slot, p in enumerate(self.props)
            if p.kind in (Kind.ALWAYS, Kind.SOMETIMES) and p.predicate is not None
        ]
        deadlock_slots = [s for s, p in enumerate(self.props) if p.kind is Kind.DEADLOCK]

        def check_state(j: int, state: S) -> None:
            nonlocal checks
            hit = False
            for slot, pred, is_invariant in checks:
                if bool(pred(state)) is not is_invariant:
                    found[slot] = j
                    hit = True
            if hit:
                checks = [c for c in checks if found[c[0]] is None]

        model, hooks = self.model, self.hooks
        actions, next_state = model.actions, model.next_state
        canon, orbit, name = self._canon, self._orbit, hooks.name
        represented = 0
        within, fired_fn, progress = hooks.within_boundary, hooks.fired, self.progress
        limit = self.max_states if self.max_states is not None else -1
        memory_limit = self._memory_limit
        max_depth = self.max_depth if self.max_depth is not None else -1
        fired: set[str] = set()
        append_state, append_parent, append_via = states.append, parent.append, via.append
        add_edge, close_state = edges.append, offsets.append
        complete = True
        head = depth = 0
        action: Any = None
        next_look = start + 1.0
        try:
            for init in model.init_states():
                if canon is not None:
                    init = canon(init)
                if init not in index:
                    if len(states) == limit:
                        complete = False
                        self._bound = f"max_states={limit}"
                        break
                    index[init] = len(states)
                    append_state(init)
                    append_parent(-1)
                    append_via(None)
                    if orbit is not None:
                        represented += orbit(init)
                    if checks:
                        check_state(len(states) - 1, init)
            level_end = len(states)
            while head < len(states) and complete:
                if head == level_end:
                    depth += 1
                    level_end = len(states)
                if depth == max_depth:  # every state from here on lies at the depth bound
                    complete = False
                    self._bound = f"max_depth={max_depth}"
                    break
                s = states[head]
                if within is not None and not within(s):  # checked on discovery, not expanded
                    close_state(len(edges))
                    head += 1
                    continue
                successors = 0
                for action in actions(s):
                    t = next_state(s, action)
                    if t is None:
                        continue
                    if canon is not None:
                        t = canon(t)
                    successors += 1
                    j = index.get(t)
                    if j is None:
                        j = len(states)
                        if j == limit:
                            complete = False
                            self._bound = f"max_states={limit}"
                            break
                        index[t] = j
                        append_state(t)
                        append_parent(head)
                        append_via(action)
                        if orbit is not None:
                            represented += orbit(t)
                        if checks:
                            check_state(j, t)
                    add_edge(j)
                    if fired_fn is not None:
                        fired.update(fired_fn(s, action, t))
                action = None
                close_state(len(edges))
                if successors == 0 and complete and deadlock_slots and not hooks.is_terminal(s):
                    for slot in deadlock_slots:
                        if found[slot] is None:
                            found[slot] = head
                head += 1
                if head % _FREEZE_EVERY == 0:
                    settle()
                    if memory_limit is not None and _peak_memory() > memory_limit:
                        self._warn_memory(len(states), depth)
                        memory_limit = None
                if progress is not None and head % _PROGRESS_EVERY == 0:
                    now = perf_counter()
                    if now >= next_look:
                        next_look = now + 1.0
                        queue = len(states) - head
                        progress(
                            Progress(
                                len(states),
                                len(edges),
                                depth,
                                queue,
                                now - start,
                                name,
                                represented if orbit is not None else None,
                            )
                        )
        except BaseException as exc:  # SystemExit in a hook too: a model error, not an exit
            if interrupts(exc):
                raise
            raise self._model_error(exc, head, action) from exc
        finally:
            if orbit is not None:
                self.represented = represented
        while len(offsets) <= len(states):  # states never expanded (bound hit): no edges
            close_state(len(edges))
        return complete, depth + (1 if len(states) > level_end else 0), fired

    def _warn_memory(self, states: int, depth: int) -> None:
        held, physical = _peak_memory(), self._physical or 0
        warnings.warn(
            f"{self.hooks.name}: the search holds {_gb(held)} of memory, over"
            f" {held * 100 // max(physical, 1)}% of this machine's {_gb(physical)}, at"
            f" {states:,} states (depth {depth}): it may run out of memory before it ends."
            " Lower the model's bounds or the state bound (max_states).",
            MemoryUseWarning,
            stacklevel=2,
        )

    def _model_error(self, exc: BaseException, head: int, action: Any) -> ModelError:
        path = None
        if head < len(self.states):
            try:
                path = self._path_to(head)
            except BaseException as failed:  # its format_state raised too: no path, then
                if interrupts(failed):
                    raise
        name = None if action is None else str(action)
        message = f"model raised {what_raised(exc)}"
        return ModelError(message, path, name, raised_at(exc))

    # -- verdicts and traces ----------------------------------------------------------------

    def _judge(self, prop: Property[S], hit: int | None, complete: bool) -> PropertyResult:
        unproved = Verdict.HOLDS if complete else Verdict.UNKNOWN
        path: Path | None = None
        if prop.kind is Kind.SOMETIMES:
            verdict = (
                Verdict.HOLDS
                if hit is not None
                else (Verdict.VACUOUS if complete else Verdict.UNKNOWN)
            )
            path = self._path_to(hit) if hit is not None else None
        elif prop.kind is Kind.TERMINATES:
            path = self._lasso()
            verdict = Verdict.VIOLATED if path is not None else unproved
        else:
            path = self._path_to(hit) if hit is not None else None
            verdict = Verdict.VIOLATED if path is not None else unproved
        if verdict is not Verdict.VIOLATED or path is None:
            return PropertyResult(prop.name, prop.kind, prop.description, verdict, path)
        at = len(path) if path.loop_start is None else path.loop_start
        return PropertyResult(
            prop.name, prop.kind, prop.description, verdict, path, self._why(prop, path), at
        )

    def _why(self, prop: Property[S], path: Path) -> str | None:
        """The model's words for why ``path`` violates ``prop`` (its ``why`` hook); else,
        for a deadlock or a lasso, where the path sticks or loops; else None."""
        said = self.hooks.why(prop.name, path.states, path.loop_start) if self.hooks.why else None
        if said:
            return said
        if prop.kind is Kind.DEADLOCK:
            return f"no action is enabled in the state after step {len(path)}, not a terminal one"
        if prop.kind is Kind.TERMINATES and path.loop_start is not None:
            state = "system state" if self.hooks.system_state is not None else "state"
            return (
                f"steps {path.loop_start + 1}-{len(path)} lead back to the {state} after step"
                f" {path.loop_start}: they can repeat for ever"
            )
        return None

    def _chain(self, j: int) -> list[int]:
        """State indices from the init state to ``j`` along BFS parents."""
        chain = [j]
        while self.parent[chain[-1]] >= 0:
            chain.append(self.parent[chain[-1]])
        chain.reverse()
        return chain

    def _path_to(self, j: int) -> Path:
        return self._trace(self._chain(j), None)

    def _trace(self, chain: list[int], loop_start: int | None) -> Path:
        """The path along the explored states ``chain`` (a lasso if ``loop_start`` is set:
        the last state is then the one at ``loop_start``); concrete states of the model
        when the search explored representatives."""
        names = [
            str(self.via[w]) if self.parent[w] == u else self._action_between(u, w)
            for u, w in pairwise(chain)
        ]
        if self._canon is not None:
            return self._concrete(chain, names, loop_start)
        states = [self.states[k] for k in chain]
        return self._make_path(chain[0], states, names, loop_start)

    def _make_path(
        self, init_index: int, states: list[Any], names: list[str], loop_start: int | None
    ) -> Path:
        fmt, describe = self.hooks.format_state, self.hooks.describe_step
        if describe is None:
            steps = tuple(Step(n, fmt(s)) for n, s in zip(names, states[1:], strict=True))
        else:
            steps = tuple(
                Step(n, fmt(t), describe(s, self._named(s, n, t), t))
                for n, s, t in zip(names, states[:-1], states[1:], strict=True)
            )
        kind = Path if loop_start is None else Lasso
        return kind(fmt(states[0]), steps, init_index, loop_start, tuple(states))

    def _named(self, state: Any, name: str, nxt: Any) -> Any:
        """The action called ``name`` that leads from ``state`` to ``nxt``."""
        for action in self.model.actions(state):
            if str(action) == name and self.model.next_state(state, action) == nxt:
                return action
        raise ModelError(  # only reachable if the model is not deterministic
            f"model is not deterministic: step {name!r} of a path disappeared", None, name
        )

    def _action_between(self, u: int, w: int) -> str:
        """Name of the first action of state ``u`` leading to state ``w`` (models are pure;
        under symmetry, to a state whose representative is ``w``)."""
        src, dst = self.states[u], self.states[w]
        canon = self._canon or (lambda s: s)
        for action in self.model.actions(src):
            t = self.model.next_state(src, action)
            if t is not None and canon(t) == dst:
                return str(action)
        raise ModelError(  # only reachable if the model is not deterministic
            "model is not deterministic: an explored edge disappeared", self._path_to(u), None
        )

    def _concrete(self, chain: list[int], names: list[str], loop_start: int | None) -> Path:
        """The concrete path of the model that ``chain`` (representatives) stands for: from
        the initial state whose representative is ``chain[0]``, at each step the action
        (preferring the one named as in ``names``) whose successor has the next
        representative. A loop is gone round again until a concrete system state
        (``system_state``) repeats (at most as many times as the orbit has states).
        :class:`ModelError` if some step has no such action: the declared symmetry is
        not one."""
        canon, model = self._canon, self.model
        assert canon is not None
        want = [self.states[k] for k in chain]
        inits = list(dict.fromkeys(model.init_states()))
        init_index = next((i for i, s in enumerate(inits) if canon(s) == want[0]), None)
        if init_index is None:
            raise ModelError("the declared symmetry is not one: no initial state fits", None, None)
        states: list[Any] = [inits[init_index]]
        steps: list[str] = []
        loop = [] if loop_start is None else list(range(loop_start, len(names)))
        plan = list(range(len(names)))
        laps: dict[Any, int] = {}
        system = self.hooks.system_state or _same
        while plan:
            k = plan.pop(0)
            state, target = states[-1], want[k + 1]
            successors = [
                (str(a), t)
                for a in model.actions(state)
                if (t := model.next_state(state, a)) is not None and canon(t) == target
            ]
            if not successors:
                path = self._make_path(init_index, states, steps, None)
                raise ModelError(
                    f"the declared symmetry is not one: no concrete step stands for {names[k]!r}",
                    path,
                    names[k],
                )
            name, nxt = next((s for s in successors if s[0] == names[k]), successors[0])
            states.append(nxt)
            steps.append(name)
            if loop and k == loop[-1]:  # a lap ends on a state of the loop start's orbit
                here = system(nxt)
                if here in laps or here == system(states[loop_start or 0]):
                    start = laps.get(here, loop_start)
                    return self._make_path(init_index, states, steps, start)
                laps[system(states[-len(loop) - 1])] = len(states) - len(loop) - 1
                laps[here] = len(states) - 1
                plan = list(loop)
        return self._make_path(init_index, states, steps, None)

    def _lasso(self) -> Lasso | None:
        """Shortest path to the least-depth state on a cycle, then the shortest cycle back."""
        if not self._lasso_searched:
            self._lasso_searched = True
            self._lasso_found = self._find_lasso()
        return self._lasso_found

    def _find_lasso(self) -> Lasso | None:
        comp, cyclic = cyclic_components(len(self.states), self.offsets, self.edges)
        if not cyclic:  # no cycle of states: none of system states either (their contract)
            return None
        if self.hooks.system_state is not None:
            return self._find_system_lasso(self.hooks.system_state)
        entry = next((v for v in range(len(self.states)) if comp[v] in cyclic), None)
        if entry is None:
            return None
        loop = shortest_cycle(entry, comp, self.offsets, self.edges)
        prefix = self._chain(entry)
        lasso = self._trace(prefix + loop[1:], len(prefix) - 1)
        assert isinstance(lasso, Lasso)
        return lasso

    def _find_system_lasso(self, system: Callable[[Any], Hashable]) -> Lasso | None:
        """The shortest lasso over the model's system states (``system_state``: what only
        records, a property monitor, projected out): the least-depth system state on a
        cycle of the projected graph, the shortest projected cycle through it, walked
        along explored edges from the first explored state of that system state; then
        round that loop again until a whole state repeats, which proves the loop a real
        cycle of the model (the projection's contract makes it one)."""
        n = len(self.states)
        offsets, edges = self.offsets, self.edges
        ids: dict[Hashable, int] = {}
        kid = [ids.setdefault(system(s), len(ids)) for s in self.states]
        succ: list[dict[int, None]] = [{} for _ in ids]
        for v in range(n):
            out = succ[kid[v]]
            for w in edges[offsets[v] : offsets[v + 1]]:
                out[kid[w]] = None
        p_offsets, p_edges = array("i", [0]), array("i")
        for out in succ:
            p_edges.extend(out)
            p_offsets.append(len(p_edges))
        comp, cyclic = cyclic_components(len(ids), p_offsets, p_edges)
        entry = next(
            (v for v in range(n) if comp[kid[v]] in cyclic and offsets[v + 1] > offsets[v]),
            None,
        )
        if entry is None:
            return None
        keys = shortest_cycle(kid[entry], comp, p_offsets, p_edges)
        loop = [entry]
        for k in keys[1:]:
            loop.append(self._successor_with(loop[-1], k, kid))
        self._closes(loop, kid)
        prefix = self._chain(entry)
        lasso = self._trace(prefix + loop[1:], len(prefix) - 1)
        assert isinstance(lasso, Lasso)
        return lasso

    def _successor_with(self, v: int, k: int, kid: Sequence[int]) -> int:
        """The first explored successor of state ``v`` whose system state is number ``k``;
        :class:`ModelError` if none: the model's ``system_state`` is not a projection."""
        for w in self.edges[self.offsets[v] : self.offsets[v + 1]]:
            if kid[w] == k:
                return w
        raise ModelError(
            "model.system_state is not a projection: two states of one system state"
            " have different successors",
            self._path_to(v),
            None,
        )

    def _closes(self, loop: list[int], kid: Sequence[int]) -> None:
        """Go round ``loop`` (explored indices whose system states close a cycle) again and
        again until a whole state repeats: the cycle of the model it stands for. At most
        as many laps as explored states share the loop's first system state."""
        seen = {loop[-1]}
        v = loop[-1]
        for _ in range(kid.count(kid[loop[0]])):
            for u in loop[1:]:
                v = self._successor_with(v, kid[u], kid)
            if v in seen:
                return
            seen.add(v)
        raise ModelError(  # unreachable under the projection's contract
            "model.system_state is not a projection: a loop of system states never"
            " closes a cycle of states",
            self._path_to(loop[0]),
            None,
        )


def _same(state: Any) -> Any:
    return state


def cyclic_components(
    n: int, offsets: Sequence[int], edges: Sequence[int]
) -> tuple[list[int], set[int]]:
    """Iterative Tarjan over the CSR graph: (component id per node, ids of cyclic components).

    A component is cyclic if it has more than one node or a self-loop. No recursion, so it is
    safe on graphs with millions of nodes.
    """
    order = [-1] * n  # discovery number
    low = [0] * n
    comp = [-1] * n
    cursor = [0] * n
    on_stack = bytearray(n)
    stack: list[int] = []
    cyclic: set[int] = set()
    counter = n_comp = 0
    for root in range(n):
        if order[root] >= 0:
            continue
        order[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        cursor[root] = offsets[root]
        work = [root]
        while work:
            v = work[-1]
            p, end = cursor[v], offsets[v + 1]
            while p < end:
                w = edges[p]
                p += 1
                if order[w] < 0:
                    cursor[v] = p
                    order[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    cursor[w] = offsets[w]
                    work.append(w)
                    break
                if on_stack[w] and order[w] < low[v]:
                    low[v] = order[w]
            else:
                work.pop()
                if low[v] == order[v]:
                    size = 0
                    while True:
                        w = stack.pop()
                        on_stack[w] = 0
                        comp[w] = n_comp
                        size += 1
                        if w == v:
                            break
                    if size > 1 or v in edges[offsets[v] : offsets[v + 1]]:
                        cyclic.add(n_comp)
                    n_comp += 1
                if work and low[v] < low[work[-1]]:
                    low[work[-1]] = low[v]
    return comp, cyclic


def shortest_cycle(
    v: int, comp: Sequence[int], offsets: Sequence[int], edges: Sequence[int]
) -> list[int]:
    """Nodes of a shortest cycle through ``v`` (``v`` first and last), searched by BFS inside
    ``v``'s component. ``v`` must be on a cycle."""
    c = comp[v]
    came_from = {v: -1}
    queue = [v]
    for u in queue:
        for w in edges[offsets[u] : offsets[u + 1]]:
            if w == v:
                cycle = [v]
                while u != -1:
                    cycle.append(u)
                    u = came_from[u]
                cycle.reverse()
                return cycle
            if comp[w] == c and w not in came_from:
                came_from[w] = u
                queue.append(w)
    raise ValueError(f"state {v} is on no cycle")


class CheckOptions(TypedDict, total=False):
    """The keywords of :class:`Checker` and :func:`check`; see :class:`Checker` for what
    each means and its default."""

    max_states: int | None
    max_depth: int | None
    progress: ProgressFn | bool | None
    symmetry: bool
    memory_warning: float | None


def check(model: Model[S, A], **options: Unpack[CheckOptions]) -> Report:
    """``Checker(model, **options).run()``: explore ``model`` and return its :class:`Report`."""
    return Checker(model, **options).run()


def _physical_memory() -> int | None:
    """The machine's physical memory in bytes, None where the platform does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _peak_memory() -> int:
    """The process's peak resident memory in bytes (0 where the platform does not say)."""
    if resource is None:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB"
