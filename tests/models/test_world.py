"""The closed worlds' representation: interned environments and agents, memoised steps.

Interning and memoisation are optimisations only: states compare by value across worlds
and pickling, a second check of the same world explores exactly what the first did, and
an edge that tells the client nothing fires no declared transition.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from fsm.checker import Checker, check
from fsm.worlds.mrtr import Env as MrtrEnv
from fsm.worlds.mrtr import MrtrWorld
from fsm.worlds.sse import ENDED, Agent, Env, Move, World
from models.guarded import CONFIG, GuardPolicy, variants
from models.guarded_mrtr import variants as mrtr_variants
from models.seed_incident import MODEL as SEED

VARIANT = {"after,cancel,rpc,answers"}


def _world() -> World[Any]:
    return variants(1, VARIANT, GuardPolicy(CONFIG))[0]


def _walk(world: Any, steps: int, pick: int = -1) -> list[Any]:
    """A deterministic walk: the enabled move at index ``pick`` each time (the last)."""
    state = world.init_states()[0]
    seen = [state]
    for _ in range(steps):
        moves = list(world.actions(state))
        if not moves:
            break
        nxt = world.next_state(state, moves[pick])
        assert nxt is not None
        state = nxt
        seen.append(state)
    return seen


def test_states_of_two_worlds_compare_and_hash_by_value() -> None:
    a, b = _walk(_world(), 12), _walk(_world(), 12)
    assert a == b
    assert [hash(s) for s in a] == [hash(s) for s in b]
    assert all(x.env is not y.env for x, y in zip(a[1:], b[1:], strict=True))  # not shared


def test_a_state_survives_pickling() -> None:
    state = _walk(_world(), 12)[-1]
    copy = pickle.loads(pickle.dumps(state))
    assert copy == state and hash(copy) == hash(state)
    assert isinstance(copy.env, Env) and isinstance(copy.agent, Agent)
    assert copy.monitor == state.monitor and copy.client == state.client


def test_env_and_agent_differ_when_a_field_does() -> None:
    state = _walk(_world(), 6)[-1]
    env = state.env
    flipped = list(env.values)
    flipped[ENDED] = not env.ended
    other = Env(tuple(flipped))
    assert other != env and Env(env.values) == env
    assert Agent(state.client, state.monitor) == state.agent
    assert Agent(state.client, type(state.monitor)()) != state.agent


def test_a_second_check_of_the_same_world_explores_the_same_graph() -> None:
    world = _world()
    first, second = Checker(world), Checker(world)
    r1, r2 = first.run(), second.run()
    assert (r1.states, r1.transitions, r1.depth) == (r2.states, r2.transitions, r2.depth)
    assert first.states == second.states
    assert list(first.edges) == list(second.edges)
    assert r1.coverage == r2.coverage


def test_a_policy_that_forgot_its_decisions_explores_the_same_graph() -> None:
    policy = GuardPolicy(CONFIG)
    first = Checker(variants(1, VARIANT, policy)[0])
    r1 = first.run()
    held = policy.decisions
    assert held > 0
    policy.forget()
    assert policy.decisions == 0
    second = Checker(variants(1, VARIANT, policy)[0])  # a fresh world: nothing interned
    r2 = second.run()
    assert policy.decisions == held  # each decision computed again, none added
    assert (r1.states, r1.transitions) == (r2.states, r2.transitions)
    assert first.states == second.states and list(first.edges) == list(second.edges)
    assert r1.coverage == r2.coverage


def test_seed_counterexamples_are_identical_on_a_second_check() -> None:
    r1, r2 = check(SEED), check(SEED)
    for name in ("P1", "P2", "L1"):
        p1, p2 = r1.result(name).path, r2.result(name).path
        assert p1 is not None and p2 is not None
        assert [s.action for s in p1.steps] == [s.action for s in p2.steps]


def test_an_edge_that_tells_the_client_nothing_fires_nothing() -> None:
    world = _world()
    state = world.init_states()[0]
    cut = Move("cut abrupt")
    after = world.next_state(state, cut)
    assert after is not None
    assert any("transport" in label for label in world.fired_transitions(state, cut, after))
    send = Move("server sends elicitation", 0)
    sent = world.next_state(after, send)
    assert sent is not None
    assert tuple(world.fired_transitions(after, send, sent)) == ()


def test_an_unknown_move_has_no_successor() -> None:
    world = _world()
    assert world.next_state(world.init_states()[0], Move("server explodes")) is None


def test_moves_are_values_named_for_counterexamples() -> None:
    assert Move("deliver", 3) == Move("deliver", 3)
    assert str(Move("deliver", 3)) == "deliver 3" and str(Move("cut clean")) == "cut clean"


def test_each_fresh_get_is_a_generation_that_ends_once() -> None:
    world = variants(1, VARIANT, GuardPolicy(CONFIG), get_cuts=2)[0]
    state = world.init_states()[0]
    assert state.env.get == "closed"
    for move in (
        Move("fresh GET opens", 1),
        Move("cut standalone GET", 1),
        Move("fresh GET opens", 2),
        Move("cut standalone GET", 2),
        Move("fresh GET opens", 3),
    ):
        assert move in list(world.actions(state))
        nxt = world.next_state(state, move)
        assert nxt is not None
        state = nxt
    assert (state.env.get, state.env.get_gen, state.env.get_cuts) == ("open", 3, 0)
    assert not any(m.name == "cut standalone GET" for m in world.actions(state))  # spent
    assert state.monitor.ended == {"get", "get/2"} and not state.monitor.violated


def test_a_world_without_get_cuts_has_no_standalone_get() -> None:
    state = _world().init_states()[0]
    assert state.env.get is None
    assert not any("GET" in m.name for m in _world().actions(state))


# ------------------------------------------------- the MRTR era's world, the same base


def test_mrtr_states_are_interned_compared_by_value_and_pickled() -> None:
    a = _walk(mrtr_variants()[3], 8, pick=0)
    b = _walk(mrtr_variants()[3], 8, pick=0)
    assert len(a) == 4 and a == b and [hash(s) for s in a] == [hash(s) for s in b]
    assert all(x.env is not y.env for x, y in zip(a[1:], b[1:], strict=True))  # not shared
    model = mrtr_variants()[3]
    first = model.init_states()[0]
    assert model.init_states()[0].env is first.env  # interned within one world
    copy = pickle.loads(pickle.dumps(a[-1]))
    assert copy == a[-1] and isinstance(copy.env, MrtrEnv) and copy.monitor == a[-1].monitor


def test_with_bounds_rebuilds_an_mrtr_world_of_the_same_policy() -> None:
    model = mrtr_variants()[0]
    wider = model.with_bounds({"questions": "2"})
    assert isinstance(wider, MrtrWorld) and wider.policy is model.policy
    assert wider.bounds.questions == 2 and wider.name == f"{model.name} [questions=2]"
    assert model.bounds.questions == 1  # the original is unchanged
    r1, r2 = check(wider), check(model.with_bounds({"questions": "2"}))
    assert (r1.states, r1.transitions) == (r2.states, r2.transitions)
    assert r1.states > check(model).states


def test_an_environment_is_replaced_by_field_name() -> None:
    env = _world().init_states()[0].env
    ended = env.replace(ended=True)
    assert ended.ended and ended.values[ENDED] and ended != env and not env.ended
    assert env.replace(ended=False) == env and hash(env.replace(ended=False)) == hash(env)
    with pytest.raises(TypeError, match="Env has no field 'colour'"):
        env.replace(colour="red")
