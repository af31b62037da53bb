"""The properties P1-P7 and bounded L1 (fsm.properties), one observation sequence each
that must violate the property and one as close to it as possible that must not.

The same monitor judges the model checker's worlds, the conformance kit, the hypothesis
tests and recorded logs: a rule that stops firing, or fires on the near miss, would let
every one of them pass a client that breaks the property (or fail one that keeps it).
"""

from __future__ import annotations

import pytest

from fsm import properties as P

S = "s1"
K1, K2 = (S, 1), (S, 2)
ANSWER = {"action": "accept", "content": {"ok": True}}
OTHER = {"action": "decline"}
BUDGETS = P.Budgets(ttl=10.0, max_resumes_without_progress=2, max_submissions=2)


def _violations(observations: list[P.Observation], budgets: P.Budgets = BUDGETS) -> list[str]:
    monitor = P.Monitor(budgets)
    for obs in observations:
        monitor.observe(obs)
    return [v.name for _, _, v in monitor.violations]


def _delivered(
    key: tuple[str, int] = K1, stream: str = "post:1", t: float = 0.0, **flags: bool
) -> P.Delivered:
    return P.Delivered(key, stream, t, **flags)


# the answer to a request on interaction post:1 rejected as terminal
REJECTED: list[P.Observation] = [
    P.Began("post:1"),
    _delivered(),
    P.Answered(K1, ANSWER),
    P.Rejected(K1),
]

