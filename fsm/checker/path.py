"""Counterexample value types: :class:`Path` (a finite trace) and :class:`Lasso` (trace + loop).

A path starts at one of the model's initial states (``init_index`` is its position in
``model.init_states()`` after removing duplicates) and lists named steps, each with the state it
leads to. Steps are recorded *by name* (``str(action)``), so a path survives as text (JSON, a
generated pytest module) and is replayed with :func:`replay`, which re-derives each action from
the model: if the model changed, replay fails with a clear message instead of silently passing.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, TypeVar

from fsm.checker.model import Model

S = TypeVar("S", bound=Hashable)


class ReplayError(AssertionError):
    """A named step is not enabled (or is ambiguous) where a replay expects it."""


@dataclass(frozen=True)
class Step:
    """One transition of a path: the action's name, the (formatted) state it leads to and
    what the model says the step does besides (``note``: its ``describe_step``, a world's
    client outputs; "" when it says nothing)."""

    action: str
    state: str
    note: str = ""


@dataclass(frozen=True)
class Path:
    """A finite trace from an initial state; ``states`` holds the raw states (init first)."""

    init: str
    steps: tuple[Step, ...]
    init_index: int = 0
    loop_start: int | None = None
    states: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    @property
    def names(self) -> list[str]:
        """The step names, in order: what :func:`replay` takes."""
        return [step.action for step in self.steps]

    def __len__(self) -> int:
        return len(self.steps)

    def format_text(self, indent: str = "  ") -> str:
        """Numbered steps with the state after each, and on the next line what the step
        did when the model says (``-> note``); a lasso marks where its loop starts."""
        width = max([len(s.action) for s in self.steps] + [6])
        lines = [f"{indent}{0:>3}. {'(init)':<{width}}  {self.init}"]
        for number, step in enumerate(self.steps, start=1):
            if self.loop_start is not None and number == self.loop_start + 1:
                lines.append(f"{indent}     -- loop starts here --")
            lines.append(f"{indent}{number:>3}. {step.action:<{width}}  {step.state}")
            if step.note:
                lines.append(f"{indent}     {'':<{width}}  -> {step.note}")
        if self.loop_start is not None:
            lines.append(f"{indent}     back to step {self.loop_start}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """``{init, init_index, steps: [{action, state, note}], loop_start}``."""
        return {
            "init": self.init,
            "init_index": self.init_index,
            "steps": [{"action": s.action, "state": s.state, "note": s.note} for s in self.steps],
            "loop_start": self.loop_start,
        }

    def to_pytest(
        self,
        model_ref: str,
        property_name: str,
        *,
        model_name: str | None = None,
        settings: Mapping[str, str] | None = None,
        builtin: bool = False,
        regression: bool = False,
    ) -> str:
        """A complete pytest module that loads the model, replays this path by name and
        judges ``property_name`` along it.

        ``model_ref`` is the model file: an absolute path is written as given, a relative
        one is taken relative to the directory the module is written to (it runs from
        anywhere); with ``builtin`` it is the name of a shipped model
        (:func:`~fsm.checker.loader.builtin_model_file`), found wherever the library is
        installed. ``model_name`` selects one model of a file defining ``MODELS``;
        ``settings`` are the bounds the path was found with (the model's ``with_bounds``,
        ``fsm check --set``).

        Two kinds of module, each saying in its test names and docstrings what it asserts:

        * a **witness** (the default): its test ``..._still_violated`` passes while the
          model violates the property along the path and fails once it does not (the bug
          is fixed, or the model changed), saying so;
        * a **regression** test (``regression=True``): it fails while the bug exists. Its
          ``..._not_violated_along_recorded_path`` fails while the path still replays to a
          violation (a path that no longer replays passes); its ``..._holds`` checks the
          whole model and fails while the property is violated anywhere, or unknown.
        """
        prefix = f"{model_name}_" if model_name else ""
        slug = _slug(f"{prefix}{property_name}")
        prop = _shown(property_name)  # prose: escaped for a docstring by _doc below
        in_model = f" in model {model_name!r}" if model_name else ""
        shape = " (a lasso: it loops back)" if self.loop_start is not None else ""
        if regression:
            head = (
                f"Regression tests for {property_name!r}{in_model}: they FAIL WHILE THE BUG EXISTS."
            )
            body = (
                f"`fsm check` found {prop} violated along the path STEPS{shape}. The first"
                " test replays it and fails while it still violates the property; the second"
                f" checks the whole model and fails while {prop} is violated anywhere in it"
                " (or unknown: a bound was hit). Both pass once the bug is fixed."
            )
            made = "Generated by `fsm check --write-tests DIR --regression`."
        else:
            head = (
                f"A counterexample to {property_name!r}{in_model}: this test PASSES WHILE THE"
                " BUG EXISTS."
            )
            body = (
                f"It asserts that the path STEPS{shape} still violates {prop}. Once it does"
                " not (the bug is fixed, or the model changed) the test fails, saying so:"
                " delete it then. Tests that guard a fix fail while the bug exists:"
                " `fsm check --write-tests DIR --regression` writes those."
            )
            made = "Generated by `fsm check --write-tests DIR`."
        doc = [
            f'"""{_doc(head)}',
            "",
            *map(_doc, textwrap.wrap(body, 88)),
            "",
            f"{made} Steps replay by name.",
            '"""',
        ]
        relative = not builtin and not PurePath(model_ref).is_absolute()
        names = ["load_model", "replay", "violated_at"]
        if regression:
            names += ["ReplayError", "Verdict", "check"]
        if builtin:
            model_file = f"builtin_model_file({_q(model_ref)})"
        elif relative:
            model_file = (
                f"str(Path(__file__).resolve().parent / {_q(PurePath(model_ref).as_posix())})"
            )
        else:
            model_file = _q(model_ref)
        lines = [
            *doc,
            "",
            "from __future__ import annotations",
            "",
            *(["from pathlib import Path"] if relative else []),
            "from typing import Any",
            "",
            f"from fsm.checker import {', '.join(sorted(names))}",
            *(["from fsm.checker.loader import builtin_model_file"] if builtin else []),
            "",
            f"MODEL_FILE = {model_file}",
            f"MODEL_NAME = {_q(model_name)}",
            "SETTINGS: dict[str, str] = {"
            + ", ".join(f"{_q(k)}: {_q(v)}" for k, v in (settings or {}).items())
            + "}",
            f"PROPERTY = {_q(property_name)}",
            f"INIT = {self.init_index!r}",
            f"LOOP_START = {self.loop_start!r}",
            "STEPS = [",
            *(f"    {_q(name)}," for name in self.names),
            "]",
            "",
            "",
            "def _model() -> Any:",
            '    """The model, with the bounds the path was found with."""',
            "    model = load_model(MODEL_FILE, name=MODEL_NAME)",
            "    return model.with_bounds(SETTINGS) if SETTINGS else model",
            "",
            "",
        ]
        if regression:
            lines += [
                f"def test_{slug}_not_violated_along_recorded_path() -> None:",
                f'    """Fails while the recorded path still violates {_doc(prop)}.',
                "",
                "    A path that no longer replays (the fix changed what happens along it)",
                '    passes: the next test judges the whole model."""',
                "    model = _model()",
                "    try:",
                "        states = replay(model, STEPS, init=INIT)",
                "    except ReplayError:",
                "        return",
                "    assert not violated_at(model, PROPERTY, states, loop_start=LOOP_START), (",
                '        f"{PROPERTY} is still violated along the recorded path:"',
                '        " the bug is not fixed"',
                "    )",
                "",
                "",
                f"def test_{slug}_holds() -> None:",
                f'    """Fails while the model violates {_doc(prop)} anywhere, or the check is',
                '    incomplete; passes once the bug is fixed."""',
                "    result = check(_model()).result(PROPERTY)",
                "    assert result.verdict is Verdict.HOLDS, result.format_text()",
            ]
        else:
            lines += [
                f"def test_{slug}_still_violated() -> None:",
                f'    """Passes while the model violates {_doc(prop)} along the recorded path;',
                '    fails once it does not."""',
                "    model = _model()",
                "    states = replay(model, STEPS, init=INIT)",
                "    assert violated_at(model, PROPERTY, states, loop_start=LOOP_START), (",
                '        f"the recorded path no longer violates {PROPERTY}: the bug it recorded"',
                '        " is fixed or the model changed; delete this test (fsm check"',
                '        " --write-tests DIR --regression writes tests that guard a fix)"',
                "    )",
            ]
        return "\n".join(lines) + "\n"


