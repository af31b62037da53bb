"""How P2 and P7 read across a restart (``Reshown``, ``Restarted``): one more showing of
a prompt that was on screen, never of an answered one, never twice; the new process
resumes from what it sees."""

from __future__ import annotations

from fsm import properties as P

KEY = ("s", 1)


def run(*observations: P.Observation) -> set[str]:
    monitor = P.Monitor()
    for obs in observations:
        monitor.observe(obs)
    return set(monitor.state.violated)


SHOWN = (P.Began("post"), P.Delivered(KEY, "post", 0.0), P.Presented(KEY, 0.0))


def test_a_prompt_on_screen_may_be_shown_once_more() -> None:
    assert run(*SHOWN, P.Restarted(), P.Reshown(KEY, 0.0)) == set()


def test_never_twice() -> None:
    again = (P.Restarted(), P.Reshown(KEY, 0.0))
    assert run(*SHOWN, *again, *again) == {"P2"}


def test_never_an_answered_one() -> None:
    answered = P.Answered(KEY, {"action": "accept"})
    assert run(*SHOWN, answered, P.Restarted(), P.Reshown(KEY, 0.0)) == {"P2"}


def test_never_one_never_shown_or_known_dead() -> None:
    assert run(P.Delivered(KEY, "post", 0.0), P.Reshown(KEY, 0.0)) == {"P2"}
    assert run(*SHOWN, P.Cancelled(KEY), P.Reshown(KEY, 0.0)) == {"P1"}


def test_a_presentation_after_a_restart_is_still_a_second_one() -> None:
    assert run(*SHOWN, P.Restarted(), P.Presented(KEY, 0.0)) == {"P2"}


def test_the_new_process_resumes_from_what_it_stored() -> None:
    seen = (P.EventSeen("post", "1"), P.EventSeen("post", "2"))
    assert run(*seen, P.Resumed("post", "1")) == {"P7"}
    assert run(*seen, P.Restarted(), P.Resumed("post", "1")) == set()
    # after the restart, what it sees counts again
    later = (P.EventSeen("post", "1"), P.EventSeen("post", "2"), P.Resumed("post", "1"))
    assert run(*seen, P.Restarted(), *later) == {"P7"}
