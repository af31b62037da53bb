"""What every closed world the checker explores shares, whatever the protocol era.

A world is a client policy against an environment (server, network, user) within
bounds; the checker explores every interleaving of the environment's moves. The eras
differ in their environment and in what the client is told and does
(:mod:`fsm.worlds.sse`: SSE resumption, 2025; :mod:`fsm.worlds.mrtr`: input rounds, 2026;
:mod:`fsm.worlds.tasks`: task polls);
everything else is here, once:

* **validated bounds** (:class:`WorldBounds`): every field is checked on construction by
  its declared type (a count at most :data:`MAX_COUNT`), and set from text by ``fsm check
  --set`` (:meth:`WorldBounds.updated`); a bad value raises :class:`BoundsError` naming the
  field and what it allows;
* **the step** (:class:`WorldBase`): a state is an interned environment (:class:`EnvBase`)
  and an interned client side (:class:`Agent`: the policy's state and the monitor's).
  Far fewer of each exist than states, so each keeps the memo of what a step computed
  there: an environment its enabled moves, each move's effect and the effect of each batch
  of client operations; an agent its reaction to each input. A step of a warm world is
  three dictionary lookups;
* **inputs and outputs** as typed tuples (:class:`Present`, :class:`Answer`, ...): each a
  ``NamedTuple`` whose first field is its kind's tag, so ``Present(0) == ("present", 0)``
  and both hash alike. A policy may still return the plain tuple spelling; an output of
  no kind the world knows raises :class:`OutputError`;
* **the standard properties**: P1-P7 of the shared monitor (:mod:`fsm.properties`) as
  invariants, ``P5-quiescent`` (the checker's deadlock check: an ended interaction may
  rest), ``L1`` (the checker's cycle detection), and the witnesses ``presented`` and
  ``completed`` that show a model is not vacuous;
* **a decider as a policy** (:class:`SnapshotPolicy`): any sans-IO decider with
  ``feed``/``snapshot``/``restore`` (the guard, an MRTR call), each of its decisions
  computed once.

A variant subclasses :class:`WorldBase` with its environment (an :class:`EnvBase` subclass,
the moves enabled in one, each move's edit) and says what an input tells the client and
what its outputs do, as observations for the monitor and as edits of the environment. A
world of one interaction whose client is told the clock (MRTR, tasks) subclasses
:class:`ClockedWorld`, which steps the policy and reads the outputs every era shares.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, NamedTuple, Protocol, Self, TypeVar, cast

from fsm import properties as P
from fsm.checker import BaseModel, Property
from fsm.checker.location import is_model_code
from fsm.fields import FieldRule, check_fields, field_rules
from fsm.machines.spec import ProductSpec

# ------------------------------------------------------------------ bounds


class BoundsError(ValueError):
    """A bounds field set to a value it does not allow; the message names the field and
    the values it allows."""


UserMode = Literal["answers", "never"]
"""The user answers each presented prompt (at any time), or never."""

_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


MAX_COUNT = 16
"""The most any count of a world's bounds may be (``requests``, ``cuts``, ``questions``,
...; ``None``, where a count allows it, still means no limit). A world's state is as wide
as its counts and each state keeps its environment's moves, so what a state holds grows
with the square of a count such as ``requests``: about 7 KB at 16, 70 MB at 2,000, where
ten states filled the memory ``max_states`` was meant to bound. Every shipped model uses
4 or fewer."""


class WorldBounds:
    """The base of a world's bounds: a frozen dataclass whose fields are checked by their
    declared type on construction (:class:`BoundsError` naming the field and what it
    allows; a count is an integer from 0 to :data:`MAX_COUNT`), and set from text by
    :meth:`updated`.

    Every world's bounds have ``user`` (the user answers, or never) and ``ttl`` (a
    request's client-side age limit, the monitor's budget). A subclass checks what
    involves several fields in :meth:`_check`.

    Example::

        @dataclass(frozen=True, slots=True)
        class MyBounds(WorldBounds):
            requests: int = 1
            user: UserMode = "answers"
            ttl: float = 0.5
    """

    __slots__ = ()

    user: UserMode
    ttl: float

    def __post_init__(self) -> None:
        check_fields(self, BoundsError, floats="positive", strict=True)
        for name, rule in field_rules(type(self), floats="positive", strict=True).items():
            value = getattr(self, name)
            if rule.kind == "count" and value is not None and value > MAX_COUNT:
                raise BoundsError(
                    f"{type(self).__name__}.{name}: {value!r} is over {MAX_COUNT}, the most a"
                    " count of a world's bounds may be (a wider world fills the memory"
                    " before the state bound stops the search)"
                )
        self._check()

    def _check(self) -> None:
        """Raise :class:`BoundsError` for a combination of fields that is not allowed."""

    def updated(self, settings: Mapping[str, str]) -> Self:
        """A copy with fields set from text, as the command line gives them
        (``{"requests": "2", "replay": "inclusive", "reaper": "true"}``); BoundsError for
        an unknown field or a value the field does not allow."""
        rules = field_rules(type(self), floats="positive", strict=True)
        changes: dict[str, Any] = {}
        for name, text in settings.items():
            if name not in rules:
                raise BoundsError(f"no bound {name!r}; the bounds are {', '.join(rules)}")
            changes[name] = self._parse(name, rules[name], text.strip())
        updated: Self = dataclasses.replace(typing.cast(Any, self), **changes)
        return updated

    def _parse(self, name: str, rule: FieldRule, text: str) -> Any:
        """The value of field ``name`` written as ``text`` (left as text when it is not a
        number or a flag: construction judges it)."""
        if rule.none and text.lower() == "none":
            return None
        if rule.kind == "flag":
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise BoundsError(f"{type(self).__name__}.{name}: {text!r} is not true or false")
        try:
            return {"count": int, "positive": float}.get(rule.kind, str)(text)
        except ValueError:
            return text


# ------------------------------------------------------------------ inputs and outputs


class Tagged:
    """Mixed into each typed input and output of a world (a ``NamedTuple`` whose first field
    ``op`` is its tag, or several fixed ones): built without its tags, and pickled whole
    (rebuilt by ``_make``)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        me: Any = self
        return (type(me)._make, (tuple(me),))

    def __repr__(self) -> str:
        """As it is built: ``Present(0)``, ``Complete()`` (without its tags)."""
        me: Any = self
        tags = _TAGS.get(type(self))
        if tags is None:
            hints = typing.get_type_hints(type(self))
            fixed = [
                typing.get_origin(hints[f]) is Literal and len(typing.get_args(hints[f])) == 1
                for f in me._fields
            ]
            tags = _TAGS[type(self)] = fixed.index(False) if False in fixed else len(fixed)
        return f"{type(self).__name__}({', '.join(map(repr, tuple(me)[tags:]))})"