# every case: (name, observations, the violations they must cause, in order)
CASES: list[tuple[str, list[P.Observation], list[str]]] = [
    # P1: presented after the client knew it dead
    ("P1 after cancel", [_delivered(), P.Cancelled(K1), P.Presented(K1, 1.0)], ["P1"]),
    ("P1 declared dead", [_delivered(), P.DeclaredDead(K1), P.Presented(K1, 1.0)], ["P1"]),
    (
        "P1 after rejection of the user's answer",
        [
            P.Began("post:1"),
            _delivered(),
            P.Presented(K1, 0.0),
            P.Answered(K1, ANSWER),
            P.Submitted(K1, ANSWER),
            P.Rejected(K1),
            P.Presented(K1, 1.0),
        ],
        ["P1", "P2"],
    ),
    ("P1 session gone", [_delivered(), P.SessionGone(), P.Presented(K1, 0.0)], ["P1"]),
    (
        "P1 session rejected",
        [_delivered(), P.Rejected(K2, session=True), P.Presented(K1, 0.0)],
        ["P1"],
    ),
    ("no P1: cancel of another key", [_delivered(), P.Cancelled(K2), P.Presented(K1, 0.0)], []),
    ("no P1: cancel never delivered", [P.Cancelled(K1), _delivered(), P.Presented(K1, 0.0)], []),
    ("no P1: rejection of no answer", [_delivered(), P.Rejected(K1), P.Presented(K1, 0.0)], []),
    # P2: an interactive key presented twice
    ("P2", [_delivered(), P.Presented(K1, 0.0), P.Presented(K1, 1.0)], ["P2"]),
    (
        "no P2: idempotent",
        [_delivered(interactive=False), P.Presented(K1, 0.0), P.Presented(K1, 1.0)],
        [],
    ),
    ("no P2: two keys", [_delivered(), P.Presented(K1, 0.0), P.Presented(K2, 0.0)], []),
    # P3: resumed after a terminal rejection on it, or after the session was gone
    ("P3", [*REJECTED, P.Resumed("post:1", "e1")], ["P3"]),
    (
        "P3 session gone",
        [P.EventSeen("get", "e1"), P.SessionGone(), P.Resumed("get", "e1")],
        ["P3"],
    ),
    (
        "P3 session gone, stream known by a delivery",
        [_delivered(stream="get"), P.SessionGone(), P.Resumed("get", "e1")],
        ["P3"],
    ),
    (
        "no P3: the GET stream stays resumable",
        [_delivered(stream="get"), P.Answered(K1, ANSWER), P.Rejected(K1), P.Resumed("get", "e")],
        [],
    ),
    (
        "no P3: rejected after a cancel",
        [
            P.Began("post:1"),
            _delivered(),
            P.Answered(K1, ANSWER),
            P.Cancelled(K1),
            P.Rejected(K1),
            P.Resumed("post:1", "e1"),
        ],
        [],
    ),
    ("no P3: another stream", [*REJECTED, P.Resumed("post:2", "e1")], []),
    # P4: a submission carries an answer the user did not give for that key
    ("P4 never answered", [_delivered(), P.Submitted(K1, ANSWER)], ["P4"]),
    ("P4 other answer", [P.Answered(K1, ANSWER), P.Submitted(K1, OTHER)], ["P4"]),
    ("P4 other key", [P.Answered(K2, ANSWER), P.Submitted(K1, ANSWER)], ["P4"]),
    ("no P4", [P.Answered(K1, ANSWER), P.Submitted(K1, dict(ANSWER))], []),
    # P5: an interaction ends twice (at quiescence: never ends, see below)
    ("P5", [P.Began("a"), P.Ended("a", "completed"), P.Ended("a", "failed")], ["P5"]),
    ("no P5", [P.Began("a"), P.Ended("a", "completed"), P.Ended("b", "completed")], []),
    # P6: presented from a replay past its deadline without liveness assertion
    (
        "P6",
        [
            _delivered(),
            P.Presented(K1, 0.0),
            _delivered(t=10.5, replayed=True),
            P.Presented(K1, 11),
        ],
        ["P2", "P6"],
    ),
    (
        "no P6: at the deadline",
        [
            _delivered(),
            P.Presented(K1, 0.0),
            _delivered(t=10.0, replayed=True),
            P.Presented(K1, 10),
        ],
        ["P2"],
    ),
    (
        "no P6: asserted live",
        [
            _delivered(),
            P.Presented(K1, 0.0),
            _delivered(t=11.0, replayed=True, asserted=True),
            P.Presented(K1, 11.0),
        ],
        ["P2"],
    ),
    (
        "no P6: a fresh delivery after the stale one",
        [
            _delivered(),
            P.Presented(K1, 0.0),
            _delivered(t=11.0, replayed=True),
            _delivered(t=12.0),
            P.Presented(K1, 12.0),
        ],
        ["P2"],
    ),
    (
        "no P6: not replayed",
        [_delivered(), P.Presented(K1, 0.0), _delivered(t=11.0), P.Presented(K1, 11.0)],
        ["P2"],
    ),
    (
        "no P6: idempotent",
        [
            _delivered(interactive=False),
            P.Presented(K1, 0.0),
            _delivered(t=11.0, replayed=True, interactive=False),
            P.Presented(K1, 11.0),
        ],
        [],
    ),
    (
        "no P6: never presented, so no deadline",
        [_delivered(t=50.0, replayed=True), P.Presented(K1, 50.0)],
        [],
    ),
    # P7: a resume with a cursor other than the newest event id seen on that stream
    (
        "P7",
        [P.EventSeen("p", "e1"), P.EventSeen("p", "e2"), P.Resumed("p", "e1")],
        ["P7"],
    ),
    (
        "no P7: a replayed old id is not newer",
        [
            P.EventSeen("p", "e1"),
            P.EventSeen("p", "e2"),
            P.EventSeen("p", "e1"),
            P.Resumed("p", "e2"),
        ],
        [],
    ),
    ("no P7: nothing seen", [P.Resumed("p", "e9")], []),
    ("no P7: other stream", [P.EventSeen("q", "e1"), P.Resumed("p", "e0")], []),
    # L1: more resumes without progress, or more submissions, than the budget
    ("L1 resumes", [P.EventSeen("p", "e1")] + [P.Resumed("p", "e1")] * 3, ["L1"]),
    ("no L1: resumes within budget", [P.EventSeen("p", "e1")] + [P.Resumed("p", "e1")] * 2, []),
    ("no L1: resumes of a stream with no event", [P.Resumed("p", "e1")] * 2, []),
    (
        "no L1: progress resets the count",
        [
            P.EventSeen("p", "e1"),
            P.Resumed("p", "e1"),
            P.Resumed("p", "e1"),
            P.EventSeen("p", "e2"),
            P.Resumed("p", "e2"),
            P.Resumed("p", "e2"),
        ],
        [],
    ),
    (
        "L1 submissions",
        [P.Answered(K1, ANSWER)] + [P.Submitted(K1, ANSWER)] * 3,
        ["L1"],
    ),
    (
        "no L1: submissions within budget",
        [P.Answered(K1, ANSWER)] + [P.Submitted(K1, ANSWER)] * 2,
        [],
    ),
]


