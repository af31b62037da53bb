"""The forwarding bench (bench/gateway_forwarding.py) at toy size, through the same
functions as the full run: every request is timed, and through the replica that opens the
standalone GET ahead the upstream has a GET attached before the client's first POST in
every round (the replica waits for that GET's head before it answers the notification).
Never its times: those are the bench's to report."""

from __future__ import annotations

import pytest

from bench import gateway_forwarding

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_the_forwarding_bench_at_toy_size() -> None:
    got = gateway_forwarding.forwarding(samples=3, races=3)
    assert sorted(got.delays) == sorted(
        (kind, target) for kind in ("POST", "GET") for target in ("direct", "gateway")
    )
    assert all(len(samples) == 3 for samples in got.delays.values())
    assert {target: len(rounds) for target, rounds in got.races.items()} == dict.fromkeys(
        gateway_forwarding.TARGETS, 3
    )
    assert got.races["gateway"] == [False, False, False]
    gateway_forwarding.render(got)
