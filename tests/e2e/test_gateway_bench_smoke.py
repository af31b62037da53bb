"""The gateway benchmark at toy size (3 sessions x 5 events): its correctness checks hold and
its table has one row per configuration. Never its times: speed is the benchmark's to
report, not a test's to assert."""

from __future__ import annotations

import pytest

from bench import gateway_bench

# the timeout is a hang guard: each run and probe starts its own processes
pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=1.5), pytest.mark.timeout(600)]


def test_the_gateway_bench_at_toy_size() -> None:
    report = gateway_bench.measure(sessions=3, events=5, repeats=1, light_repeats=2, split_rounds=1)
    configs = ["direct", "gateway"] + (["redis"] if report.redis == "on" else [])
    assert report.configs == configs
    assert [r.config for r in report.runs] == configs  # one round, forward order
    for run in report.runs:
        assert run.presented == [1, 1, 1]
        assert len(run.latencies) == 15
        assert all(lat > 0 for lat in run.latencies)
        parts = run.cpu_parts
        expected = ["clients", "server", "gateway"] + (["redis"] if run.config == "redis" else [])
        assert sorted(parts) == sorted(expected)
        assert parts["clients"] > 0 and run.cpu == sum(parts.values())
        # a replica is its own process: the direct run has none, the others one or two
        assert (parts["gateway"] == 0) is (run.config == "direct")
        assert (run.replica_rss > 0) is (run.config != "direct")
        assert (run.redis_commands is not None) is (run.config == "redis")
        if run.redis_commands is not None:  # a claim per session at least
            assert run.redis_commands >= 3
    assert report.trips.per_notification == 0
    assert report.trips.per_decision == 1
    memory = report.memory
    assert memory.peak_held <= memory.max_sessions == 1
    assert len(memory.bytes_open) == len(memory.bytes_after) == gateway_bench.WAVES
    assert all(b > 0 for b in memory.bytes_open)
    assert {k: len(v) for k, v in report.light.items()} == {
        "direct": 5 * 2,
        "gateway": 5 * 2,
    }
    split = report.split
    assert (split.sessions, split.events, split.rounds) == (3, 10, 1)
    assert set(split.per_session) == set(split.per_event) == {"clients", "server", "gateway"}
    assert split.per_session["gateway"] > 0 and split.per_session["clients"] > 0
    text = gateway_bench.render(report)
    lines = text.splitlines()
    assert lines[0].startswith("3 sessions x 5 events + 1 elicitation")
    assert [line.split()[0] for line in lines[2 : 2 + len(configs)]] == configs
    assert "none presented twice" in text
    assert "one session at a time (2 each, 5 events)" in text
    assert "load average during the run" in text
    assert "peak RSS" in text and "cost split" in text


def test_process_cpu_is_read_from_proc() -> None:
    """The per-process CPU the ratio is built from: a child that has spun for 0.5 s of CPU
    shows at least most of it, one that only started shows little."""
    import subprocess
    import sys

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    for code, busy in ((spin, True), ("", False)):
        child = subprocess.Popen(
            [sys.executable, "-c", code + "print('ready', flush=True)\ninput()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            assert child.stdout.readline() == "ready\n"
            used = gateway_bench.cpu_seconds(child.pid)
            assert (used >= 0.4) if busy else (used < 0.4), (busy, used)
            assert gateway_bench.peak_rss(child.pid) > 1_000_000
        finally:
            child.stdin.close()
            child.wait()


def test_the_paired_comparison_at_toy_size() -> None:
    """Two replicas at once, two rounds (which starts first alternates): each round
    measures both replicas' CPU over the same load."""
    spent = gateway_bench.measure_paired("same", rounds=2, sessions=4)
    assert len(spent) == 2
    assert all(first >= 0 and second >= 0 for first, second in spent)
    assert sum(first + second for first, second in spent) > 0