@pytest.mark.parametrize(
    ("observations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_property_fires_on_its_violation_and_not_on_the_near_miss(
    observations: list[P.Observation], expected: list[str]
) -> None:
    assert _violations(observations) == expected


def test_counters_off_judge_no_bounded_l1() -> None:
    off = P.Budgets(max_resumes_without_progress=1, max_submissions=1, counters=False)
    many = [P.EventSeen("p", "e1"), P.Answered(K1, ANSWER)]
    many += [P.Resumed("p", "e1"), P.Submitted(K1, ANSWER)] * 5
    assert _violations(many, off) == []


def test_counters_saturate_one_past_the_budget() -> None:
    """A looping client's monitor states stay finite: each loop past the budget is the
    same state (and still a violation)."""
    state = P.MonitorState()
    seen: list[P.MonitorState] = []
    for obs in [P.EventSeen("p", "e1"), P.Answered(K1, ANSWER)]:
        state, _ = P.step(state, obs, BUDGETS)
    for _ in range(6):
        state, bad = P.step(state, P.Resumed("p", "e1"), BUDGETS)
        state, bad2 = P.step(state, P.Submitted(K1, ANSWER), BUDGETS)
        seen.append(state)
    assert seen[-1] == seen[-2] == seen[-3]
    assert state.stalls["p"] == 3 and state.submissions[K1] == 3
    assert [v.name for v in bad + bad2] == ["L1", "L1"]


def test_violated_names_accumulate_in_the_state() -> None:
    state = P.MonitorState()
    for obs in [_delivered(), P.Presented(K1, 0.0), P.Presented(K1, 1.0), P.Submitted(K2, OTHER)]:
        state, _ = P.step(state, obs)
    assert state.violated == {"P2", "P4"}


def test_unfinished_interactions_violate_p5_at_quiescence() -> None:
    monitor = P.Monitor()
    for obs in [P.Began("b"), P.Began("a"), P.Began("c"), P.Ended("c", "completed")]:
        monitor.observe(obs)
    assert [v.why for v in monitor.finish()] == ["a never ended", "b never ended"]
    assert [v.name for _, _, v in monitor.violations] == ["P5", "P5"]


def test_newest_event_is_what_p7_compares_against() -> None:
    state = P.MonitorState()
    assert P.newest_event(state, "p") is None
    for obs in [P.EventSeen("p", "e1"), P.EventSeen("p", "e2"), P.EventSeen("p", "e1")]:
        state, _ = P.step(state, obs)
    assert P.newest_event(state, "p") == "e2"
    assert P.newest_event(state, "q") is None


def test_session_gone_makes_every_known_stream_unresumable() -> None:
    state = P.MonitorState()
    for obs in [
        _delivered(stream="post:1"),
        P.EventSeen("get", "e1"),
        P.Rejected(K2, session=True),
    ]:
        state, _ = P.step(state, obs)
    assert state.session_gone and state.no_resume == {"post:1", "get"}


def test_the_first_delivery_names_the_stream_of_a_key() -> None:
    state = P.MonitorState()
    for obs in [_delivered(stream="post:1"), _delivered(stream="get")]:
        state, _ = P.step(state, obs)
    assert state.stream_of[K1] == "post:1"


def test_frozen_map_repr_names_the_type() -> None:
    assert repr(P.FrozenMap({"x": 1})) == "FrozenMap({'x': 1})"


def test_finish_keeps_the_earlier_violations_and_names_the_interaction() -> None:
    monitor = P.Monitor()
    for obs in [P.Began("a"), P.Submitted(K1, ANSWER)]:
        monitor.observe(obs)
    monitor.finish()
    assert [(v.name, o) for _, o, v in monitor.violations] == [
        ("P4", P.Submitted(K1, ANSWER)),
        ("P5", P.Began("a never ended")),
    ]


def test_an_answer_is_the_same_whatever_its_key_order_and_value_types() -> None:
    import datetime

    when = datetime.date(2026, 12, 3)
    given = {"action": "accept", "content": {"a": 1, "b": 2, "when": when}}
    sent = {"content": {"b": 2, "when": when, "a": 1}, "action": "accept"}
    assert _violations([P.Answered(K1, given), P.Submitted(K1, sent)]) == []


def _interaction_a() -> list[P.Observation]:
    """Observations that leave a fact of interaction ``a`` in every field of the state."""
    k3 = (S, 3)
    return [
        P.Began("a"),
        _delivered(K1, "a"),
        _delivered(k3, "a", interactive=False),
        P.Presented(K1, 0.0),
        _delivered(K1, "a", t=20.0, replayed=True),
        P.Answered(K1, ANSWER),
        P.Submitted(K1, ANSWER),
        P.Rejected(K1),
        P.EventSeen("a", "e1"),
        P.Resumed("a", "e1"),
        P.Ended("a", "failed"),
    ]


def _interaction_b() -> list[P.Observation]:
    return [
        P.Began("b"),
        _delivered(K2, "b"),
        P.Presented(K2, 1.0),
        P.EventSeen("b", "f1"),
        P.Ended("b", "completed"),
    ]


def _state(observations: list[P.Observation]) -> P.MonitorState:
    state = P.MonitorState()
    for obs in observations:
        state, _ = P.step(state, obs, BUDGETS)
    return state


def test_forgetting_an_interaction_leaves_the_state_as_if_it_never_happened() -> None:
    both = _state(_interaction_a() + _interaction_b())
    forgotten = P.forget(both, "a")
    assert forgotten._replace(violated=frozenset()) == _state(_interaction_b())
    assert forgotten.violated == both.violated  # what was violated stays on record


def test_frozen_map_mutation_error_says_what_to_use() -> None:
    with pytest.raises(TypeError, match=r"^FrozenMap is immutable: use \.set\(\)$"):
        P.FrozenMap({"x": 1})["y"] = 2


def test_distinct_frozen_maps_hash_apart() -> None:
    """Model checkers hash the monitor's state on every step: distinct maps must not
    collide wholesale."""
    hashes = {hash(P.FrozenMap({("s", n): f"post:{n}"})) for n in range(100)}
    assert len(hashes) >= 99


def test_violations_are_numbered_by_the_observation_that_caused_them() -> None:
    monitor = P.Monitor(BUDGETS)
    for obs in [P.Submitted(K1, ANSWER), P.Began("a"), P.Submitted(K2, ANSWER)]:
        monitor.observe(obs)
    assert [(n, v.name) for n, _, v in monitor.violations] == [(1, "P4"), (3, "P4")]
    assert monitor.count == 3


def test_a_monitor_retaining_nothing_forgets_each_interaction_as_it_ends() -> None:
    monitor = P.Monitor(retain=0)
    for obs in [P.Began("a"), _delivered(K1, "a"), P.Presented(K1, 0.0), P.Ended("a", "done")]:
        monitor.observe(obs)
    assert monitor.state.presented == frozenset() and monitor.state.begun == frozenset()
    with pytest.raises(ValueError, match=r"^retain must be >= 0 or None$"):
        P.Monitor(retain=-1)


def test_each_violation_says_what_happened() -> None:
    """The explanations counterexamples, audits and the conformance kit print."""
    cases: list[tuple[list[P.Observation], str]] = [
        (
            [_delivered(), P.Cancelled(K1), P.Presented(K1, 0.0)],
            f"{K1!r} presented after the client knew it dead",
        ),
        (
            [_delivered(), P.Presented(K1, 0.0), P.Presented(K1, 1.0)],
            f"{K1!r} presented a second time",
        ),
        ([*REJECTED, P.Resumed("post:1", "e1")], "post:1 resumed after a terminal rejection"),
        (
            [P.Submitted(K1, ANSWER)],
            f"answer for {K1!r} submitted that the user did not give for it",
        ),
        (
            [
                _delivered(),
                P.Presented(K1, 0.0),
                _delivered(t=11.0, replayed=True),
                P.Presented(K1, 11.0),
            ],
            f"{K1!r} presented from a replay past its deadline without liveness assertion",
        ),
        (
            [P.EventSeen("p", "e2"), P.Resumed("p", "e1")],
            "p resumed from 'e1', newest seen is 'e2'",
        ),
        (
            [P.EventSeen("p", "e1")] + [P.Resumed("p", "e1")] * 3,
            "p resumed 3 times without progress",
        ),
        ([P.Answered(K1, ANSWER)] + [P.Submitted(K1, ANSWER)] * 3, f"{K1!r} submitted 3 times"),
    ]
    for observations, why in cases:
        monitor = P.Monitor(BUDGETS)
        for obs in observations:
            monitor.observe(obs)
        assert why in [v.why for _, _, v in monitor.violations], why


def test_ending_an_interaction_records_it_as_begun() -> None:
    assert _state([P.Ended("a", "completed")]) == _state([P.Began("a"), P.Ended("a", "completed")])
