"""The pinned figures of every shipped model: one table, a row per model, grouped by the
``models/`` files that define them; ``test_pins.py`` holds each model to its row.

Like TLC's and Stateright's own tests, the state and transition counts of every shipped
model at its default bounds are pinned: a change to the guard, the world or the monitor
that changes what is explored shows up here first. A model with several requests declares
their ids interchangeable: its counts are of representatives (one state per orbit; a move
per interchangeable id, so sends of two unsent ids are two edges to one representative),
and its full space is pinned too (``full``, audited by ``test_symmetry.py``). A model that
must fail names what it violates, each with the ``(steps, loop_start)`` of its shortest
counterexample; every other model must hold every property.
"""

from __future__ import annotations

from typing import Any

from shipped import Family, Pin

from fsm.checker import Path, Report

FAMILIES: dict[str, Family] = {
    "sse": Family(
        (
            "guarded.py",
            "guarded_concurrent.py",
            "standalone_get.py",
            "guarded_replay.py",
            "seed_incident.py",
            "mcp_sdk_2_3.py",
            "mcp_sdk_1_x.py",
            "guarded_reask.py",
        ),
        {
            "guarded[after,silent,202,answers]": Pin(492, 1237),
            "guarded[after,silent,202,answers,reaper]": Pin(1578, 2729),
            "guarded[after,silent,202,never]": Pin(141, 313),
            "guarded[after,silent,404,answers]": Pin(492, 1123),
            "guarded[after,silent,404,never]": Pin(141, 313),
            "guarded[after,silent,rpc,answers]": Pin(492, 1123),
            "guarded[after,silent,rpc,never]": Pin(141, 313),
            "guarded[after,silent,500rpc,answers]": Pin(492, 1123),
            "guarded[after,silent,500rpc,never]": Pin(141, 313),
            "guarded[after,cancel,202,answers]": Pin(708, 1759),
            "guarded[after,cancel,202,answers,reaper]": Pin(2328, 3947),
            "guarded[after,cancel,202,never]": Pin(177, 382),
            "guarded[after,cancel,404,answers]": Pin(708, 1531),
            "guarded[after,cancel,404,never]": Pin(177, 382),
            "guarded[after,cancel,rpc,answers]": Pin(708, 1645),
            "guarded[after,cancel,rpc,never]": Pin(177, 382),
            "guarded[after,cancel,500rpc,answers]": Pin(708, 1645),
            "guarded[after,cancel,500rpc,never]": Pin(177, 382),
            "guarded[inclusive,silent,202,answers]": Pin(600, 1557),
            "guarded[inclusive,silent,202,answers,reaper]": Pin(1692, 3157),
            "guarded[inclusive,silent,202,never]": Pin(177, 399),
            "guarded[inclusive,silent,404,answers]": Pin(582, 1407),
            "guarded[inclusive,silent,404,never]": Pin(177, 399),
            "guarded[inclusive,silent,rpc,answers]": Pin(582, 1407),
            "guarded[inclusive,silent,rpc,never]": Pin(177, 399),
            "guarded[inclusive,silent,500rpc,answers]": Pin(582, 1407),
            "guarded[inclusive,silent,500rpc,never]": Pin(177, 399),
            "guarded[inclusive,cancel,202,answers]": Pin(870, 2214),
            "guarded[inclusive,cancel,202,answers,reaper]": Pin(2496, 4564),
            "guarded[inclusive,cancel,202,never]": Pin(222, 486),
            "guarded[inclusive,cancel,404,answers]": Pin(834, 1914),
            "guarded[inclusive,cancel,404,never]": Pin(222, 486),
            "guarded[inclusive,cancel,rpc,answers]": Pin(852, 2064),
            "guarded[inclusive,cancel,rpc,never]": Pin(222, 486),
            "guarded[inclusive,cancel,500rpc,answers]": Pin(852, 2064),
            "guarded[inclusive,cancel,500rpc,never]": Pin(222, 486),
            "guarded[after,silent,202,answers] x2": Pin(5816, 19753, full=(11612, 39432)),
            "guarded[after,silent,rpc,answers] x2": Pin(6164, 17282, full=(12308, 34490)),
            "guarded[after,cancel,202,answers] x2": Pin(19460, 60759, full=(38900, 121444)),
            "guarded[after,cancel,rpc,answers] x2": Pin(20036, 54495, full=(40052, 108916)),
            "guarded[inclusive,silent,202,answers] x2": Pin(7212, 25085, full=(14400, 50078)),
            "guarded[inclusive,silent,rpc,answers] x2": Pin(7158, 21395, full=(14292, 42698)),
            "guarded[inclusive,cancel,202,answers] x2": Pin(24144, 76574, full=(48264, 153056)),
            "guarded[inclusive,cancel,rpc,answers] x2": Pin(23784, 67757, full=(47544, 135422)),
            "guarded[after,silent,rpc,answers] x3": Pin(66684, 219054, full=(398804, 1308670)),
            "guarded[inclusive,silent,rpc,answers] x3": Pin(75384, 264150, full=(450726, 1577810)),
            "guarded[after,silent,202,answers] get3": Pin(3936, 13340),
            "guarded[after,silent,202,answers,reaper] get3": Pin(12624, 25276),
            "guarded[after,silent,202,never] get3": Pin(1128, 3491),
            # a fresh GET tracked under the name of the one that ended: open, cut, open, cut
            "one name for every fresh GET": Pin(468, 1344, {"P5": (4, None)}),
            "guarded-replay[silent,202,answers]": Pin(1422, 4347),
            "guarded-replay[silent,202,never]": Pin(345, 901),
            "guarded-replay[silent,rpc,answers]": Pin(1332, 3831),
            "guarded-replay[silent,rpc,never]": Pin(345, 901),
            "guarded-replay[cancel,202,answers]": Pin(3144, 9270),
            "guarded-replay[cancel,202,never]": Pin(632, 1578),
            "guarded-replay[cancel,rpc,answers]": Pin(3054, 8754),
            "guarded-replay[cancel,rpc,never]": Pin(632, 1578),
            "guarded-replay[history-full]": Pin(462, 857),
            "guarded-replay[rewinds]": Pin(3439, 9636),
            "unverified-cursor": Pin(5314, 15863, {"P7": (7, None)}),
            "window-only": Pin(1126, 3014, {"P7": (9, None), "L1": (9, 4)}),
            # the L1 loop is shortest over the system's states (the monitor projected out): it
            # starts where the client first re-presents, as SPIN finds it (5 + 4)
            "seed-incident": Pin(
                168,
                303,
                {
                    "P1": (8, None),
                    "P2": (8, None),
                    "P3": (6, None),
                    "P4": (4, None),
                    "P7": (5, None),
                    "L1": (9, 5),
                },
            ),
            "mcp-sdk-2.3.0": Pin(501, 1116, {"P2": (10, None), "P7": (8, None)}),
            # the duplicate presented after the first answer; the stale cursor; a POST stream
            # cut before its first event id: not resumed, no outcome (a hang)
            "mcp-sdk-1.x": Pin(
                1653, 3248, {"P2": (11, None), "P7": (8, None), "P5-quiescent": (4, None)}
            ),
            # the answered question asked again under a new id, presented again (also keyed-by-id)
            "mcp-sdk-2.3.0[reask] x2": Pin(1712, 4702, {"P2": (7, None)}, full=(3412, 9360)),
            "guarded-reask[resubmit] x2": Pin(2984, 8772, full=(5954, 17495)),
            "guarded-reask[twice] x3": Pin(12370, 44872, full=(73796, 267351)),
            "guarded-reask[fail] x2": Pin(1262, 3739, full=(2510, 7429)),
            "keyed-by-id[reask] x2": Pin(1398, 4037, {"P2": (7, None)}, full=(2782, 8025)),
        },
    ),
    "held": Family(
        ("guarded_held.py",),
        {
            "guarded-held[409,k=14]": Pin(4827, 12185),
            "guarded-held[400-exists,k=14]": Pin(4827, 12185),
            "guarded-held[409-retry-after,k=5]": Pin(1857, 4598),
            # the call's stream cut after its priming event; every resume refused until the
            # refusal the patience does not wait out (or the budget of 3, or the first for a
            # table that judged Render's 400 terminal)
            "guarded-held[409,k=15]": Pin(4982, 12612, {"patience": (32, None)}),
            "guarded-held[409,forever]": Pin(2344, 5232),
            "impatient[409,k=3]": Pin(894, 2199, {"patience": (8, None)}),
            "impatient[400-exists,k=1]": Pin(360, 837, {"patience": (4, None)}),
            # a refusal, its wait, the resume refused again: the same state
            "endless-patience[409,forever]": Pin(348, 789, {"L1": (5, 3)}),
        },
        witnesses=("presented", "completed", "held", "cut-and-resumed"),
    ),
    "mrtr": Family(
        ("guarded_mrtr.py", "mcp_sdk_2_3_mrtr.py"),
        {
            "guarded-mrtr[reject,answers,seen]": Pin(39, 44),
            "guarded-mrtr[reject,answers,missed]": Pin(47, 56),
            "guarded-mrtr[reject,never,seen]": Pin(16, 16),
            "guarded-mrtr[reject,answers,seen,restart]": Pin(104, 131),
            "guarded-mrtr[reject,answers,missed,restart]": Pin(124, 167),
            "guarded-mrtr[reject,never,seen,restart]": Pin(40, 44),
            "guarded-mrtr[reject,answers,seen,polls]": Pin(64, 79),
            "guarded-mrtr[reject,answers,missed,polls]": Pin(72, 91),
            "guarded-mrtr[reject,answers,seen,polls,restart]": Pin(184, 242),
            "guarded-mrtr[reject,answers,missed,polls,restart]": Pin(204, 278),
            "guarded-mrtr[reject,answers,seen,reasks]": Pin(64, 79),
            "guarded-mrtr[reject,answers,missed,reasks]": Pin(72, 91),
            "guarded-mrtr[reject,answers,seen,reasks,restart]": Pin(184, 242),
            "guarded-mrtr[reject,answers,missed,reasks,restart]": Pin(204, 278),
            "guarded-mrtr[reject,answers,seen,reasks,polls]": Pin(95, 125),
            "guarded-mrtr[reject,answers,missed,reasks,polls]": Pin(103, 137),
            "guarded-mrtr[reject,answers,seen,reasks,polls,restart]": Pin(288, 389),
            "guarded-mrtr[reject,answers,missed,reasks,polls,restart]": Pin(308, 425),
            "guarded-mrtr[reask,answers,seen]": Pin(41, 48),
            "guarded-mrtr[reask,answers,missed]": Pin(49, 60),
            "guarded-mrtr[reask,never,seen]": Pin(16, 16),
            "guarded-mrtr[reask,answers,seen,restart]": Pin(131, 174),
            "guarded-mrtr[reask,answers,missed,restart]": Pin(151, 210),
            "guarded-mrtr[reask,never,seen,restart]": Pin(40, 44),
            "guarded-mrtr[reask,answers,seen,polls]": Pin(71, 91),
            "guarded-mrtr[reask,answers,missed,polls]": Pin(79, 103),
            "guarded-mrtr[reask,answers,seen,polls,restart]": Pin(280, 390),
            "guarded-mrtr[reask,answers,missed,polls,restart]": Pin(300, 426),
            "guarded-mrtr[reask,answers,seen,reasks]": Pin(65, 83),
            "guarded-mrtr[reask,answers,missed,reasks]": Pin(73, 95),
            "guarded-mrtr[reask,answers,seen,reasks,restart]": Pin(202, 285),
            "guarded-mrtr[reask,answers,missed,reasks,restart]": Pin(222, 321),
            "guarded-mrtr[reask,answers,seen,reasks,polls]": Pin(95, 129),
            "guarded-mrtr[reask,answers,missed,reasks,polls]": Pin(103, 141),
            "guarded-mrtr[reask,answers,seen,reasks,polls,restart]": Pin(297, 432),
            "guarded-mrtr[reask,answers,missed,reasks,polls,restart]": Pin(317, 468),
            "guarded-mrtr[reject,answers,seen,reasks,restart] x2": Pin(248, 326),
            "guarded-mrtr[reject,answers,missed,reasks,restart] x2": Pin(328, 462),
            "guarded-mrtr[reject,answers,seen,reasks,polls,restart] x2": Pin(352, 473),
            "guarded-mrtr[reject,answers,missed,reasks,polls,restart] x2": Pin(432, 609),
            "guarded-mrtr[reask,answers,seen,reasks,restart] x2": Pin(266, 369),
            "guarded-mrtr[reask,answers,missed,reasks,restart] x2": Pin(346, 505),
            "guarded-mrtr[reask,answers,seen,reasks,polls,restart] x2": Pin(361, 516),
            "guarded-mrtr[reask,answers,missed,reasks,polls,restart] x2": Pin(441, 652),
            "mcp-sdk-2.3.0-mrtr[reasking-tool]": Pin(32, 32, {"P2": (3, None), "P6": (3, None)}),
            "mcp-sdk-2.3.0-mrtr[reask-on-expiry]": Pin(31, 33, {"P2": (5, None), "P6": (3, None)}),
            "mcp-sdk-2.3.0-mrtr[reject-expired]": Pin(27, 28, {"P6": (3, None)}),
        },
        answered=("completed",),
    ),
    "tasks": Family(
        ("guarded_tasks.py", "ext_tasks_0_2_2.py"),
        {
            "guarded-tasks[never,ttl]": Pin(4, 3),
            "guarded-tasks[never,supersede,ttl]": Pin(12, 13),
            "guarded-tasks[never,fail,ttl]": Pin(10, 11),
            "guarded-tasks[answers]": Pin(46, 50),
            "guarded-tasks[answers,ttl]": Pin(77, 103),
            "guarded-tasks[answers,supersede]": Pin(191, 214),
            "guarded-tasks[answers,supersede,ttl]": Pin(320, 438),
            "guarded-tasks[answers,reask]": Pin(126, 141),
            "guarded-tasks[answers,reask,ttl]": Pin(212, 289),
            "guarded-tasks[answers,fail]": Pin(90, 101),
            "guarded-tasks[answers,fail,ttl]": Pin(142, 199),
            "guarded-tasks[answers,purge]": Pin(92, 99),
            "guarded-tasks[answers,purge,ttl]": Pin(143, 195),
            "guarded-tasks[answers,drop]": Pin(72, 83),
            "guarded-tasks[answers,drop,ttl]": Pin(122, 165),
            "guarded-tasks[answers,lost]": Pin(112, 131),
            "guarded-tasks[answers,lost,ttl]": Pin(183, 259),
            "guarded-tasks[answers,supersede,reask]": Pin(537, 605),
            "guarded-tasks[answers,supersede,reask,ttl]": Pin(898, 1235),
            "guarded-tasks[answers,supersede,fail]": Pin(377, 431),
            "guarded-tasks[answers,supersede,fail,ttl]": Pin(595, 846),
            "guarded-tasks[answers,supersede,purge]": Pin(385, 422),
            "guarded-tasks[answers,supersede,purge,ttl]": Pin(598, 828),
            "guarded-tasks[answers,supersede,drop]": Pin(372, 440),
            "guarded-tasks[answers,supersede,drop,ttl]": Pin(631, 874),
            "guarded-tasks[answers,supersede,lost]": Pin(509, 603),
            "guarded-tasks[answers,supersede,lost,ttl]": Pin(835, 1190),
            "guarded-tasks[answers,reask,fail]": Pin(247, 287),
            "guarded-tasks[answers,reask,fail,ttl]": Pin(391, 566),
            "guarded-tasks[answers,reask,purge]": Pin(264, 285),
            "guarded-tasks[answers,reask,purge,ttl]": Pin(407, 562),
            "guarded-tasks[answers,reask,drop]": Pin(232, 279),
            "guarded-tasks[answers,reask,drop,ttl]": Pin(392, 548),
            "guarded-tasks[answers,reask,lost]": Pin(364, 436),
            "guarded-tasks[answers,reask,lost,ttl]": Pin(599, 858),
            "guarded-tasks[answers,fail,purge]": Pin(204, 221),
            "guarded-tasks[answers,fail,purge,ttl]": Pin(297, 408),
            "guarded-tasks[answers,fail,drop]": Pin(144, 169),
            "guarded-tasks[answers,fail,drop,ttl]": Pin(229, 324),
            "guarded-tasks[answers,fail,lost]": Pin(216, 257),
            "guarded-tasks[answers,fail,lost,ttl]": Pin(335, 490),
            "guarded-tasks[answers,purge,drop]": Pin(144, 159),
            "guarded-tasks[answers,purge,drop,ttl]": Pin(227, 310),
            "guarded-tasks[answers,purge,lost]": Pin(224, 253),
            "guarded-tasks[answers,purge,lost,ttl]": Pin(340, 482),
            "guarded-tasks[answers,drop,lost]": Pin(168, 209),
            "guarded-tasks[answers,drop,lost,ttl]": Pin(279, 399),
            "guarded-tasks[answers] x2": Pin(526, 736),
            "guarded-tasks[answers,supersede] x2": Pin(4204, 6042),
            "guarded-tasks[answers,reask] x2": Pin(2215, 3037),
            "guarded-tasks[answers,drop] x2": Pin(1019, 1582),
            "guarded-tasks[answers,lost] x2": Pin(1686, 2476),
            "guarded-tasks[answers,lost,ttl] x2": Pin(2616, 4441),
            # the task rules restarted with the task id alone (no durable store yet)
            "guarded-tasks[answers,crash]": Pin(164, 223, {"P2": (4, None)}),
            "ext-tasks-0.2.2[reask]": Pin(15, 17, {"P2": (5, None)}),
            # a failed update releases its keys and rethrows: the execution fails, nothing is
            # presented twice (a second prompt needs ``resumeTask``: the crash model)
            "ext-tasks-0.2.2[update-fails]": Pin(11, 12),
            "ext-tasks-0.2.2[crash]": Pin(43, 60, {"P2": (4, None)}),
        },
        answered=("completed",),
    ),
    "durable": Family(
        ("guarded_durable.py",),
        {
            "guarded-durable[after,answers]": Pin(2124, 4871),
            "guarded-durable[after,never]": Pin(171, 374),
            "guarded-durable[inclusive,answers]": Pin(3430, 8019),
            "guarded-durable[inclusive,never]": Pin(235, 504),
            "no-store[inclusive]": Pin(1802, 4054, {"P2": (7, None)}),
        },
    ),
    "mrtr-durable": Family(
        ("guarded_mrtr_durable.py",),
        {
            "guarded-mrtr-durable[answers]": Pin(43, 45),
            "guarded-mrtr-durable[reasks]": Pin(83, 92),
            "guarded-mrtr-durable[polls]": Pin(83, 92),
            "guarded-mrtr-durable[lost]": Pin(106, 127),
            "guarded-mrtr-durable[reasks,lost]": Pin(219, 282),
            "no-store-mrtr[answers]": Pin(59, 64, {"P2": (4, None), "P6": (5, None)}),
        },
    ),
    "tasks-durable": Family(
        ("guarded_tasks_durable.py",),
        {
            "guarded-tasks-durable[answers,crash]": Pin(159, 223),
            "guarded-tasks-durable[answers,supersede,crash]": Pin(686, 969),
            "guarded-tasks-durable[answers,reask,crash]": Pin(492, 691),
            "guarded-tasks-durable[answers,fail,crash]": Pin(297, 429),
            "guarded-tasks-durable[answers,purge,crash]": Pin(318, 421),
            "guarded-tasks-durable[answers,drop,crash]": Pin(246, 363),
            "guarded-tasks-durable[answers,lost,crash]": Pin(367, 535),
            "guarded-tasks-durable[answers,ttl,crash]": Pin(259, 411),
        },
    ),
}
"""Every family of pinned models, by name."""

PINS: dict[str, Pin] = {name: pin for f in FAMILIES.values() for name, pin in f.pins.items()}
"""Every pinned model's row, by model name (names are unique across the families)."""

FAMILY_OF: dict[str, Family] = {name: f for f in FAMILIES.values() for name in f.pins}


def report(name: str) -> tuple[Any, Report]:
    """The pinned model called ``name`` and its report, checked once per test session."""
    return FAMILY_OF[name].shipped.report(name)


def counterexample(name: str, prop: str) -> Path:
    """The shortest counterexample to ``prop`` of the pinned model ``name`` (an
    ``AssertionError`` if ``prop`` holds); its ``names`` are the steps, in order."""
    return report(name)[1].assert_violated(prop)
