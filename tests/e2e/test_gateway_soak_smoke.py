"""The gateway soak bench (bench/gateway_soak.py) at toy size, each part through the same
functions as the full run: its structural checks hold (no error, nothing presented twice,
every failover call one outcome, the large events end as they must). Never its times or
ratios: those are the bench's to report, not a test's to assert."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import gateway_soak

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=1.5), pytest.mark.timeout(120)]


def test_the_soak_at_toy_size() -> None:
    got = gateway_soak.soak(
        sessions=3, seconds=3.0, events=3, ramp_s=0.3, probe_calls=(4, 8), warm_calls=2
    )
    assert got.errors == []
    assert (got.opened, got.closed) == (3, 3)
    assert got.calls >= 3 and sum(got.presented.values()) >= got.calls
    assert got.double_presented == 0
    assert len(got.latencies) == 3 * got.calls
    assert len(got.rss) >= 2 and all(b > 0 for _, b in got.rss)
    assert got.baseline_rss > 0 and got.peak_rss >= got.rss[-1][1]
    assert [calls for calls, *_ in got.held] == [4, 8]
    assert all(held > 0 for _, held, _, _ in got.held)
    gateway_soak.render_soak(got)


def test_the_failover_at_toy_size() -> None:
    got = gateway_soak.failover(sessions=4, lease_s=1.0, events=4, pace_s=0.25)
    if got.redis != "on":
        pytest.skip(got.redis)
    assert len(got.calls) == 4
    outcomes = Counter(c.outcome for c in got.calls)
    assert outcomes["no outcome"] == 0, outcomes  # every call ended, within the bound
    assert not any(o.startswith("session:") for o in outcomes), outcomes
    assert got.double_presented == 0
    assert sorted(got.presented.values()) == [1, 1, 1, 1]  # each prompt reached its client
    # the survivor's calls never lose their replica: they complete
    assert {c.outcome for c in got.calls if c.replica == "survivor"} == {"result"}
    assert got.open_at_kill == 2 and got.failovers >= 2
    gateway_soak.render_failover(got)


def test_the_cpu_pair_at_toy_size() -> None:
    got = gateway_soak.cpu(sessions=2, events=5, repeats=1)
    assert got.configs[:2] == ["direct", "gateway"]
    assert (got.redis == "on") is ("redis" in got.configs)
    for config in got.configs:
        assert got.median(config) > 0 and got.ratio(config) > 0
        assert (got.median(config, "gateway") > 0) is (config != "direct")
    gateway_soak.render_cpu(got)


def test_the_latency_phases_at_toy_size() -> None:
    cap = 128 * 1024
    got = gateway_soak.latency(cap=cap, pings=40)
    assert [(p.target, p.load) for p in got.phases] == [
        (target, load) for target in ("gateway", "direct") for load in gateway_soak.LOADS
    ]
    for phase in got.phases:
        assert len(phase.samples) >= 40 and phase.failures == []
        outcomes = {o for o, _ in phase.transfers}
        if phase.load == "idle":
            assert phase.transfers == []
        else:
            assert len(phase.transfers) >= gateway_soak.MIN_TRANSFERS
            # over the cap the gateway ends each stream with one error; direct, no bound
            over = phase.target == "gateway" and phase.load == "over the cap"
            assert outcomes == ({"event-too-large"} if over else {"result"}), outcomes
    assert got.replica_peak_rss > 0
    gateway_soak.render_latency(got)


def test_a_large_event_reads_back_as_its_outcome() -> None:
    """What the receiver makes of a response's last bytes."""
    event = gateway_soak._big_event(7, 1, 4096)
    assert len(event) == 4096 + 2 and event.endswith(b'"isError":false}}\n\n')
    assert gateway_soak.transfer_outcome(event[-100:], len(event), 4096) == "result"
    ending = (
        b'id: x\nevent: message\ndata: {"jsonrpc":"2.0","id":7,"error":{"code":-32000,'
        b'"message":"event-too-large: ...","data":{"reason":"event-too-large"}}}\n\n'
    )
    assert gateway_soak.transfer_outcome(ending, len(ending), 4096) == "event-too-large"
    assert gateway_soak.transfer_outcome(event[:-50], 4000, 4096) == "incomplete"
