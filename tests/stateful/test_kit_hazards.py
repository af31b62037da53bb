"""The kit's default profile finds three planted bugs, each reported as the property it
breaks, and passes the correct client; each hazard step alone exposes its bug; a replay
batch is judged as a whole.

The profile runs here derandomized with no example database (one fixed run per hypothesis
version); how often a random run finds each bug, and how fast, is measured by
``python -m bench kit`` (docs/testing.md).
"""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from fsm.testing import FAST, ConformanceFailure, conformance_machine, kit_settings
from fsm.testing.kit import REJECTIONS, ClientFactory, ConformanceMachine
from support.kit_clients import (
    BUGGY,
    BatchBlindClient,
    CursorRewindClient,
    RetriesNotFoundClient,
    correct_client,
)
from support.kit_runs import FIXED

ELICIT = "elicitation/create"


def machine(factory: ClientFactory) -> ConformanceMachine:
    """A fresh kit machine bound to ``factory``, driven step by step (no hypothesis)."""
    return conformance_machine(factory)()


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_the_default_profile_reports_the_planted_property(name: str) -> None:
    factory, planted = BUGGY[name]
    with pytest.raises(ConformanceFailure) as info:
        run_state_machine_as_test(conformance_machine(factory), settings=FIXED)
    assert info.value.name == planted, str(info.value)


def test_the_correct_client_passes_the_default_profile() -> None:
    run_state_machine_as_test(conformance_machine(correct_client), settings=FIXED)


def test_the_default_profile_is_short_programs_stopping_at_the_first_violation() -> None:
    fast = kit_settings(FAST)
    assert (fast.max_examples, fast.stateful_step_count) == (300, 20)
    assert fast.report_multiple_bugs is False
    # The kit's profiles build on the profile active when it is imported: under CI
    # hypothesis loads its "ci" profile (derandomized, so no example database).
    assert (fast.database is None) == fast.derandomize


# ------------------------------------------------------------ each hazard step alone


def test_a_request_cancelled_within_a_replay_is_presented_by_the_batch_blind_client() -> None:
    m = machine(BatchBlindClient)
    with pytest.raises(ConformanceFailure) as info:
        m.request_cancelled_within_a_replay(pick=0, method=ELICIT, clean=False, replay="ok-batch")
    assert info.value.name == "P1"
    assert "presented after the client knew it dead" in str(info.value)


@pytest.mark.parametrize("replay", ["ok-batch", "ok-from-start"])
def test_the_guard_ignores_a_request_cancelled_later_in_its_batch(replay: str) -> None:
    m = machine(correct_client)
    m.request_cancelled_within_a_replay(pick=0, method=ELICIT, clean=True, replay=replay)
    assert m.reached["hazard:cancel-in-replay"] == 1
    assert m.reached["ignore:cancelled-later-in-batch"] == 1 and m.reached["present"] == 0
    assert not m.monitor.violations


def test_a_rejected_answer_then_a_cut_is_resumed_by_the_client_that_retries_500s() -> None:
    m = machine(RetriesNotFoundClient)
    with pytest.raises(ConformanceFailure) as info:
        m.answer_rejected_then_cut(
            pick=0, method=ELICIT, outcome="500-no-such-request", clean=False
        )
    assert info.value.name == "P3"


@pytest.mark.parametrize("outcome", REJECTIONS)
def test_the_guard_does_not_resume_a_stream_after_a_rejected_answer(outcome: str) -> None:
    """The step opens a tool call, sends a request on it, the user answers, the answer is
    rejected, the stream is cut: the guard ends the interaction instead of resuming."""
    m = machine(correct_client)
    m.answer_rejected_then_cut(pick=0, method=ELICIT, outcome=outcome, clean=False)
    assert m.reached["hazard:rejected-then-cut"] == 1 and m.reached["resume"] == 0
    assert not m.monitor.violations


def test_the_rejections_are_the_outcomes_terminal_for_one_request() -> None:
    assert set(REJECTIONS) == {"400", "410", "500-no-such-request"}


def test_a_duplicate_then_a_cut_moves_the_rewinding_clients_cursor_back() -> None:
    m = machine(CursorRewindClient)
    m.server_sends_request(pick=0, method=ELICIT)  # on the GET stream, the newest event
    with pytest.raises(ConformanceFailure) as info:
        m.duplicate_then_cut(pick=0, marker=False, clean=False)
    assert info.value.name == "P7"
    assert "newest seen is 'e3'" in str(info.value)  # e2 the request, e3 the progress


def test_the_guard_resumes_from_the_newest_event_after_a_duplicate() -> None:
    m = machine(correct_client)
    m.server_sends_request(pick=0, method=ELICIT)
    m.duplicate_then_cut(pick=0, marker=True, clean=True)
    assert m.reached["hazard:duplicate-then-cut"] == 1 and m.reached["resume"] == 1
    assert m.streams["get"].resume == "e3"
    assert not m.monitor.violations


# ----------------------------------------------------------------- the batch rule


def _request_then_cancellation_buffered(m: ConformanceMachine) -> None:
    """Request 1 and its cancellation reach the GET stream's buffer while it is down; the
    client's backoff elapses and it asks to resume."""
    m.cut(pick=0, clean=False)  # the GET stream, the only one open
    m.server_sends_request(pick=0, method=ELICIT)  # e2: request 1, buffered
    m.server_deadline_fires(pick=0, cancel=True)  # e3: notifications/cancelled 1, buffered
    m.timer_fires(pick=0)  # the client resumes from e1
    assert m.streams["get"].resume == "e1"


def test_a_replay_batch_is_judged_as_a_whole() -> None:
    """Replayed as one batch [e2, e3], request 1 is dead by the time the client acts on
    the batch: presenting it is P1, though the client withdraws it in the same breath."""
    m = machine(BatchBlindClient)
    _request_then_cancellation_buffered(m)
    with pytest.raises(ConformanceFailure) as info:
        m.resume_answered(pick=0, outcome="ok-batch", marker=False)
    assert info.value.name == "P1"
    assert "Present(key=('s1', 1)" in str(info.value)
    assert "Withdraw(key=('s1', 1)" in str(info.value)


def test_the_same_events_one_at_a_time_may_be_presented_then_withdrawn() -> None:
    """Replayed event by event, request 1 was alive when the client presented it; the
    cancellation that follows withdraws it: no violation."""
    m = machine(BatchBlindClient)
    _request_then_cancellation_buffered(m)
    m.resume_answered(pick=0, outcome="ok-events", marker=False)
    assert m.reached["present"] == 1 and m.reached["withdraw:cancelled"] == 1
    assert not m.monitor.violations