def _q(value: str | None) -> str:
    """``value`` as a Python literal, in double quotes where that needs no escape."""
    if _plain(value):
        return f'"{value}"'
    return repr(value)


def _plain(value: str | None) -> bool:
    """Whether ``value`` reads the same written raw between double quotes: printable,
    with no ``"`` and no backslash."""
    return value is not None and value.isprintable() and '"' not in value and "\\" not in value


def _shown(name: str) -> str:
    """A name as prose shows it: as is when plain (:func:`_plain`), else its ``repr``
    (no raw line break, control character or unpaired quote)."""
    return name if _plain(name) else repr(name)


def _doc(text: str) -> str:
    """``text`` written inside a triple-quoted docstring of generated code so that it reads
    as ``text``: every backslash and double quote escaped (nothing in it ends the string)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True)
class Lasso(Path):
    """A path whose last state equals the state after step ``loop_start`` (0 = the init state),
    or has its system state (a model with ``system_state``: the loop is a cycle of system
    states, which going round again closes as a cycle of whole states):
    ``steps[:loop_start]`` reach the cycle, ``steps[loop_start:]`` go round it once."""

    def __post_init__(self) -> None:
        if self.loop_start is None or not 0 <= self.loop_start < len(self.steps):
            raise ValueError("a lasso needs 0 <= loop_start < number of steps")

    @property
    def prefix(self) -> tuple[Step, ...]:
        """The steps leading to the cycle."""
        return self.steps[: self.loop_start]

    @property
    def loop(self) -> tuple[Step, ...]:
        """The steps of the cycle."""
        return self.steps[self.loop_start :]


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower() or "x"


def replay(model: Model[S, Any], step_names: Sequence[str], init: int = 0) -> list[S]:
    """Replay ``step_names`` from initial state number ``init``; return init + each next state.

    At each step the action whose ``str()`` equals the name is looked up among
    ``model.actions(state)``; :class:`ReplayError` says which step failed and what was enabled
    if no applicable action has that name, or if several with different successors do.
    """
    inits = list(dict.fromkeys(model.init_states()))
    if not 0 <= init < len(inits):
        raise ReplayError(f"model has {len(inits)} initial state(s), no number {init}")
    states = [inits[init]]
    for number, name in enumerate(step_names, start=1):
        state = states[-1]
        enabled: list[str] = []
        successors: list[S] = []
        for action in model.actions(state):
            nxt = model.next_state(state, action)
            if nxt is None:
                continue
            enabled.append(str(action))
            if str(action) == name and nxt not in successors:
                successors.append(nxt)
        if len(successors) != 1:
            problem = "is not enabled" if not successors else "is ambiguous"
            raise ReplayError(
                f"step {number} {name!r} {problem} in state {state!r}; enabled: {enabled}"
            )
        states.append(successors[0])
    return states
