"""A frozen dataclass's settings checked by their declared types, the same in every era.

The eras' configurations (:class:`~fsm.sse.guard.GuardConfig`,
:class:`~fsm.mrtr.call.MrtrConfig`, :class:`~fsm.tasks.task.TaskConfig`) and the worlds'
bounds (:class:`~fsm.worlds.common.WorldBounds`) check their fields here as they are built,
by the type each field declares:

* ``int``: a count, an integer >= 0 (a ``bool`` is not one); ``int | None``: or ``None``,
  no limit;
* ``float``: a number, an ``int`` or a ``float`` (not a ``bool``, never NaN): for a
  configuration ``>= 0`` (``inf`` allowed: no limit; ``0``: none, at once), for bounds
  ``> 0`` (:data:`FloatRule`);
* ``bool``: ``True`` or ``False``;
* a ``Literal``: one of its values.

A configuration's fields of other types (tables, callables, sets) are its own to check;
bounds have no others (``strict``: ``TypeError`` for one).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, NamedTuple

__all__ = [
    "FieldRule",
    "FloatRule",
    "check_fields",
    "field_problem",
    "field_rules",
    "seconds_problem",
]

FloatRule = Literal["number", "positive"]
"""How a ``float`` field is checked: a number >= 0 (``"number"``) or > 0 (``"positive"``)."""


class FieldRule(NamedTuple):
    """How one field is checked (and, for bounds, read from text), from its declared type."""

    kind: Literal["count", "flag", "number", "positive", "choice"]
    choices: tuple[Any, ...] = ()
    """The values of a ``Literal`` field."""
    none: bool = False
    """A count that may also be ``None``."""


_RULES: dict[tuple[type, FloatRule, bool], dict[str, FieldRule]] = {}


def field_rules(cls: type, *, floats: FloatRule, strict: bool) -> dict[str, FieldRule]:
    """The rule of each checked field of the dataclass ``cls``, from its type (see the
    module docstring), computed once per class. ``strict``: ``TypeError`` for a field of
    any other type; otherwise such a field is not checked here. ``ValueError`` for a
    ``floats`` that is not a :data:`FloatRule`."""
    if floats not in ("number", "positive"):
        raise ValueError(f"floats is 'number' or 'positive', not {floats!r}")
    known = _RULES.get((cls, floats, strict))
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    rules: dict[str, FieldRule] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        if hint is bool:
            rules[f.name] = FieldRule("flag")
        elif hint is int or (
            typing.get_origin(hint) is types.UnionType and args == (int, types.NoneType)
        ):
            rules[f.name] = FieldRule("count", none=hint is not int)
        elif hint is float:
            rules[f.name] = FieldRule(floats)
        elif typing.get_origin(hint) is Literal:
            rules[f.name] = FieldRule("choice", args)
        elif strict:
            raise TypeError(
                f"{cls.__name__}.{f.name}: a checked field is an int, int | None, bool, "
                f"float or a Literal, not {hint}"
            )
    _RULES[(cls, floats, strict)] = rules
    return rules


def field_problem(rule: FieldRule, value: Any) -> str | None:
    """What is wrong with ``value`` under ``rule``, in words (``"is not an integer >=
    0"``), or ``None`` if it is allowed."""
    if rule.kind == "choice":
        return (
            None if value in rule.choices else f"is not one of {', '.join(map(str, rule.choices))}"
        )
    if rule.kind == "flag":
        return None if type(value) is bool else "is not True or False"
    if rule.kind == "count":
        if (value is None and rule.none) or (type(value) is int and value >= 0):
            return None
        return "is not an integer >= 0" + (" or None (no limit)" if rule.none else "")
    number = type(value) in (int, float) and not math.isnan(value)
    if rule.kind == "positive":
        return None if number and value > 0 else "is not a number > 0"
    return None if number and value >= 0 else "is not a number >= 0"


def seconds_problem(value: float, *, positive: bool) -> str | None:
    """What is wrong with ``value`` as the seconds a bound lasts, in words (``"is not a
    finite number of seconds > 0"``), or ``None`` if it is allowed: an ``int`` or a
    ``float`` (not a ``bool``), finite (a bound that never ends is no bound), ``> 0`` when
    ``positive``, else ``>= 0``. The gateway's limits, its options and its store's leases
    share it."""
    number = type(value) in (int, float) and math.isfinite(value)
    if number and (value > 0 if positive else value >= 0):
        return None
    return f"is not a finite number of seconds {'> 0' if positive else '>= 0'}"


def check_fields(
    obj: Any, error: type[Exception], *, floats: FloatRule, strict: bool = False
) -> None:
    """Raise ``error`` naming the first field of the dataclass instance ``obj`` whose
    value its rule (:func:`field_rules`) refuses: ``"GuardConfig.max_streams: -1 is not
    an integer >= 0"``."""
    cls = type(obj)
    for name, rule in field_rules(cls, floats=floats, strict=strict).items():
        value = getattr(obj, name)
        problem = field_problem(rule, value)
        if problem is not None:
            raise error(f"{cls.__name__}.{name}: {value!r} {problem}")