_TAGS: dict[type, int] = {}
"""How many leading fields of each typed input or output are its fixed tags."""


class Answer(Tagged, NamedTuple("Answer", [("op", Literal["answer"]), ("request", int)])):
    """Input: the user answered the prompt of ``request``."""

    __slots__ = ()

    def __new__(cls, request: int) -> Answer:
        return super().__new__(cls, "answer", request)


class Tick(Tagged, NamedTuple("Tick", [("op", Literal["tick"])])):
    """Input: the client's clock passed (a timer fired)."""

    __slots__ = ()

    def __new__(cls) -> Tick:
        return super().__new__(cls, "tick")


class Restart(Tagged, NamedTuple("Restart", [("op", Literal["restart"])])):
    """Input: the client's process ended (a world's ``crashes`` bound) and a new one
    started from what the client keeps across it (its store, its persisted session or
    task id), in the same session."""

    __slots__ = ()

    def __new__(cls) -> Restart:
        return super().__new__(cls, "restart")


class Present(Tagged, NamedTuple("Present", [("op", Literal["present"]), ("request", int)])):
    """Output: show the user the prompt of ``request``."""

    __slots__ = ()

    def __new__(cls, request: int) -> Present:
        return super().__new__(cls, "present", request)


class Withdraw(Tagged, NamedTuple("Withdraw", [("op", Literal["withdraw"]), ("request", int)])):
    """Output: take the prompt of ``request`` away; the client declares it dead."""

    __slots__ = ()

    def __new__(cls, request: int) -> Withdraw:
        return super().__new__(cls, "withdraw", request)


class End(Tagged, NamedTuple("End", [("op", Literal["end"]), ("outcome", str)])):
    """Output: end the interaction with ``outcome`` (``"completed"``, ``"failed"``)."""

    __slots__ = ()

    def __new__(cls, outcome: str) -> End:
        return super().__new__(cls, "end", outcome)


class PolicyError(ValueError):
    """A client policy broke its world's contract: its ``step`` returned something other
    than a pair ``(state, outputs)``, outputs that are not a tuple or list of outputs, or a
    state that cannot be hashed (states are immutable values); :class:`OutputError` for an
    output of no kind the world knows.

    ``value`` is what the world refused (the output, the state or the whole result);
    ``filename`` and ``lineno`` name the policy's line, as :class:`SyntaxError` does (the
    line of the first function of the model that returned ``value``, so a helper that made
    a misspelled output is named; else the line its ``step`` returned from, else where its
    class or ``step`` is defined), and ``function`` the function; all None when the policy
    is not code of a model (the library's own deciders). The checker reports them as where
    the model failed (:func:`fsm.checker.location.raised_at`)."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value
        """What the world refused: the output, the state or the whole result."""
        self.filename: str | None = None
        self.lineno: int | None = None
        self.function: str | None = None


class OutputError(PolicyError):
    """A client policy returned an output its world does not know: a misspelled kind, the
    wrong number of fields, a field of the wrong type (``Present("0")``), or one output
    where a tuple of them is expected. The message names the output and the world's
    kinds."""


def output_kinds(*kinds: Any) -> dict[str, Any]:
    """The typed outputs ``kinds`` by tag (the ``Literal`` of each one's ``op`` field)."""
    return {typing.get_args(typing.get_type_hints(k)["op"])[0]: k for k in kinds}


def _spelled(kinds: Mapping[str, Any]) -> str:
    return ", ".join(f"{tag}({', '.join(k._fields[1:])})" for tag, k in kinds.items())


Conforms = Callable[[Any], bool]


def _conforms(hint: Any) -> Conforms:
    """Whether a value is of the declared type ``hint`` (the field types outputs declare:
    ``int``, ``str``, ``bool``, ``float``, ``None``, ``Literal``, unions, tuples; anything
    else, ``Any`` included, accepts every value). An ``int`` is not a ``bool``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if hint is float:
        return lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    if hint in (str, bool):
        return lambda v: isinstance(v, hint)
    if hint is None or hint is types.NoneType:
        return lambda v: v is None
    if origin is Literal:
        return lambda v: v in args
    if origin in (types.UnionType, typing.Union):
        alternatives = [_conforms(a) for a in args]
        return lambda v: any(ok(v) for ok in alternatives)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        each = _conforms(args[0])
        return lambda v: isinstance(v, tuple) and all(each(x) for x in v)
    if origin is tuple:
        parts = [_conforms(a) for a in args]
        return lambda v: (
            isinstance(v, tuple)
            and len(v) == len(parts)
            and all(ok(x) for ok, x in zip(parts, v, strict=True))
        )
    return lambda v: True


_FIELD_CHECKS: dict[type, tuple[tuple[str, str, Conforms], ...]] = {}


def _field_checks(kind: type) -> tuple[tuple[str, str, Conforms], ...]:
    """(field, declared type as text, check) of each field of the typed output ``kind``
    after its tag."""
    known = _FIELD_CHECKS.get(kind)
    if known is None:
        hints = typing.get_type_hints(kind)
        fields: tuple[str, ...] = getattr(kind, "_fields", ())
        known = _FIELD_CHECKS[kind] = tuple(
            (f, _type_text(hints[f]), _conforms(hints[f])) for f in fields[1:]
        )
    return known


def _type_text(hint: Any) -> str:
    text = hint.__name__ if isinstance(hint, type) else str(hint)
    return text.replace("typing.", "").replace("NoneType", "None")


def _policy_line(
    run: Callable[[], Any], policy: object, culprit: Any
) -> tuple[str, int, str] | None:
    """Where a model's policy said ``culprit`` (the output, state or result its world
    refused): ``run()`` again (policies are pure) watching what each function of a model's
    code returns, and take the first return that carries ``culprit`` (the function that
    made it, however many helpers it went through); else the line the outermost call into
    a model's code returned from (its ``step``); else the line its ``step`` or its class is
    defined at, if that is a model's code; else None."""
    carried: list[tuple[str, int, str]] = []
    outermost: list[tuple[str, int, str]] = []
    outer: list[types.FrameType] = []

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and not outer and is_model_code(frame.f_code.co_filename):
            outer.append(frame)
        elif event == "return" and outer:
            code = frame.f_code
            if not is_model_code(code.co_filename):
                return
            caller = frame.f_back
            name = code.co_name
            if name in _COMPREHENSIONS and caller is not None:
                name = caller.f_code.co_name  # the function the comprehension is written in
            here = (code.co_filename, frame.f_lineno, name)
            if not carried and _carries(arg, culprit):
                carried.append(here)
            if frame is outer[0]:
                outermost.append(here)
                outer.clear()

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    except Exception:  # the second run says where if it can, nothing else
        pass
    finally:
        sys.setprofile(previous)
    if carried or outermost:
        return (carried or outermost)[-1]
    for defined in (getattr(type(policy), "step", None), type(policy)):
        try:
            file = inspect.getsourcefile(defined) if defined is not None else None
            if file is not None and is_model_code(file) and defined is not None:
                line = inspect.getsourcelines(defined)[1]
                return file, line, getattr(defined, "__qualname__", type(policy).__name__)
        except (OSError, TypeError):
            continue
    return None


