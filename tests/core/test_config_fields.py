"""Every era's configuration refuses a setting out of range as it is built, by the type
its field declares (:mod:`fsm.fields`): a negative count, a NaN or negative duration, a
flag that is not a bool. A NaN patience or a negative budget would otherwise pass
construction and loop or refuse forever once a stream broke."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import pytest

from fsm import GuardConfig
from fsm.durable.redis_link import check_lease
from fsm.fields import FieldRule, check_fields, field_problem, field_rules, seconds_problem
from fsm.mrtr import MrtrConfig
from fsm.properties import Budgets
from fsm.tasks import TaskConfig

CONFIGS: list[type[Any]] = [GuardConfig, MrtrConfig, TaskConfig]
"""The eras' configurations; the monitor's :class:`Budgets` is checked alike."""


def _fields(kind: str) -> list[tuple[type[Any], str]]:
    return [
        (config, name)
        for config in [*CONFIGS, Budgets]
        for name, rule in field_rules(config, floats="number", strict=False).items()
        if rule.kind == kind
    ]


def test_every_era_checks_its_counts_durations_flags_and_choices() -> None:
    kinds = {
        config.__name__: sorted(
            {r.kind for r in field_rules(config, floats="number", strict=False).values()}
        )
        for config in CONFIGS
    }
    assert kinds == {
        "GuardConfig": ["choice", "count", "flag", "number"],
        "MrtrConfig": ["choice", "count", "number"],
        "TaskConfig": ["choice", "count", "number"],
    }
    assert field_rules(GuardConfig, floats="number", strict=False)["max_ended_streams"] == (
        FieldRule("count", none=True)
    )


@pytest.mark.parametrize(("config", "name"), _fields("count"), ids=str)
@pytest.mark.parametrize("bad", [-1, True, 1.5, "3"])
def test_a_count_out_of_range_is_refused_by_name(config: type[Any], name: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{config.__name__}\.{name}: .* is not an integer >= 0"):
        config(**{name: bad})
    assert getattr(config(**{name: 0}), name) == 0


@pytest.mark.parametrize(("config", "name"), _fields("number"), ids=str)
@pytest.mark.parametrize("bad", [-0.5, math.nan, True, "1"])
def test_a_duration_out_of_range_is_refused_by_name(config: type[Any], name: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{config.__name__}\.{name}: .* is not a number >= 0$"):
        config(**{name: bad})
    assert getattr(config(**{name: 0}), name) == 0  # none, or at once
    assert getattr(config(**{name: math.inf}), name) == math.inf  # no limit


@pytest.mark.parametrize("config", CONFIGS)
def test_the_defaults_and_a_replace_are_checked_alike(config: type[Any]) -> None:
    default = config()
    with pytest.raises(ValueError, match=r"\.max_reasks: -1 is not an integer >= 0$"):
        dataclasses.replace(default, max_reasks=-1)
    with pytest.raises(ValueError, match=r"\.on_reask: 'ask' is not one of resubmit, fail$"):
        config(on_reask="ask")


def test_a_flag_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=r"^GuardConfig\.questions: 1 is not True or False$"):
        GuardConfig(questions=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "value", "problem"),
    [
        (FieldRule("count"), 0, None),
        (FieldRule("count"), None, "is not an integer >= 0"),
        (FieldRule("count", none=True), None, None),
        (FieldRule("count", none=True), -1, "is not an integer >= 0 or None (no limit)"),
        (FieldRule("number"), 0, None),
        (FieldRule("number"), 0.0, None),
        (FieldRule("number"), -1e-9, "is not a number >= 0"),
        (FieldRule("positive"), 1e-9, None),
        (FieldRule("positive"), 0, "is not a number > 0"),
        (FieldRule("positive"), math.nan, "is not a number > 0"),
        (FieldRule("positive"), False, "is not a number > 0"),
        (FieldRule("flag"), False, None),
        (FieldRule("flag"), 0, "is not True or False"),
        (FieldRule("choice", ("a", "b")), "b", None),
        (FieldRule("choice", ("a", "b")), "c", "is not one of a, b"),
    ],
)
def test_each_rule_names_what_it_refuses(rule: FieldRule, value: Any, problem: str | None) -> None:
    assert field_problem(rule, value) == problem


@pytest.mark.parametrize(
    ("value", "positive", "problem"),
    [
        (0, False, None),
        (0.0, True, "is not a finite number of seconds > 0"),
        (1e-9, True, None),
        (-1e-9, False, "is not a finite number of seconds >= 0"),
        (math.inf, False, "is not a finite number of seconds >= 0"),
        (-math.inf, True, "is not a finite number of seconds > 0"),
        (math.nan, False, "is not a finite number of seconds >= 0"),
        (True, True, "is not a finite number of seconds > 0"),
    ],
)
def test_seconds_a_bound_lasts_are_finite(value: Any, positive: bool, problem: str | None) -> None:
    assert seconds_problem(value, positive=positive) == problem


@pytest.mark.parametrize("lease_s", [0, -1.0, math.inf, math.nan, True])
def test_a_lease_that_never_holds_or_never_lapses_is_refused(lease_s: Any) -> None:
    with pytest.raises(ValueError, match=r"^lease_s: .* is not a finite number of seconds > 0$"):
        check_lease("replica", lease_s)


def test_a_strict_class_refuses_a_field_no_rule_reads_and_a_lax_one_skips_it() -> None:
    @dataclasses.dataclass(frozen=True)
    class Knobs:
        names: tuple[str, ...] = ()
        limit: int = 1

    assert field_rules(Knobs, floats="number", strict=False) == {"limit": FieldRule("count")}
    with pytest.raises(TypeError, match=r"^Knobs\.names: a checked field is an int, int \| None"):
        field_rules(Knobs, floats="number", strict=True)
    with pytest.raises(KeyError, match=r"Knobs\.limit: -1 is not an integer >= 0"):
        check_fields(Knobs(limit=-1), KeyError, floats="number")
    check_fields(Knobs(), KeyError, floats="number")


@pytest.mark.parametrize("floats", ["number", "positive"])
def test_the_rules_of_a_class_follow_each_declared_type(floats: Any) -> None:
    @dataclasses.dataclass(frozen=True)
    class Every:
        flag: bool = True
        count: int = 1
        limit: int | None = None
        seconds: float = 1.0
        mode: Literal["a", "b"] = "a"
        label: str | None = None
        names: tuple[str, ...] = ()

    assert field_rules(Every, floats=floats, strict=False) == {
        "flag": FieldRule("flag"),
        "count": FieldRule("count"),
        "limit": FieldRule("count", none=True),
        "seconds": FieldRule(floats),
        "mode": FieldRule("choice", ("a", "b")),
    }
    with pytest.raises(TypeError, match=r"^Every\.label: .* not str \| None$"):
        field_rules(Every, floats=floats, strict=True)


def test_a_float_rule_is_number_or_positive() -> None:
    with pytest.raises(ValueError, match=r"^floats is 'number' or 'positive', not 'NUMBER'$"):
        field_rules(Budgets, floats="NUMBER", strict=False)  # type: ignore[arg-type]
