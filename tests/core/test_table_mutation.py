"""Row mutation of the classification tables (``bench/table_mutation.py``): the figures in
``bench/mutation.json`` list every row of every table with each of its mutants killed, a
mutant reaches every classifier built from its table, and a sample of them is killed by
the tests when run now."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import table_mutation as tm
from fsm.mrtr.outcomes import MRTR_CLASSIFIER
from fsm.outcomes import Classifier, OutcomeClass, Rule, SubmissionResult
from fsm.sse.guard import GuardConfig

ROOT = Path(__file__).resolve().parents[2]


def test_the_figures_list_every_row_of_every_table_with_each_mutant_killed() -> None:
    figures = json.loads(tm.OUT.read_text(encoding="utf-8"))["tables"]
    expected: dict[str, dict[str, dict[str, str]]] = {}
    for mutant in tm.mutants():
        row = expected.setdefault(mutant.table, {}).setdefault(f"{mutant.index} {mutant.row}", {})
        row[mutant.change] = "killed"
    assert figures["rows"] == expected, "a table changed: run python -m bench.table_mutation"
    assert figures["survived"] == []
    assert figures["killed"] == figures["mutants"] == len(tm.mutants())
    assert {t: len(rows) for t, rows in expected.items()} == {
        t: len(rules) for t, rules in tm.tables().items()
    }


def _mutant(table: str, row: str, change: str) -> tm.Mutant:
    return next(m for m in tm.mutants() if (m.table, m.row, m.change) == (table, row, change))


def test_a_mutant_reaches_every_classifier_built_from_its_table() -> None:
    gone = SubmissionResult(404)
    own = Rule("mine", lambda r: r.status == 418, OutcomeClass.RETRYABLE)
    answers = [Classifier(), GuardConfig().classifier, Classifier().with_rules(own)]
    with tm.switched_on(_mutant("answers", "http-404", "-> request")):
        assert {c.classify(gone).scope for c in answers} == {"request"}
        assert Classifier.for_resumes().classify(gone).scope == "session"  # another table
    assert {c.classify(gone).scope for c in answers} == {"session"}
    with tm.switched_on(_mutant("mrtr", "http-404", "remove")):
        assert MRTR_CLASSIFIER.classify(gone).rule == "other-4xx"
    assert MRTR_CLASSIFIER.classify(gone).rule == "http-404"


def test_a_sample_of_row_mutants_is_killed_by_the_tests_now() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "bench.table_mutation", "--sample"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 of 3 sampled row mutants killed" in done.stdout
