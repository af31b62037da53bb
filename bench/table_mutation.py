"""Row mutation of the classification tables: ``python -m bench.table_mutation``.

mutmut cannot mutate the tables (:data:`fsm.outcomes.DEFAULT_RULES`,
:data:`fsm.outcomes.RESUME_RULES`, :data:`fsm.mrtr.outcomes.MRTR_RULES`): they are built
while their module is imported, before a mutant is switched on. This bench mutates them
row by row instead. For every row of every table, one mutant at a time:

* ``remove``: the table without the row (what it matched falls to a later row, or to
  ``unclassified``);
* ``-> CLASS``: the row's verdict changed to each other :class:`~fsm.outcomes.OutcomeClass`;
* ``-> scope``: a terminal row's scope swapped (``request`` <-> ``session``; the answer and
  resume tables only: nothing reads a round's scope);
* ``-> patient``: a retryable resume row's patience flipped (only those: the classifier
  drops patience from any other row, and only resumes read it).

Each mutant is switched on by patching :meth:`fsm.outcomes.Classifier.classify`: a
classifier whose rows end with the table (the default ones, one extended by
``with_rules``, the MRTR call's) classifies with the mutated table instead. Then the
tests of :data:`TESTS` run in this process (``pytest -x``); the mutant is *killed* when a
test fails. A mutant no test kills is a gap in the tests.

It prints one line per survivor and writes the figures under ``"tables"`` in
``bench/mutation.json``, beside mutmut's: mutants, killed, survivors by name, and the
verdict of every mutant of every row (``tests/core/test_table_mutation.py`` checks that
every row is listed and every mutant killed, and runs ``--sample``: one mutant per table).
Exit status 1 when a mutant survives. A full run takes about 35 s on one core (each
mutant collects the tests again); not part of CI.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from fsm.mrtr.outcomes import MRTR_RULES
from fsm.outcomes import RESUME_RULES, Classification, Classifier, OutcomeClass, Rule, Scope

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "mutation.json"

TESTS = (
    "tests/core/test_outcomes.py",
    "tests/core/test_mrtr_outcomes.py",
    "tests/core/test_patience.py",
    "tests/core/test_outcome_records.py",
)
"""The tests each mutant runs: the tables' own, the guard's and the MRTR call's use of
them."""


def tables() -> dict[str, tuple[Rule, ...]]:
    """The tables, by name: ``answers``, ``resumes``, ``mrtr``."""
    from fsm.outcomes import DEFAULT_RULES

    return {"answers": DEFAULT_RULES, "resumes": RESUME_RULES, "mrtr": MRTR_RULES}


@dataclass(frozen=True)
class Mutant:
    """One mutation of one row: ``table`` and row ``index`` (named ``row``), ``change``
    (``remove``, ``-> terminal``, ...) and the mutated table ``rules``."""

    table: str
    index: int
    row: str
    change: str
    rules: tuple[Rule, ...]

    @property
    def name(self) -> str:
        """``answers[3] http-400: -> retryable``."""
        return f"{self.table}[{self.index}] {self.row}: {self.change}"


def mutants() -> list[Mutant]:
    """Every mutant of every row of every table (see the module docstring)."""
    made: list[Mutant] = []
    for table, rules in tables().items():
        for i, rule in enumerate(rules):
            changes: list[tuple[str, Rule | None]] = [("remove", None)]
            for other in OutcomeClass:
                if other is not rule.outcome:
                    changes.append((f"-> {other.value}", replace(rule, outcome=other)))
            if table != "mrtr" and rule.outcome is OutcomeClass.TERMINAL:
                scope: Scope = "request" if rule.scope == "session" else "session"
                changes.append((f"-> {scope}", replace(rule, scope=scope)))
            if table == "resumes" and rule.outcome is OutcomeClass.RETRYABLE:
                changes.append(
                    (f"-> patient={not rule.patient}", replace(rule, patient=not rule.patient))
                )
            for change, row in changes:
                mutated = rules[:i] + ((row,) if row is not None else ()) + rules[i + 1 :]
                made.append(Mutant(table, i, rule.name, change, mutated))
    return made


@contextlib.contextmanager
def switched_on(mutant: Mutant) -> Iterator[None]:
    """Classify with ``mutant``'s table wherever a classifier's rows end with the table it
    mutates (see the module docstring)."""
    original = tables()[mutant.table]
    classify = Classifier.classify
    size = len(original)

    def mutated(self: Classifier, result: Any) -> Classification:
        rules = self.rules
        if len(rules) >= size and rules[len(rules) - size :] == original:
            self = replace(self, rules=rules[: len(rules) - size] + mutant.rules)
        return classify(self, result)

    Classifier.classify = mutated  # type: ignore[method-assign]
    try:
        yield
    finally:
        Classifier.classify = classify  # type: ignore[method-assign]


def killed(mutant: Mutant | None) -> bool:
    """Whether a test of :data:`TESTS` fails with ``mutant`` switched on (None: none)."""
    args = [*(str(ROOT / t) for t in TESTS), "-x", "-q", "-p", "no:cacheprovider"]
    args += ["-p", "no:randomly", "-n", "0", "-W", "ignore::DeprecationWarning"]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        if mutant is None:
            code = pytest.main(args)
        else:
            with switched_on(mutant):
                code = pytest.main(args)
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"the tests did not run ({code!r}):\n{sink.getvalue()[-2000:]}")
    return code == pytest.ExitCode.TESTS_FAILED


def run(chosen: list[Mutant]) -> dict[str, Any]:
    """Run ``chosen``; the figures ``"tables"`` holds in ``bench/mutation.json``."""
    if killed(None):
        raise RuntimeError("the tests fail without a mutant: fix them first")
    start = time.monotonic()
    rows: dict[str, dict[str, dict[str, str]]] = {}
    survivors: list[str] = []
    for mutant in chosen:
        verdict = "killed" if killed(mutant) else "survived"
        if verdict == "survived":
            survivors.append(mutant.name)
            print("survived:", mutant.name)
        row = rows.setdefault(mutant.table, {}).setdefault(f"{mutant.index} {mutant.row}", {})
        row[mutant.change] = verdict
    return {
        "mutants": len(chosen),
        "killed": len(chosen) - len(survivors),
        "survived": survivors,
        "wall_s": round(time.monotonic() - start),
        "tests": list(TESTS),
        "rows": rows,
    }


def sample() -> list[Mutant]:
    """One mutant per table: the verdict of its middle row changed (a quick look that the
    machinery kills; ``--sample`` runs them and writes nothing)."""
    chosen: list[Mutant] = []
    for table, rules in tables().items():
        middle = rules[len(rules) // 2].name
        chosen.append(next(m for m in mutants() if m.table == table and m.row == middle))
    return chosen


def main(argv: list[str]) -> int:
    if argv == ["--sample"]:
        figures = run(sample())
        print(f"{figures['killed']} of {figures['mutants']} sampled row mutants killed")
        return 1 if figures["survived"] else 0
    if argv:
        print("usage: python -m bench.table_mutation [--sample]", file=sys.stderr)
        return 2
    figures = run(mutants())
    out = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    out["tables"] = figures
    OUT.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(
        f"{figures['killed']} of {figures['mutants']} row mutants killed"
        f" in {figures['wall_s']} s; figures in {OUT.relative_to(ROOT)}"
    )
    return 1 if figures["survived"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