_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def _carries(value: Any, culprit: Any, depth: int = 3) -> bool:
    """Whether ``value`` is ``culprit`` or holds it, within ``depth`` levels of tuples and
    lists (as a result holds its outputs, and they their fields)."""
    try:
        if type(value) is type(culprit) and value == culprit:
            return True
    except Exception:  # a value that cannot be compared holds nothing we look for
        return False
    if depth and isinstance(value, tuple | list):
        return any(_carries(v, culprit, depth - 1) for v in value)
    return False


# ------------------------------------------------------------------ states

USER_ANSWER: tuple[tuple[str, Any], ...] = (("action", "accept"),)
"""What the user answers (outputs carry answers as sorted item tuples, hashable)."""


class Move(NamedTuple):
    """An environment step; ``str(move)`` names it in counterexamples."""

    name: str
    arg: Any = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name} {self.arg}"


class EnvBase:
    """The environment's part of a world state: its values, one per name of ``FIELDS``
    (a subclass declares them, and a slot for each).

    Compared by value, hashed once (when first asked). A world interns its environments and keeps
    on each what it computed there: the enabled moves, each move's effect, and the effect of
    each batch of client operations. Equality by value keeps states from different worlds,
    or unpickled ones, correct; interning only makes it fast.
    """

    __slots__ = ("_after", "_hash", "_moves", "_steps", "values")

    FIELDS: ClassVar[tuple[str, ...]] = ()
    _index: ClassVar[dict[str, int]] = {}
    ended: Any
    """Every environment has this field: truthy once the client ended its interaction."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self._assign(values)
        self.values = values
        self._hash: int | None = None
        self._moves: tuple[Move, ...] | None = None
        self._steps: dict[Move, tuple[Self, Any, Hashable]] = {}
        """Each move's next environment, input told (None: nothing), and context."""
        self._after: dict[tuple[Any, ...], Self] = {}
        """The environment after each batch of client outputs."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give a subclass its field index and an ``_assign`` that sets every field in one
        unpacking (compiled once, as ``dataclasses`` and ``namedtuple`` compile theirs):
        environments are made on the checker's hot path."""
        super().__init_subclass__(**kwargs)
        bad = [name for name in cls.FIELDS if not name.isidentifier()]
        if bad:
            raise TypeError(f"{cls.__name__}.FIELDS: not identifiers: {bad}")
        cls._index = {name: i for i, name in enumerate(cls.FIELDS)}
        if cls.FIELDS:
            namespace: dict[str, Any] = {}
            targets = "".join(f"self.{name}, " for name in cls.FIELDS)
            exec(f"def _assign(self, values):\n    {targets}= values\n", namespace)
            cls._assign = namespace["_assign"]  # type: ignore[method-assign]

    def _assign(self, values: tuple[Any, ...]) -> None:
        """Set each field of ``FIELDS`` from ``values``."""
        for name, value in zip(self.FIELDS, values, strict=True):
            setattr(self, name, value)

    def replace(self, **changes: Any) -> Self:
        """A new (not interned) environment with some fields changed; TypeError naming a
        field it does not have."""
        values = list(self.values)
        for name, value in changes.items():
            i = self._index.get(name)
            if i is None:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            values[i] = value
        return type(self)(tuple(values))

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self.values)
        return h

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, EnvBase)
            and type(other) is type(self)
            and hash(self) == hash(other)
            and self.values == other.values
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={v!r}" for f, v in zip(self.FIELDS, self.values, strict=True))
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.values,))


class Agent:
    """The client side of a world state: the client policy's state and the monitor's.

    Compared by value, hashed once at creation. A world interns its agents (one object
    per distinct pair) and keeps on each the memo of its reactions: the policy and the
    monitor are pure, so the reaction to an input in a context (the clock, the session)
    is computed once per distinct agent, however many world states share it.
    """

    __slots__ = ("_hash", "client", "monitor", "reactions", "renamed")

    def __init__(self, client: Any, monitor: P.MonitorState) -> None:
        self.client = client
        self.monitor = monitor
        self._hash = hash((client, monitor))
        self.reactions: dict[tuple[Hashable, tuple[Any, ...]], Reaction] = {}
        """The reaction to each (context, input)."""
        self.renamed: dict[Hashable, Agent] = {}
        """The agent under each renaming of its ids (a world's symmetry)."""

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Agent)
            and self._hash == other._hash
            and self.client == other.client
            and self.monitor == other.monitor
        )

    def __repr__(self) -> str:
        return f"Agent(client={self.client!r}, monitor={self.monitor!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Agent, (self.client, self.monitor))


