"""The conformance kit's time to the first shrunk failure against naive clients.

``kit_first_failure_s``: the worst, over the kit's reference naive clients (the mcp 2.3.0
client's behaviour, the guard without de-duplication), of the median over 5 random runs
of ``run_state_machine_as_test`` under the default ``fsm-fast`` profile (no example
database) until it raises its first, shrunk, violation (target <= 20 s). Side by side,
one run against the mcp 2.3.0 client (several bugs) with hypothesis's default reporting
(every distinct bug, each explained), which the profile no longer does:
``kit_first_failure_explained_over_fast`` (over that client's fast median).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench.results import record, table

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hypothesis import Phase, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from fsm.testing import NoDedupGuard, Sdk230Client, conformance_machine  # noqa: E402
from fsm.testing.kit import ClientFactory, ConformanceFailure, kit_settings  # noqa: E402

CLIENTS: dict[str, ClientFactory] = {"mcp 2.3.0 client": Sdk230Client, "no dedup": NoDedupGuard}
RUNS = 5


def _seconds(factory: ClientFactory, chosen: settings) -> float:
    start = time.perf_counter()
    try:
        run_state_machine_as_test(conformance_machine(factory), settings=chosen)
    except (ConformanceFailure, ExceptionGroup):
        return time.perf_counter() - start
    raise AssertionError("the kit found nothing against a naive client")


def main() -> None:
    fast = settings(kit_settings("fsm-fast"), database=None)
    explained = settings(fast, report_multiple_bugs=True, phases=tuple(Phase))
    rows = []
    medians = {}
    for name, factory in CLIENTS.items():
        medians[name] = statistics.median(_seconds(factory, fast) for _ in range(RUNS))
        rows.append((f"{name}: fsm-fast (median of {RUNS})", medians[name]))
    sdk = "mcp 2.3.0 client"
    before = _seconds(CLIENTS[sdk], explained)
    rows.append((f"{sdk}: every bug, explained (1 run)", before))
    table(rows, header=("time to the first shrunk failure", "s"))
    record("kit_first_failure_s", max(medians.values()), "s")
    record("kit_first_failure_explained_over_fast", before / medians[sdk], "ratio")


if __name__ == "__main__":
    main()
