"""What a world tells a client policy and what the policy does are typed tuples, one
``NamedTuple`` per kind, equal to (and hashed as) the tagged tuples older policies match
on and return; an output of no kind the world knows stops the check, in every era, and so
does any other result a world cannot take, each naming the policy's line."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from fsm.checker import ModelError, check, replay
from fsm.worlds import mrtr as mrtr_world
from fsm.worlds import sse as world
from fsm.worlds.common import Answer, End, OutputError, PolicyError, Present, Tick, Withdraw
from models.mcp_sdk_2_3 import MODEL as SDK
from models.mcp_sdk_2_3 import SdkPolicy
from models.mcp_sdk_2_3_mrtr import DRIVER
from models.mcp_sdk_2_3_mrtr import MODELS as DRIVER_MODELS

TYPED_AND_PLAIN = [
    (world.Event(3, "req", 0), ("event", 3, "req", 0)),
    (world.Cut(False), ("cut", False)),
    (world.Timer(), ("timer",)),
    (world.Resumed(), ("resumed",)),
    (world.ResumeRefused(), ("resume_404",)),
    (world.PostOutcome(0, "rpc"), ("outcome", 0, "rpc")),
    (world.GetOpened(2), ("get_open", 2)),
    (world.GetCut(2), ("get_cut", 2)),
    (world.NewSession(1), ("session", 1)),
    (world.Submit(0, (("action", "accept"),)), ("submit", 0, (("action", "accept"),))),
    (world.Wait(), ("wait",)),
    (world.Resume(4), ("resume", 4)),
    (world.GetEnd(1, "failed"), ("get_end", 1, "failed")),
    (mrtr_world.Complete(), ("result", "complete")),
    (mrtr_world.InputRequired(0, (1, 2)), ("result", "ir", 0, (1, 2))),
    (mrtr_world.Error("lost"), ("error", "lost")),
    (mrtr_world.Retry(None, ()), ("retry", None, ())),
    (Answer(1), ("answer", 1)),
    (Tick(), ("tick",)),
    (Present(1), ("present", 1)),
    (Withdraw(1), ("withdraw", 1)),
    (End("completed"), ("end", "completed")),
]


@pytest.mark.parametrize(("typed", "plain"), TYPED_AND_PLAIN, ids=lambda x: repr(x))
def test_a_typed_input_or_output_is_its_tagged_tuple(typed: Any, plain: tuple[Any, ...]) -> None:
    assert typed == plain and hash(typed) == hash(plain)
    assert typed.op == plain[0] and tuple(typed) == plain
    assert type(typed)._make(plain) == typed
    copy = pickle.loads(pickle.dumps(typed))
    assert copy == typed and type(copy) is type(typed)


def test_the_kinds_are_told_apart() -> None:
    kinds = {t for t, _ in TYPED_AND_PLAIN}
    assert len(kinds) == len(TYPED_AND_PLAIN)  # no two kinds collide as memo keys
    assert world.Timer() != world.Resumed() and world.Wait() != Tick()


class _Plain:
    """A policy that returns its outputs in the old plain spelling, or misspells one kind
    (``misspell``: old -> new tag), or drops a field of one (``shorten``: a tag)."""

    def __init__(self, policy: Any, misspell: tuple[str, str] = ("", ""), shorten: str = ""):
        self.policy, self.name = policy, policy.name
        self.misspell, self.shorten = misspell, shorten

    def init(self) -> Any:
        return self.policy.init()

    def step(self, state: Any, *args: Any) -> tuple[Any, tuple[tuple[Any, ...], ...]]:
        state, outputs = self.policy.step(state, *args)
        old, new = self.misspell
        plain = [(new, *o[1:]) if o[0] == old else tuple(o) for o in outputs]
        return state, tuple(o[:-1] if o[0] == self.shorten else o for o in plain)


def test_a_policy_may_return_the_plain_spelling() -> None:
    typed, plain = check(SDK), check(world.World(_Plain(SdkPolicy()), SDK.bounds))
    assert (plain.states, plain.transitions) == (typed.states, typed.transitions) == (501, 1116)
    assert [r.verdict for r in plain.results] == [r.verdict for r in typed.results]
    model = DRIVER_MODELS[0]
    typed = check(model)
    plain = check(mrtr_world.MrtrWorld(_Plain(DRIVER), model.bounds))
    assert (plain.states, plain.transitions) == (typed.states, typed.transitions)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            world.World(_Plain(SdkPolicy(), misspell=("present", "presnt")), SDK.bounds),
            "returned ('presnt', 0), not an output of this world; its outputs are present(request),"
            " withdraw(request), submit(request, answer), wait(), resume(cursor), end(outcome),"
            " get_end(generation, outcome), reshow(request)",
        ),
        (
            world.World(_Plain(SdkPolicy(), shorten="resume"), SDK.bounds),
            "returned ('resume',), not an output of this world",
        ),
        (
            mrtr_world.MrtrWorld(
                _Plain(DRIVER, misspell=("retry", "retyr")), DRIVER_MODELS[0].bounds
            ),
            "not an output of this world; its outputs are present(request), withdraw(request),"
            " retry(token, answers), end(outcome)",
        ),
    ],
    ids=["sse-misspelled", "sse-short", "mrtr-misspelled"],
)
def test_an_output_of_no_known_kind_stops_the_check(model: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        check(model)
    assert f"model raised {OutputError.__name__}: policy " in str(info.value)
    assert message in str(info.value)
    assert info.value.path is not None  # the path to the state where the policy said it
    where = info.value.location  # the line of _Plain.step that made the output
    made = _PLAIN_RETURN if "('resume',)" in message else _PLAIN_SPELLS
    assert where is not None and Path(where.file) == Path(__file__)
    assert (where.function, where.source) == ("step", made)


_PLAIN_SPELLS = "plain = [(new, *o[1:]) if o[0] == old else tuple(o) for o in outputs]"
_PLAIN_RETURN = "return state, tuple(o[:-1] if o[0] == self.shorten else o for o in plain)"


class Broken:
    """Shows each request once and ends with the tool call; ``fault`` names one way of
    returning what the world cannot take (each on its own line, marked by its name)."""

    name = "broken"

    def __init__(self, fault: str = "") -> None:
        self.fault = fault

    def init(self) -> tuple[int, ...]:
        return ()

    def step(self, state: tuple[int, ...], inp: world.Input) -> Any:
        if isinstance(inp, world.Event) and inp.what == "req":
            r, fault = inp.request, self.fault
            if fault == "misspelled":
                return state, (("presnt", r),)  # misspelled
            if fault == "one output":
                return state, world.Present(r)  # one output
            if fault == "field type":
                return state, (world.Present(str(r)),)  # field type
            if fault == "unhashable state":
                return [*state, r], ()  # unhashable state
            if fault == "no pair":
                return (world.Present(r),)  # no pair
            if fault == "outputs not a tuple":
                return state, None  # outputs not a tuple
            if fault == "made in a helper":
                return self.helper(state, r)
            return (*state, r), (world.Present(r),)
        if isinstance(inp, world.Event) and inp.what == "resp":
            return state, (End("completed"),)
        return state, ()

    def helper(self, state: tuple[int, ...], r: int) -> Any:
        return state, (("present", r, "extra"),)  # made in a helper


BROKEN = world.Bounds(cuts=0, user="never")
SOURCE = Path(__file__).read_text().splitlines()


@pytest.mark.parametrize(
    ("fault", "error", "message"),
    [
        (
            "misspelled",
            OutputError,
            "policy 'broken' returned ('presnt', 0), not an output of this world; its outputs"
            " are present(request), withdraw(request), submit(request, answer)",
        ),
        (
            "one output",
            OutputError,
            "policy 'broken' returned one output Present(0) where a tuple of outputs goes:"
            " write (Present(0),)",
        ),
        (
            "field type",
            OutputError,
            "policy 'broken' returned Present('0'): the request of present is '0', not int",
        ),
        (
            "unhashable state",
            PolicyError,
            "policy 'broken' returned a state that cannot be hashed (unhashable type: 'list'):"
            " [0]; a policy's state is an immutable value",
        ),
        (
            "no pair",
            PolicyError,
            "policy 'broken' returned (Present(0),) for Event(1, 'req', 0), not a pair"
            " (state, outputs)",
        ),
        (
            "outputs not a tuple",
            OutputError,
            "policy 'broken' returned outputs None, not a tuple of outputs",
        ),
        (
            "made in a helper",
            OutputError,
            "policy 'broken' returned ('present', 0, 'extra'), not an output of this world",
        ),
    ],
)
def test_a_result_the_world_cannot_take_names_the_policys_line(
    fault: str, error: type[PolicyError], message: str
) -> None:
    with pytest.raises(ModelError) as info:
        check(world.World(Broken(fault), BROKEN))
    assert str(info.value).startswith(f"model raised {error.__name__}: {message}")
    line = next(n for n, text in enumerate(SOURCE, 1) if text.endswith(f"  # {fault}"))
    where = info.value.location
    assert where is not None and Path(where.file) == Path(__file__)
    function = "helper" if fault == "made in a helper" else "step"
    assert (where.line, where.function) == (line, function)
    text = info.value.format_text().splitlines()[1]
    assert text.startswith(f"  at {where}, in {function}: return ")


def test_the_same_policy_returning_what_the_world_takes_is_checked() -> None:
    report = check(world.World(Broken(), BROKEN))
    assert all(report.result(p).verdict.ok for p in ("P1", "P2", "P3", "P4", "P5", "P6", "P7"))


def test_a_policy_error_carries_the_line_outside_the_checker() -> None:
    """The world raises the typed error, naming the line as SyntaxError does."""
    model = world.World(Broken("field type"), BROKEN)
    with pytest.raises(OutputError) as info:
        replay(model, ["server sends elicitation 0", "deliver 0", "deliver 1"])
    line = next(n for n, text in enumerate(SOURCE, 1) if text.endswith("  # field type"))
    assert (Path(info.value.filename or ""), info.value.lineno) == (Path(__file__), line)
    assert info.value.function == "step"