class Reaction(NamedTuple):
    """The client side's reaction to one input: its next agent, the operations the world
    performs, and the declared transition labels the policy fired."""

    agent: Agent
    outputs: tuple[Any, ...]
    fired: tuple[str, ...]


E = TypeVar("E", bound=EnvBase)
B = TypeVar("B", bound=WorldBounds)
I = TypeVar("I", bound=tuple[Any, ...])  # noqa: E741
O = TypeVar("O", bound=tuple[Any, ...])  # noqa: E741


class WorldState(NamedTuple, Generic[E]):
    """One global state: the environment and the client side."""

    env: E
    agent: Agent

    @property
    def client(self) -> Any:
        """The client policy's state."""
        return self.agent.client

    @property
    def monitor(self) -> P.MonitorState:
        """The property monitor's state (what the client was told and did, judged)."""
        return self.agent.monitor


new_state = tuple.__new__
"""``new_state(WorldState, (env, agent))``: a state without ``WorldState.__new__`` (hot)."""


def transition_label(machine: str, source: str, trigger: str, dest: str) -> str:
    """The coverage label of one declared transition."""
    return f"{machine}: {source} -{trigger}-> {dest}"


class Policy(Protocol):
    """What :class:`WorldBase` itself needs of a policy (each era adds its ``step``).

    Optional: ``fired() -> Iterable[str]``, the declared transition labels the last step
    fired, and ``declared() -> Iterable[str]``, every label (coverage)."""

    name: str

    def init(self) -> Any:
        """The client's state when the interaction has just begun."""
        ...


PC = TypeVar("PC")
PI = TypeVar("PI", contravariant=True)
PO = TypeVar("PO", covariant=True)


class ClockedPolicy(Protocol[PC, PI, PO]):
    """A client under test in a world that tells it the clock (the MRTR and tasks
    worlds), as a pure function of its state ``PC``, the clock and one input ``PI``; it
    answers with outputs ``PO``. Each era names its form (its ``Input`` and ``Output``)."""

    name: str

    def init(self) -> PC:
        """The client's state when the interaction has just begun (its first request is in
        flight)."""
        ...

    def step(self, state: PC, t: float, inp: PI) -> tuple[PC, tuple[PO, ...]]:
        """React to ``inp`` at time ``t``; return the new state and the operations."""
        ...


# ------------------------------------------------------------------ the world


