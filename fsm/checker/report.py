"""The result of a run: :class:`Report` (counts, verdicts, counterexamples, coverage), its JSON
and text forms, and the :class:`Progress` line printed during long runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from fsm.checker.path import Path
from fsm.checker.properties import Kind, Verdict

PARTIAL = "(by the example found; the search was partial)"
MARKS = {Verdict.HOLDS: "✓", Verdict.VIOLATED: "✗", Verdict.VACUOUS: "✗", Verdict.UNKNOWN: "?"}


@dataclass(frozen=True)
class PropertyResult:
    """The verdict on one property; ``path`` is the counterexample (or, for a ``sometimes``
    that holds, the example found).

    For a violation, ``why`` says in words what breaks the property (the model's ``why``
    hook: the values that break it; else, for a deadlock or a lasso, where the path
    sticks or loops) and ``at`` is the number of the state that violates: the last one
    (an invariant broken, a stuck state), or for a lasso the state its loop starts from
    (0 = the initial state). Both None otherwise."""

    name: str
    kind: Kind
    description: str
    verdict: Verdict
    path: Path | None = None
    why: str | None = None
    at: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "kind": self.kind.value,
            "description": self.description,
            "why": self.why,
            "at": self.at,
            "counterexample": self.path.to_json() if self.path is not None else None,
        }

    def format_text(self, partial: bool = False) -> str:
        """The verdict line (and trace). ``partial``: the run hit a bound, so a property
        that holds says it holds by the example found in a partial search."""
        desc = f": {self.description}" if self.description else ""
        head = f"  {MARKS[self.verdict]} {self.name} {self.verdict.value}{desc}"
        if partial and self.verdict is Verdict.HOLDS:
            head += f" {PARTIAL}"
        if self.why is not None:
            head += f"\n    why: {self.why}"
        if self.path is None:
            return head
        label = "example" if self.verdict is Verdict.HOLDS else "counterexample"
        shape = "lasso, " if self.path.loop_start is not None else ""
        trace = self.path.format_text("    ")
        count = f"{len(self.path)} step{'' if len(self.path) == 1 else 's'}"
        return f"{head}\n    {label} ({shape}{count}):\n{trace}"


@dataclass(frozen=True)
class Coverage:
    """Declared transitions that some explored edge fired, and those that never fired."""

    fired: tuple[str, ...]
    never_fired: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    """Everything a run established. When ``complete`` is False a bound was hit: violations
    found are real, but no invariant, deadlock or termination property is reported as holding
    (their verdict is ``unknown``) and ``never_fired`` only means "not fired within the bound".
    A ``sometimes`` whose example was found still holds: the example is a real path.

    With ``symmetry`` the run explored one representative per orbit: ``states`` and
    ``transitions`` count representatives and their edges, and ``represented`` the states
    of the full space they stand for (None when the model declares no orbit sizes).

    ``bound`` names the bound that stopped an incomplete run (``"max_states=2000000"``,
    ``"max_depth=5"``); None for a complete one."""

    model: str
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    results: tuple[PropertyResult, ...]
    coverage: Coverage
    symmetry: bool = False
    represented: int | None = None
    bound: str | None = None

    @property
    def ok(self) -> bool:
        """True when every property holds (which needs a complete run)."""
        return all(r.verdict.ok for r in self.results)

    def result(self, name: str) -> PropertyResult:
        """The result for property ``name`` (KeyError listing the known names if absent)."""
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no property {name!r} (known: {', '.join(r.name for r in self.results)})")

    def counterexample(self, name: str) -> Path | None:
        """The counterexample found for ``name``, None if it was not violated."""
        r = self.result(name)
        return r.path if r.verdict is Verdict.VIOLATED else None

    def failures(self) -> list[PropertyResult]:
        """Results that are not HOLDS (violated, vacuous or unknown)."""
        return [r for r in self.results if not r.verdict.ok]

    def assert_properties(self) -> None:
        """Raise AssertionError listing every property that does not hold, with its trace."""
        bad = self.failures()
        if bad:
            body = "\n".join(r.format_text() for r in bad)
            raise AssertionError(f"{self.summary()}\n{body}")

    def assert_violated(self, name: str) -> Path:
        """Raise AssertionError unless ``name`` was violated; return its counterexample."""
        path = self.counterexample(name)
        if path is None:
            verdict = self.result(name).verdict.value
            raise AssertionError(f"{self.model}: {name} was not violated (verdict: {verdict})")
        return path

    def summary(self) -> str:
        """TLC/Stateright-style one-liner: counts, depth, time and completeness."""
        hit = f"{self.bound} hit" if self.bound else "bound hit"
        status = "complete" if self.complete else f"INCOMPLETE ({hit}; nothing proved)"
        stands = ""
        if self.symmetry:
            full = "?" if self.represented is None else str(self.represented)
            stands = f" (representatives of {full} under symmetry)"
        return (
            f"{self.model}: states={self.states}{stands} transitions={self.transitions} "
            f"depth={self.depth} seconds={self.seconds:.2f} {status}"
        )

    def brief_line(self, expected: Collection[str] = ()) -> str:
        """One line: the summary and how many properties hold; with ``expected`` (the
        model's ``expected_violations``, when it violates exactly those) says so."""
        total = len(self.results)
        if expected:
            return (
                f"{self.summary()}: violates {', '.join(sorted(expected))} as declared, "
                f"the other {total - len(expected)} hold"
            )
        holding = total - len(self.failures())
        partial = f" {PARTIAL}" if holding and not self.complete else ""
        return f"{self.summary()}: {holding}/{total} properties hold{partial}"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "states": self.states,
            "transitions": self.transitions,
            "depth": self.depth,
            "seconds": round(self.seconds, 6),
            "complete": self.complete,
            "bound": self.bound,
            "symmetry": self.symmetry,
            "represented": self.represented,
            "properties": {r.name: r.to_json() for r in self.results},
            "coverage": {
                "fired": list(self.coverage.fired),
                "never_fired": list(self.coverage.never_fired),
            },
        }

    def format_text(self) -> str:
        partial = not self.complete
        lines = [self.summary()] + [r.format_text(partial) for r in self.results]
        cov = self.coverage
        total = len(cov.fired) + len(cov.never_fired)
        if total:
            lines.append(f"  coverage: {len(cov.fired)}/{total} declared transitions fired")
            if cov.never_fired:
                lines.append(f"  never fired (dead declarations): {', '.join(cov.never_fired)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Progress:
    """A snapshot of a running exploration (TLC-style progress line): ``model`` names the
    model; under symmetry ``represented`` counts the full-space states the ``states``
    explored so far stand for (None without symmetry or orbit sizes)."""

    states: int
    transitions: int
    depth: int
    queue: int
    seconds: float
    model: str = ""
    represented: int | None = None

    @property
    def rate(self) -> float:
        """Distinct states per second so far."""
        return self.states / self.seconds if self.seconds > 0 else 0.0

    def format(self) -> str:
        name = f" {self.model}" if self.model else ""
        stands = ""
        if self.represented is not None and self.seconds > 0:
            full = self.represented / self.seconds
            stands = f" (standing for {self.represented:,}: {full:,.0f}/s)"
        return (
            f"progress{name}: states={self.states:,}{stands} depth={self.depth} "
            f"queue={self.queue:,} transitions={self.transitions:,} "
            f"states/s={self.rate:,.0f} ({self.seconds:.0f}s)"
        )


ProgressFn = Callable[[Progress], None]


def print_progress(progress: Progress) -> None:
    """Write the progress line to stderr."""
    print(progress.format(), file=sys.stderr, flush=True)
