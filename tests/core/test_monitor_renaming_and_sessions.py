"""Two monitor facts the model checker relies on: renaming request keys gives the state
of the renamed story (the soundness of symmetry reduction rests on it), and a new session
after a gone one keeps what the client knew of the old session dead."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fsm import properties as P
from fsm.properties import MonitorState, RequestKey, rename_keys

A: RequestKey = ("s", 0)
B: RequestKey = ("s", 1)
C: RequestKey = ("s", 2)
ANSWER = {"action": "accept"}


def story(a: RequestKey, b: RequestKey, c: RequestKey) -> list[P.Observation]:
    """Three requests touching every keyed fact of the monitor: ``a`` presented, answered
    and submitted with a recorded deadline; ``b`` idempotent and replayed stale; ``c``
    cancelled after delivery."""
    return [
        P.Began("post"),
        P.Delivered(a, "post", 0.0),
        P.Presented(a, 0.0),
        P.Answered(a, ANSWER),
        P.Submitted(a, ANSWER),
        P.Delivered(b, "post", 0.0, interactive=False),
        P.Delivered(c, "get", 0.0),
        P.Delivered(c, "get", 120.0, replayed=True),
        P.Cancelled(c),
    ]


def run(observations: Iterable[P.Observation]) -> MonitorState:
    state = MonitorState()
    for obs in observations:
        state, _ = P.step(state, obs)
    return state


def test_renaming_keys_gives_the_state_of_the_renamed_story() -> None:
    swap: Mapping[RequestKey, RequestKey] = {A: B, B: C, C: A}
    renamed = rename_keys(run(story(A, B, C)), swap)
    assert renamed == run(story(B, C, A))
    # every keyed fact moved, nothing else changed
    original = run(story(A, B, C))
    for field in ("presented", "idempotent", "dead"):
        assert getattr(renamed, field) == {swap[k] for k in getattr(original, field)}, field
    for field in ("deadlines", "stream_of", "answers", "submissions"):
        before, after = getattr(original, field), getattr(renamed, field)
        assert after == {swap[k]: v for k, v in before.items()}, field
    assert (renamed.begun, renamed.seen, renamed.newest) == (
        original.begun,
        original.seen,
        original.newest,
    )


def test_renaming_keeps_keys_it_is_not_given_and_nothing_is_a_no_op() -> None:
    state = run(story(A, B, C))
    assert rename_keys(state, {}) is state
    partial = rename_keys(state, {A: ("s", 9)})
    assert ("s", 9) in partial.presented and A not in partial.presented
    assert B in partial.idempotent and C in partial.dead  # untouched keys stay


def test_the_renamed_state_judges_alike() -> None:
    swap = {A: B, B: A}
    state = rename_keys(run(story(A, B, C)), swap)
    # presenting the (renamed) answered request again is P2; the idempotent one is not
    _, again = P.step(state, P.Presented(B, 1.0))
    assert [v.name for v in again] == ["P2"]
    _, idem = P.step(state, P.Presented(A, 1.0))
    assert idem == ()


def test_a_new_session_keeps_the_old_sessions_requests_dead() -> None:
    state = run([P.Began("post"), P.Delivered(A, "post", 0.0), P.SessionGone()])
    assert state.session_gone
    state, bad = P.step(state, P.SessionBegan("s2"))
    assert bad == () and not state.session_gone and A in state.dead
    _, old = P.step(state, P.Presented(A, 1.0))
    assert [v.name for v in old] == ["P1"]
    fresh: RequestKey = ("s2", 0)
    state, bad = P.step(state, P.Delivered(fresh, "post2", 1.0))
    _, new = P.step(state, P.Presented(fresh, 1.0))
    assert bad == () and new == ()


def test_a_first_session_changes_nothing() -> None:
    state = run([P.Began("post"), P.Delivered(A, "post", 0.0)])
    after, bad = P.step(state, P.SessionBegan("s1"))
    assert after == state and bad == ()


def test_a_partial_renaming_gives_the_story_with_only_that_key_renamed() -> None:
    moved: RequestKey = ("s", 9)
    assert rename_keys(run(story(A, B, C)), {A: moved}) == run(story(moved, B, C))


def test_a_replay_past_its_deadline_is_renamed_and_judged_alike() -> None:
    def stale(k: RequestKey) -> list[P.Observation]:
        return [
            P.Began("post"),
            P.Delivered(k, "post", 0.0),
            P.Presented(k, 0.0),
            P.Delivered(k, "post", 120.0, replayed=True),
        ]

    state = run(stale(A))
    assert state.stale_delivery == {A}
    renamed = rename_keys(state, {A: B})
    assert renamed == run(stale(B))
    _, bad = P.step(renamed, P.Presented(B, 121.0))
    assert sorted(v.name for v in bad) == ["P2", "P6"]


def test_a_session_gone_before_anything_happened_leaves_a_fresh_monitor() -> None:
    """The new session starts from the state a fresh monitor holds (one state for the
    model checker, not two that judge alike)."""
    state = run([P.SessionGone(), P.SessionBegan("s2")])
    assert state == MonitorState()