class WorldBase(BaseModel[WorldState[E], Move], Generic[E, B, I, O]):
    """The closed system ``policy`` x an era's environment within ``bounds``.

    ``properties``: the monitor's properties to check (default: all of P1-P7 and L1);
    ``expect``: the properties this model must violate (a model of a faulty client).

    A world memoises what it computes (on its interned environments and agents), so
    checking it twice is cheaper the second time, and it is not thread-safe. The memos live
    on the states' parts: give a world only states it made (or unpickled copies, which
    start with empty memos), never another world's.

    A variant sets :attr:`env_type`, :attr:`opening` and :attr:`outputs`; implements
    :meth:`_initial`, :meth:`_enabled`, :meth:`_edit` (the environment),
    :meth:`_policy_step`, :meth:`_told`, :meth:`_did`, :meth:`_perform` (the client side),
    :meth:`_completed` and :meth:`format_state`; and may add witnesses
    (:meth:`_witnesses`), restate a property (:meth:`_always`) and say why one of its
    own properties, or a restated one, is violated (:meth:`_why`: the monitor's
    properties, P5-quiescent and L1 say why already, through :meth:`why`). Every world
    gets the checker's hooks from here: :meth:`system_state` (lassos over the
    environment and the client, the monitor projected out), :meth:`why` and
    :meth:`describe_step` (the client's outputs on each step of a trace).
    """

    env_type: ClassVar[type[EnvBase]]
    opening: ClassVar[tuple[P.Observation, ...]]
    """What the monitor observes before the first step: the interaction began."""
    outputs: ClassVar[Mapping[str, Any]]
    """The era's typed outputs by tag (:func:`output_kinds`)."""
    subject: ClassVar[str] = "interaction"
    """What the client runs, in the properties' descriptions."""
    presented_doc: ClassVar[str] = "a request is presented (the model is not vacuous)"
    completed_doc: ClassVar[str] = "the interaction can complete with an answer"
    void_doc: ClassVar[str | None] = None
    """Set by a world whose environment has a ``void`` flag (an answer sent into state
    that surely expired, which only the environment can see): P6 then also fails on a
    state with ``void`` set, and this is its description."""

    def __init__(
        self,
        policy: Policy,
        bounds: B,
        *,
        properties: Sequence[str] = tuple(P.PROPERTIES),
        name: str = "",
        expect: Sequence[str] = (),
    ) -> None:
        self.policy, self.bounds = policy, bounds
        self._props = P.property_names(properties)
        self._name = name or policy.name
        self.expected_violations = tuple(expect)
        self.budgets = P.Budgets(ttl=bounds.ttl, counters=False)
        self._agents: dict[tuple[Any, P.MonitorState], Agent] = {}
        self._envs: dict[tuple[Any, ...], E] = {}
        self._monitor_steps: dict[Hashable, P.MonitorState] = {}
        self._fired: tuple[str, ...] = ()
        self._policy_fired: Callable[[], Iterable[str]] | None = getattr(policy, "fired", None)

    @property
    def name(self) -> str:
        return self._name

    def with_bounds(self, settings: Mapping[str, str]) -> Self:
        """This world with some bounds set from text (:meth:`WorldBounds.updated`; the
        command line's ``--set``): the same policy and properties, the settings in its
        name."""
        said = ",".join(f"{k}={v}" for k, v in settings.items())
        return type(self)(
            self.policy,
            self.bounds.updated(settings),
            properties=self._props,
            name=f"{self._name} [{said}]",
            expect=self.expected_violations,
        )

    # ----------------------------------------------------------------- Model API

    def init_states(self) -> Sequence[WorldState[E]]:
        monitor = P.MonitorState()
        for obs in self.opening:
            monitor = P.step(monitor, obs, self.budgets)[0]
        env = self._env(self._initial_values())
        return [WorldState(env, self._intern(self.policy.init(), monitor))]

    def actions(self, s: WorldState[E]) -> Iterable[Move]:
        env = s.env
        moves = env._moves
        if moves is None:
            moves = env._moves = self._enabled(env)
        return moves

    def next_state(self, s: WorldState[E], m: Move) -> WorldState[E] | None:
        env, agent = s
        step = env._steps.get(m)
        if step is None:
            edited = self._edit(env, m)
            if edited is None:
                return None
            values, inp, context = edited
            step = env._steps[m] = (self._env(values), inp, context)
        mid, inp, context = step
        if inp is None:
            self._fired = ()
            return new_state(WorldState, (mid, agent))
        memo = (context, inp)
        reaction = agent.reactions.get(memo)
        if reaction is None:
            reaction = agent.reactions[memo] = self._react(agent, context, inp)
        self._fired = reaction.fired
        outputs = reaction.outputs
        if outputs:
            after = mid._after.get(outputs)
            if after is None:
                after = mid._after[outputs] = self._perform(mid, outputs)
            mid = after
        return new_state(WorldState, (mid, reaction.agent))

    def properties(self) -> Sequence[Property[WorldState[E]]]:
        props = [self._always(p) for p in self._props if p != "L1"]
        if "P5" in self._props:
            props.append(
                Property.deadlock(
                    "P5-quiescent",
                    f"at quiescence the {self.subject} has ended (exactly once: see P5)",
                )
            )
        if "L1" in self._props:
            props.append(
                Property.terminates(
                    "L1", "termination: no behaviour runs forever (any reachable cycle violates)"
                )
            )
        props.append(
            Property.sometimes(
                "presented", lambda s: bool(s.agent.monitor.presented), self.presented_doc
            )
        )
        if self.bounds.user != "never":
            props.append(Property.sometimes("completed", self._completed, self.completed_doc))
        return [*props, *self._witnesses()]

    def declared_transitions(self) -> Iterable[str]:
        declared = getattr(self.policy, "declared", None)
        return declared() if declared is not None else ()

    def fired_transitions(self, s: WorldState[E], m: Move, t: WorldState[E]) -> Iterable[str]:
        """The labels the policy fired on the last :meth:`next_state` (the checker asks
        right after computing each edge)."""
        return self._fired

    def system_state(self, s: WorldState[E]) -> Hashable:
        """The environment and the client's state: the monitor only records (nothing it
        holds steers a move), so the checker finds cycles over these, and a lasso's loop
        starts where the system first repeats, not a lap later when the monitor does."""
        return (s.env, s.agent.client)

    def describe_step(self, s: WorldState[E], m: Move, t: WorldState[E]) -> str:
        """What the client did on the step ``s --m--> t``: its outputs (``client:
        Present(0), Wait()``), "" when the step told it nothing or it did nothing."""
        outputs = self._outputs(s, m)
        return "client: " + ", ".join(map(repr, outputs)) if outputs else ""

    def why(self, name: str, states: Sequence[WorldState[E]], loop_start: int | None) -> str | None:
        """The values that make the path through ``states`` violate ``name``, in words.

        A monitor property (P1-P7): the monitor's own reason (:class:`fsm.properties.
        Violation`'s ``why``, the one the audit and the kits report), judged again on the
        last step, and the step where the fact it breaks on began (the key first presented,
        the newest id seen, ...). ``P5-quiescent``: what never ended. ``L1``: what the
        client does each lap of the loop. Anything else: :meth:`_why`, None by default.
        """
        if name == "L1" and loop_start is not None:
            return self._why_loop(states, loop_start)
        if name == "P5-quiescent":
            hung = P.unfinished(states[-1].agent.monitor)
            return "; ".join(v.why for v in hung) + " (nothing more can happen)" if hung else None
        if name in P.PROPERTIES and len(states) > 1:
            prev, last = states[-2], states[-1]
            move = next(m for m in self.actions(prev) if self.next_state(prev, m) == last)
            facts = P.Facts.thaw(prev.agent.monitor, self.budgets)
            for obs in self.observations(prev, move):
                bad = facts.check(obs)
                for violation in bad:
                    if violation.name == name:
                        return violation.why + _since(name, obs, states, facts.freeze())
                facts.apply(obs, bad)
        return self._why(name, states)

    def _why(self, name: str, states: Sequence[WorldState[E]]) -> str | None:
        """Why ``states`` violate ``name`` when the monitor does not say (a variant's own
        properties, a restated one); None by default."""
        return None

    def _why_loop(self, states: Sequence[WorldState[E]], loop_start: int) -> str:
        """What the client does each lap of the loop from the state ``loop_start``."""
        did: list[str] = []
        for s, t in zip(states[loop_start:], states[loop_start + 1 :], strict=False):
            move = next(m for m in self.actions(s) if self.next_state(s, m) == t)
            did += map(repr, self._outputs(s, move))
        lap = f"steps {loop_start + 1}-{len(states) - 1} return the system to where step"
        lap += f" {loop_start} left it (the monitor aside), so they repeat for ever"
        return f"{lap}; each lap the client does {', '.join(did)}" if did else lap

    def _outputs(self, s: WorldState[E], m: Move) -> tuple[O, ...]:
        """The client's (typed) outputs on the edge ``s --m-->`` (``()``: it was told
        nothing)."""
        if self.next_state(s, m) is None:
            raise ValueError(f"{m} has no successor in {self.format_state(s)}")
        _, inp, context = s.env._steps[m]
        if inp is None:
            return ()
        return self._typed(self._policy_step(s.agent.client, context, inp)[1])

    def is_terminal(self, s: WorldState[E]) -> bool:
        """An ended interaction may rest; any other quiescent state is P5-quiescent's
        counterexample (the checker's deadlock check, at no extra cost per state)."""
        return bool(s.env.ended)

    def observations(self, s: WorldState[E], m: Move) -> tuple[P.Observation, ...]:
        """The observations of the edge ``s --m-->`` in the monitor's order: what the
        client is told, then what it does (``()`` for an edge that tells it nothing).

        After :attr:`opening`, written with :func:`fsm.trace.dumps`, a path's observations
        are an event log that ``python -m fsm audit`` judges as the checker's monitor did.
        Raises ``ValueError`` for a move without successor in ``s``.
        """
        outputs = self._outputs(s, m)
        _, inp, context = s.env._steps[m]
        if inp is None:
            return ()
        told = self._told(s.agent.monitor, context, inp)
        return (*told, *self._did(context, outputs))

    # ------------------------------------------------------------ for a variant

    def _initial(self) -> Mapping[str, Any]:
        """The initial environment's value of each field."""
        raise NotImplementedError

    def _enabled(self, e: E) -> tuple[Move, ...]:
        """The moves enabled in ``e``, in a fixed order (computed once per environment)."""
        raise NotImplementedError

    def _edit(self, e: E, m: Move) -> tuple[Sequence[Any], I | None, Hashable] | None:
        """Move ``m`` in ``e``: the next environment's values, the input it tells the client
        (None: nothing), and the context the client's reaction depends on besides the
        input (the clock, ...); None when ``m`` does not apply."""
        raise NotImplementedError

    def _policy_step(self, client: Any, context: Any, inp: I) -> tuple[Any, tuple[O, ...]]:
        """The policy's step on ``inp`` in ``context``."""
        raise NotImplementedError

    def _told(self, monitor: P.MonitorState, context: Any, inp: I) -> list[P.Observation]:
        """What ``inp`` in ``context`` tells the client, as observations (``monitor``: what
        it was told before)."""
        raise NotImplementedError

    def _did(self, context: Any, outputs: tuple[O, ...]) -> list[P.Observation]:
        """What the client's (typed) ``outputs`` in ``context`` show it doing."""
        raise NotImplementedError

    def _perform(self, e: E, outputs: tuple[O, ...]) -> E:
        """The (interned) environment after the client's (typed) ``outputs``."""
        raise NotImplementedError

    def _completed(self, s: WorldState[E]) -> bool:
        """Whether ``s`` is the interaction completed with the user's answers: by default,
        the client ended it ``"completed"``."""
        return bool(s.env.ended == "completed")

    def _witnesses(self) -> list[Property[WorldState[E]]]:
        """The variant's own ``sometimes`` properties."""
        return []

    def _always(self, name: str) -> Property[WorldState[E]]:
        """Monitor property ``name`` as an invariant (P6 with :attr:`void_doc` also
        judges the environment's ``void`` flag)."""
        if name == "P6" and self.void_doc is not None:
            return Property.always(
                name,
                lambda s: name not in s.agent.monitor.violated and not cast(Any, s.env).void,
                self.void_doc,
            )
        return Property.always(
            name, lambda s: name not in s.agent.monitor.violated, P.PROPERTIES[name]
        )

    # ------------------------------------------------------------ the mechanism

    def _initial_values(self) -> list[Any]:
        """The initial environment's values, in the order of ``env_type.FIELDS``."""
        initial = self._initial()
        return [initial[f] for f in self.env_type.FIELDS]

    def _env(self, values: Sequence[Any]) -> E:
        key = tuple(values)
        env = self._envs.get(key)
        if env is None:
            env = self._envs[key] = typing.cast(E, self.env_type(key))
        return env

    def _intern(self, client: Any, monitor: P.MonitorState) -> Agent:
        agent = self._agents.get((client, monitor))
        if agent is None:
            agent = self._agents[(client, monitor)] = Agent(client, monitor)
        return agent

    def _react(self, agent: Agent, context: Any, inp: I) -> Reaction:
        """The client side's reaction to ``inp`` in ``context`` (pure; memoised per
        agent): the monitor observes what the client is told, the policy steps, the
        monitor observes what the client does."""
        monitor = agent.monitor
        told = self._told(monitor, context, inp)
        client, typed = self._checked_step(agent.client, context, inp)
        fired = tuple(self._policy_fired()) if self._policy_fired is not None else ()
        for obs in (*told, *self._did(context, typed)):
            monitor = self._observe(monitor, obs)
        try:
            after = self._intern(client, monitor)
        except TypeError as exc:  # the policy's state: the monitor's is always hashable
            error = PolicyError(
                f"policy {self.policy.name!r} returned a state that cannot be hashed"
                f" ({exc}): {client!r}; a policy's state is an immutable value (a tuple, a"
                " NamedTuple, a frozen dataclass, a frozenset)",
                client,
            )
            raise self._located(error, agent.client, context, inp) from None
        return Reaction(after, typed, fired)

    def _checked_step(self, client: Any, context: Any, inp: I) -> tuple[Any, tuple[O, ...]]:
        """The policy's step on ``inp``: its next state and its outputs, typed;
        :class:`PolicyError` (:class:`OutputError`) naming the policy's line for a result
        the world cannot take."""
        result = self._policy_step(client, context, inp)
        try:
            if not isinstance(result, tuple) or len(result) != 2:
                raise PolicyError(
                    f"policy {self.policy.name!r} returned {result!r} for {inp!r}, not a pair"
                    " (state, outputs)",
                    result,
                )
            return result[0], self._typed(result[1])
        except PolicyError as error:
            raise self._located(error, client, context, inp) from None

    def _located(self, error: PolicyError, client: Any, context: Any, inp: I) -> PolicyError:
        """``error`` with the policy's line that caused it (:func:`_policy_line`)."""
        run = lambda: self._policy_step(client, context, inp)  # noqa: E731
        where = _policy_line(run, self.policy, error.value)
        if where is not None:
            error.filename, error.lineno, error.function = where
        return error

    def _typed(self, outputs: Iterable[O]) -> tuple[O, ...]:
        """``outputs`` as the era's typed outputs (a plain tuple spelling is converted);
        :class:`OutputError` for one of no known kind or the wrong length."""
        name = self.policy.name
        if not isinstance(outputs, tuple | list):
            raise OutputError(
                f"policy {name!r} returned outputs {outputs!r}, not a tuple of outputs"
                " (return (state, ()) for none)",
                outputs,
            )
        if outputs and isinstance(outputs[0], str):
            raise OutputError(
                f"policy {name!r} returned one output {outputs!r} where a tuple of outputs"
                f" goes: write ({outputs!r},)",
                outputs,
            )
        typed: list[O] = []
        for out in outputs:
            kind = self.outputs.get(out[0]) if isinstance(out, tuple) and out else None
            if kind is None or len(out) != len(kind._fields):
                raise OutputError(
                    f"policy {name!r} returned {out!r}, not an output of this"
                    f" world; its outputs are {_spelled(self.outputs)}",
                    out,
                )
            for (field, declared, conforms), value in zip(
                _field_checks(kind), out[1:], strict=True
            ):
                if not conforms(value):
                    raise OutputError(
                        f"policy {name!r} returned {out!r}: the {field} of {out[0]} is"
                        f" {value!r}, not {declared}",
                        out,
                    )
            typed.append(out if type(out) is kind else kind._make(out))
        return tuple(typed)

    def _observe(self, monitor: P.MonitorState, obs: P.Observation) -> P.MonitorState:
        """One monitor step, memoised: far fewer monitor states than agents exist. The
        observations that carry an answer dict are keyed by its items (world answers are
        flat item tuples, hashable by the policy contract)."""
        memo_key: Hashable = (
            (monitor, type(obs), obs.key, tuple(sorted(obs.answer.items())))
            if isinstance(obs, P.Answered | P.Submitted)
            else (monitor, obs)
        )
        after = self._monitor_steps.get(memo_key)
        if after is None:
            after = self._monitor_steps[memo_key] = P.step(monitor, obs, self.budgets)[0]
        return after


