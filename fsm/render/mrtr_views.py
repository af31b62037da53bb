"""How a state of the MRTR world (:mod:`fsm.worlds.mrtr`) is drawn: what the user and the
server see, so that a counterexample reads as the story of the call."""

from __future__ import annotations

from typing import Any


def mrtr_view(state: Any) -> tuple[str, str]:
    """``(group, label)``: the group is the call's phase, the label what is visible in it:
    the round (state tokens minted), a prompt showing, a request in flight, expired state,
    the clock step, how the call ended."""
    env = state.env
    parts = [f"round {len(env.states)}"]
    if env.ended:
        return "ended", f"round {len(env.states)}\nended: {env.ended}"
    if env.prompts:
        parts.append("prompt " + ",".join(str(q) for q in sorted(env.prompts)) + " shown")
    if env.inflight is not None:
        parts.append("request in flight")
    if any(not ok for _, _, ok, _ in env.states):
        parts.append("state expired")
    if env.t:
        parts.append(f"clock step {int(env.t)}")
    group = "in flight" if env.inflight is not None else "at the user"
    return group, "\n".join(parts)
