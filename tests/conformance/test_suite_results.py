"""How the conformance tests read and compare the suite's results (no suite run): the
result directories, check-by-check differences, and the expected failures, stale
entries included."""

from __future__ import annotations

import json
from pathlib import Path

from support.conformance_suite import Results, differences, failures, off_baseline, read_results

RUN: Results = {
    "ping": (("ping", "SUCCESS"),),
    "tools-call-sampling": (("tools-call-sampling", "FAILURE"),),
    "server-sse-polling": (
        ("incoming-sse-event", "INFO"),
        ("server-sse-retry-field", "WARNING"),
        ("server-sse-reconnect", "SUCCESS"),
    ),
}


def test_results_are_read_per_scenario_in_the_suites_order(tmp_path: Path) -> None:
    """Server mode prefixes ``server-``, client mode does not; each directory's checks
    keep their order; a directory without checks is left out."""
    rows = [{"id": "b", "status": "INFO"}, {"id": "a", "status": "FAILURE"}]
    for name in (
        "server-tools-call-image-2026-12-04T19-16-31-657Z",
        "sse-retry-2026-12-04T19-26-46-607Z",
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "checks.json").write_text(json.dumps(rows))
    (tmp_path / "server-ping-2026-12-04T19-16-31-657Z").mkdir()
    assert read_results(tmp_path) == {
        "tools-call-image": (("b", "INFO"), ("a", "FAILURE")),
        "sse-retry": (("b", "INFO"), ("a", "FAILURE")),
    }


def test_any_verdict_order_info_count_or_scenario_that_differs_is_a_difference() -> None:
    assert differences(RUN, dict(RUN)) == []
    info, warning, success = RUN["server-sse-polling"]
    changed = {**RUN, "ping": (("ping", "FAILURE"),)}
    reordered = {**RUN, "server-sse-polling": (info, success, warning)}
    info_lost = {**RUN, "server-sse-polling": (warning, success)}
    info_added = {**RUN, "server-sse-polling": (info, info, warning, success)}
    missing = {k: v for k, v in RUN.items() if k != "ping"}
    for other in (changed, reordered, info_lost, info_added, missing):
        [line] = differences(RUN, other)
        assert line.startswith(("ping", "server-sse-polling"))


def test_an_info_entry_that_falls_elsewhere_among_the_verdicts_is_no_difference() -> None:
    """The suite's log of each request and response interleaves with its verdicts as the
    timing falls; a run on a loaded machine must not differ for that."""
    info, warning, success = RUN["server-sse-polling"]
    moved = {**RUN, "server-sse-polling": (warning, success, info)}
    assert differences(RUN, moved) == []


def test_failures_off_the_baseline_and_stale_entries_are_reported() -> None:
    assert failures(RUN) == {"tools-call-sampling": ("tools-call-sampling",)}
    listed = {"tools-call-sampling": {"tools-call-sampling": "the reason"}}
    assert off_baseline(RUN, listed) == []
    assert off_baseline(RUN, {}) == [
        "tools-call-sampling/tools-call-sampling: fails, not in the expected failures"
    ]
    stale = {**listed, "ping": {"ping": "fixed since"}}
    assert off_baseline(RUN, stale) == ["ping/ping: expected to fail, did not (stale)"]