class ClockedWorld(WorldBase[E, B, I, O]):
    """A world of one interaction whose client is told the clock (the MRTR and tasks
    worlds, :class:`ClockedPolicy`).

    The context of each reaction is a tuple whose first item is the clock, and request
    ``n`` is the key ``(interaction, n)``. The outputs every era shares read alike: a
    :class:`Present` is a presentation at that time, a :class:`Withdraw` the client
    declaring the request dead, an :class:`End` the end of the interaction. A variant
    sets :attr:`interaction` and reads its own outputs in :meth:`_did_own`.
    """

    interaction: ClassVar[str]
    """The id of the one interaction, the first item of each request key."""
    policy: ClockedPolicy[Any, I, O]

    def _policy_step(
        self, client: Any, context: tuple[Any, ...], inp: I
    ) -> tuple[Any, tuple[O, ...]]:
        return self.policy.step(client, context[0], inp)

    def _did(self, context: tuple[Any, ...], outputs: tuple[O, ...]) -> list[P.Observation]:
        t = context[0]
        seen: list[P.Observation] = []
        for out in outputs:
            if isinstance(out, Present):
                seen.append(P.Presented((self.interaction, out.request), t))
            elif isinstance(out, Withdraw):
                seen.append(P.DeclaredDead((self.interaction, out.request)))
            elif isinstance(out, End):
                seen.append(P.Ended(self.interaction, out.outcome))
            else:
                seen += self._did_own(out)
        return seen

    def _did_own(self, out: O) -> list[P.Observation]:
        """What one of the era's own outputs shows the client doing (by default, nothing
        the monitor judges)."""
        return []


