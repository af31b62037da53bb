"""Typed inputs of the renderer besides :class:`~fsm.machines.spec.MachineSpec`.

:class:`StateGraph` is a generic explored state graph (for instance the reachable
product a model checker found): nodes carry a ``group`` used to cluster them (e.g. the
transport state) and ``initial``/``terminal``/``bad`` flags used to style them.

:class:`Trace` is a path through a machine or a state graph: a sequence of
``(src, label, dst)`` steps, optionally a lasso whose loop starts at ``loop_start``.
Its conventions match the model checker's paths: step numbers are 1-based, ``loop_start``
is the 0-based index of the first step of the loop, so ``steps[loop_start:]`` go round
the cycle once and the last step ends where ``steps[loop_start]`` starts.

Both validate on construction and raise :class:`ValueError` (:class:`TraceError` for
traces) naming the offending element.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One state of a :class:`StateGraph`.

    ``id`` is unique in the graph (for checker output use the formatted state, so a
    checker path maps onto it directly); ``label`` is what is drawn (defaults to
    ``id``); nodes with the same non-empty ``group`` are drawn in one cluster, nodes
    with the same non-empty ``row`` side by side (clusters as columns, rows across them:
    a grid).
    """

    id: str
    label: str = ""
    group: str = ""
    initial: bool = False
    terminal: bool = False
    bad: bool = False
    row: str = ""

    @property
    def text(self) -> str:
        """The drawn label: ``label`` or, if empty, ``id``."""
        return self.label or self.id


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """A labelled edge ``src -> dst`` between two node ids of a :class:`StateGraph`."""

    src: str
    dst: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class StateGraph:
    """A generic explored state graph; node and edge order is the drawing order.

    Raises :class:`ValueError` on duplicate node ids or edges naming unknown nodes
    (checked in time linear in the nodes and edges).
    """

    name: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    doc: str = ""

    def __post_init__(self) -> None:
        known: set[str] = set()
        dupes: set[str] = set()
        for n in self.nodes:  # one pass: a graph may have many thousand nodes
            (dupes if n.id in known else known).add(n.id)
        problems = [f"duplicate node id {i!r}" for i in sorted(dupes)]
        for e in self.edges:
            problems += [
                f"edge {e.src!r} -[{e.label}]-> {e.dst!r}: unknown node {end!r}"
                for end in (e.src, e.dst)
                if end not in known
            ]
        if problems:
            raise ValueError(f"state graph {self.name!r}: " + "; ".join(problems))

    @property
    def groups(self) -> tuple[str, ...]:
        """The non-empty groups, in order of first appearance."""
        return tuple(dict.fromkeys(n.group for n in self.nodes if n.group))

    @property
    def rows(self) -> tuple[str, ...]:
        """The non-empty rows, in order of first appearance."""
        return tuple(dict.fromkeys(n.row for n in self.nodes if n.row))

    def node(self, node_id: str) -> GraphNode:
        """The node called ``node_id`` (:class:`KeyError` if absent)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


class TraceError(ValueError):
    """A trace is malformed or does not fit the diagram it should highlight."""


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of a trace: ``label`` (a trigger or action name) leads ``src`` to ``dst``."""

    src: str
    label: str
    dst: str


class _StepLike(Protocol):
    @property
    def action(self) -> str: ...
    @property
    def state(self) -> str: ...


class PathLike(Protocol):
    """What :meth:`Trace.from_path` reads: the shape of the model checker's paths."""

    @property
    def init(self) -> str: ...
    @property
    def steps(self) -> Sequence[_StepLike]: ...
    @property
    def loop_start(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Trace:
    """A path of chained steps; a lasso when ``loop_start`` is set.

    Contract (checked on construction, :class:`TraceError` otherwise): each step starts
    where the previous one ended; if ``loop_start`` is set, ``0 <= loop_start < len(steps)``
    and the last step ends at ``steps[loop_start].src``. ``numbers`` (empty: ``1..n``) are
    the steps' numbers in the path they were drawn from, one per step, increasing: a
    projection that folds steps keeps the numbers of the text trace. ``violates`` is the
    state where the property breaks (a counterexample's last state; a lasso's loop start;
    "": not marked), a state the trace visits; ``why`` says what breaks it.
    """

    steps: tuple[TraceStep, ...]
    loop_start: int | None = None
    title: str = ""
    numbers: tuple[int, ...] = ()
    violates: str = ""
    why: str = ""

    def __post_init__(self) -> None:
        for number, (before, after) in enumerate(
            zip(self.steps, self.steps[1:], strict=False), start=2
        ):
            if before.dst != after.src:
                raise TraceError(
                    f"step {number} starts at {after.src!r}, but step {number - 1} "
                    f"ended at {before.dst!r}"
                )
        if self.numbers and (
            len(self.numbers) != len(self.steps)
            or self.numbers[0] < 1
            or any(a >= b for a, b in zip(self.numbers, self.numbers[1:], strict=False))
        ):
            raise TraceError(
                f"numbers {self.numbers} are not {len(self.steps)} increasing step numbers"
            )
        if self.violates and self.violates not in self.visited:
            raise TraceError(f"the violating state {self.violates!r} is not on the trace")
        if self.loop_start is not None:
            if not 0 <= self.loop_start < len(self.steps):
                raise TraceError(f"loop_start {self.loop_start} outside 0..{len(self.steps) - 1}")
            back = self.steps[self.loop_start].src
            if self.steps[-1].dst != back:
                raise TraceError(
                    f"the loop does not close: the last step ends at {self.steps[-1].dst!r}, "
                    f"the loop starts at {back!r}"
                )

    @classmethod
    def of(
        cls,
        steps: Iterable[tuple[str, str, str]],
        loop_start: int | None = None,
        title: str = "",
        numbers: Sequence[int] = (),
        violates: str = "",
        why: str = "",
    ) -> Trace:
        """A trace from ``(src, label, dst)`` triples."""
        return cls(
            tuple(TraceStep(*s) for s in steps), loop_start, title, tuple(numbers), violates, why
        )

    @classmethod
    def from_path(cls, path: PathLike, title: str = "") -> Trace:
        """A trace from a checker path (``init``, ``steps`` of ``action``/``state``)."""
        states = [path.init, *(s.state for s in path.steps)]
        triples = [(states[i], s.action, states[i + 1]) for i, s in enumerate(path.steps)]
        return cls.of(triples, path.loop_start, title)

    def in_loop(self, index: int) -> bool:
        """Whether the step at 0-based ``index`` belongs to the loop."""
        return self.loop_start is not None and index >= self.loop_start

    def number(self, index: int) -> int:
        """The number of the step at 0-based ``index`` (see ``numbers``; 1-based)."""
        return self.numbers[index] if self.numbers else index + 1

    @property
    def last_number(self) -> int:
        """The number of the last step (0 for an empty trace)."""
        return self.number(len(self.steps) - 1) if self.steps else 0

    def step_label(self, index: int, text: str) -> str:
        """The drawn label of the step at 0-based ``index``: ``"n. text"`` with its
        :meth:`number`, loop steps suffixed with ``" (loop)"``."""
        suffix = " (loop)" if self.in_loop(index) else ""
        return f"{self.number(index)}. {text}{suffix}"

    @property
    def visited(self) -> tuple[str, ...]:
        """Every state the trace touches, in order of first visit."""
        ends = [e for s in self.steps for e in (s.src, s.dst)]
        return tuple(dict.fromkeys(ends))
