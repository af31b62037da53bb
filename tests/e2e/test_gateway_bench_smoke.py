"""The gateway benchmark at toy size (3 sessions x 5 events): its correctness checks hold and
its table has one row per configuration. Never its times: speed is the benchmark's to
report, not a test's to assert."""

from __future__ import annotations

import pytest

from bench import gateway_bench

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_the_gateway_bench_at_toy_size() -> None:
    report = gateway_bench.measure(sessions=3, events=5, repeats=1)
    configs = ["direct", "gateway"] + (["redis"] if report.redis == "on" else [])
    assert report.configs == configs
    assert [r.config for r in report.runs] == configs  # one round, forward order
    for run in report.runs:
        assert run.presented == [1, 1, 1]
        assert len(run.latencies) == 15
        assert all(lat > 0 for lat in run.latencies)
        stored = sum(run.ops.values())
        assert (stored == 0) is (run.config == "direct")
        assert run.ops["claim"] == (0 if run.config == "direct" else 3)
    assert report.trips.per_notification == 0
    assert report.trips.per_decision == 1
    memory = report.memory
    assert memory.peak_held <= memory.max_sessions == 1
    assert len(memory.bytes_open) == len(memory.bytes_after) == gateway_bench.WAVES
    assert all(b > 0 for b in memory.bytes_open)
    assert {k: len(v) for k, v in report.light.items()} == {
        "direct": 5 * gateway_bench.LIGHT_REPEATS,
        "gateway": 5 * gateway_bench.LIGHT_REPEATS,
    }
    assert report.peak_rss > 0
    text = gateway_bench.render(report)
    lines = text.splitlines()
    assert lines[0].startswith("3 sessions x 5 events + 1 elicitation")
    assert [line.split()[0] for line in lines[2 : 2 + len(configs)]] == configs
    assert "none presented twice" in text
    assert "one session at a time" in text
    assert "load average during the run" in text