# ------------------------------------------------------------------ why a path violates


_SINCE: dict[str, tuple[str, Callable[[P.MonitorState, Any], bool]]] = {
    "P1": ("known dead", lambda m, o: o.key in m.dead or m.session_gone),
    "P2": ("first presented", lambda m, o: o.key in m.presented),
    "P3": ("resumes forbidden", lambda m, o: o.stream in m.no_resume or m.session_gone),
    "P5": ("first ended", lambda m, o: o.interaction in m.ended),
    "P6": ("delivered past its deadline", lambda m, o: o.key in m.stale_delivery),
    "P7": ("the newest id seen", lambda m, o: m.newest.get(o.stream) is not None),
}
"""For each monitor property: the fact an observation breaks it on, and whether a monitor
state holds that fact for the observation ``o`` that broke it."""


def _since(name: str, obs: Any, states: Sequence[WorldState[Any]], now: P.MonitorState) -> str:
    """``"; first presented at step 4"``: the step from which the fact ``obs`` broke
    ``name`` on held unchanged up to ``now``, the monitor as ``obs`` found it in the last
    step ("" when there is none)."""
    if name == "P4":  # no fact began: the user's answer is missing, or another one
        sent = json.dumps(dict(obs.answer), sort_keys=True, default=repr)
        given = now.answers.get(obs.key)
        user = "never answered it" if given is None else f"answered {given}"
        return f"; the client submitted {sent}, the user {user}"
    what, holds = _SINCE.get(name, ("", None))
    if holds is None or not holds(now, obs):
        return ""
    monitors = [*(s.agent.monitor for s in states[:-1]), now]
    mark = _fact(name, now, obs)
    i = len(monitors) - 1
    while i > 0 and holds(monitors[i - 1], obs) and _fact(name, monitors[i - 1], obs) == mark:
        i -= 1
    if name == "P7":
        what = f"{mark!r} seen"
    return f"; {what} {'initially' if i == 0 else f'at step {i}'}"


def _fact(name: str, monitor: P.MonitorState, obs: Any) -> Any:
    """The value of the fact a P7 violation breaks on (the newest id), None for the others:
    their facts only ever start to hold."""
    return monitor.newest.get(obs.stream) if name == "P7" else None


# ------------------------------------------------------------------ a decider as a policy


class Decider(Protocol):
    """A sans-IO decider: events in, actions out, its whole state a hashable snapshot."""

    def feed(self, event: Any) -> Iterable[Any]:
        """Decide on ``event``; the actions to perform."""
        ...

    def snapshot(self) -> Any:
        """A hashable value of the whole decision state."""
        ...

    def restore(self, snap: Any) -> None:
        """Load a :meth:`snapshot`."""
        ...


D = TypeVar("D", bound=Decider)
OnFire = Callable[[str, str, str, str], None]

QUESTIONS: tuple[dict[str, Any], ...] = tuple(
    {"method": "elicitation/create", "params": {"message": f"Delete {n + 3} files?"}}
    for n in range(3)
)
"""What question ``n`` of a world asks on the wire when a one-call decider (an MRTR call,
a task) is its client: an ``elicitation/create`` with params of its own, so each has a
question id of its own (:func:`fsm.questions.question_id`). Worlds of up to three
questions."""


class SnapshotPolicy(Generic[D, I, O]):
    """Any :class:`Decider` as a world's client: the shipped decision code is what the
    checker verifies, not a re-implementation of it.

    ``decider(clock, on_fire)`` makes the one decider this policy drives (``on_fire``:
    told each declared transition it fires); ``opening`` are the events it is fed before
    its initial snapshot; ``to_events(inp, decider)`` the events a world input is, given
    the decider restored to the state the input arrives in (it must not change the
    decider); ``to_outputs(action)`` the world outputs an action is; ``product`` the
    declared machines the decider runs (for coverage); ``rename(snapshot, keys)``, if
    given, the decider's renaming of the request keys in a snapshot (a world's symmetry).

    :meth:`decide` restores the decider from a snapshot, feeds it, and snapshots it again:
    a pure function of (snapshot, clock, input), so each distinct decision is computed
    once; share one policy between worlds and they reuse each other's decisions. Each era
    gives it the form of its policies (:class:`fsm.worlds.sse.SsePolicy`,
    :class:`ClockedSnapshotPolicy`).
    """

    def __init__(
        self,
        name: str,
        decider: Callable[[Callable[[], float], OnFire], D],
        *,
        product: ProductSpec,
        to_events: Callable[[I, D], Iterable[Any]],
        to_outputs: Callable[[Any], tuple[O, ...]],
        opening: Iterable[Any] = (),
        rename: Callable[[Any, Mapping[Any, Any]], Any] | None = None,
    ) -> None:
        self.name = name
        self._rename_snapshot = rename
        self._t = 0.0
        self._fired: list[str] = []
        self._last_fired: tuple[str, ...] = ()
        self._labels: dict[tuple[str, str, str, str], str] = {}
        self._memo: dict[Hashable, tuple[Any, tuple[O, ...], tuple[str, ...]]] = {}
        self._product = product
        self._to_events, self._to_outputs = to_events, to_outputs
        self._decider = decider(lambda: self._t, self._on_fire)
        self.fresh: Any = self._decider.snapshot()
        """The decider's snapshot before any event: what a client that restarts without a
        durable store starts from."""
        for event in opening:
            self._decider.feed(event)
        self.initial: Any = self._decider.snapshot()
        """The decider's snapshot once it was fed ``opening``."""

    def _on_fire(self, machine: str, source: str, trigger: str, dest: str) -> None:
        transition = (machine, source, trigger, dest)
        label = self._labels.get(transition)
        if label is None:
            label = self._labels[transition] = transition_label(*transition)
        self._fired.append(label)

    @property
    def product(self) -> ProductSpec:
        """The declared machines the decider runs (what ``fsm render MODEL.py`` draws)."""
        return self._product

    @property
    def decider(self) -> D:
        """The one decider this policy drives, restored from a snapshot before each
        decision it computes (``bench/`` wraps its methods to time them in a search)."""
        return self._decider

    def declared(self) -> list[str]:
        """Every declared transition of the product's machines, as coverage labels."""
        return [
            transition_label(m.name, t.source, t.trigger, t.dest)
            for m in self._product.machines
            for t in m.transitions
        ]

    def fired(self) -> tuple[str, ...]:
        """The labels fired by the last decision."""
        return self._last_fired

    @property
    def decisions(self) -> int:
        """How many distinct decisions are memoised (each holds its snapshots)."""
        return len(self._memo)

    def forget(self) -> None:
        """Drop every memoised decision and the memory it holds; later ones are computed
        again, with the same results. The memo lives as long as the policy: a process
        that shares one policy between the models it checks keeps every decision of all
        of them until it calls this."""
        self._memo.clear()

    def decide_by(
        self, key: Hashable, t: float, compute: Callable[[], tuple[Any, tuple[O, ...]]]
    ) -> tuple[Any, tuple[O, ...]]:
        """A decision of a policy whose state is more than the decider's snapshot (a
        durable policy's ``(live, stored)`` records), memoised by ``key`` as
        :meth:`decide` memoises its own: on a miss the clock is set to ``t``, the fired
        labels are cleared and ``compute()`` gives the new state and the outputs. ``key``
        must not be shaped ``(snapshot, t, input)``, which are :meth:`decide`'s keys."""
        memo = self._memo.get(key)
        if memo is None:
            self._t = t
            self._fired.clear()
            state, outputs = compute()
            memo = self._memo[key] = (state, outputs, tuple(self._fired))
        self._last_fired = memo[2]
        return memo[0], memo[1]

    def decide(self, snap: Any, t: float, inp: I) -> tuple[Any, tuple[O, ...]]:
        """The decider's snapshot and the world outputs after ``inp`` at time ``t`` from
        ``snap`` (memoised)."""
        memo = self._memo.get((snap, t, inp))
        if memo is None:
            self._t = t
            decider = self._decider
            decider.restore(snap)
            self._fired.clear()
            actions = [a for event in self._to_events(inp, decider) for a in decider.feed(event)]
            outputs = tuple(o for a in actions for o in self._to_outputs(a))
            memo = self._memo[(snap, t, inp)] = (decider.snapshot(), outputs, tuple(self._fired))
        self._last_fired = memo[2]
        return memo[0], memo[1]


class ClockedSnapshotPolicy(SnapshotPolicy[D, I, O]):
    """A :class:`SnapshotPolicy` in the form of the policies that are told the clock,
    ``step(state, t, inp)`` (the MRTR and tasks worlds): its state is the decider's
    snapshot, its clock the world's."""

    def init(self) -> Any:
        """The decider's snapshot once it was fed the opening events."""
        return self.initial

    def step(self, state: Any, t: float, inp: I) -> tuple[Any, tuple[O, ...]]:
        """The decider's decision on ``inp`` at time ``t`` from snapshot ``state``."""
        return self.decide(state, t, inp)
