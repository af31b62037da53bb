"""How a state of the tasks world (:mod:`fsm.worlds.tasks`) is drawn: what the user and the
server see, so that a counterexample reads as the story of the task."""

from __future__ import annotations

from typing import Any


def tasks_view(state: Any) -> tuple[str, str]:
    """``(group, label)``: the group is where the task waits (on the server, at the user),
    the label what is visible: the task's status and keys, answers acknowledged and not
    yet taken, a prompt showing, the requests in flight, the clock, how the call ended."""
    env = state.env
    if env.ended:
        return "ended", f"{env.status}\nended: {env.ended}"
    parts = [env.status]
    if env.listed:
        parts.append("keys " + ",".join(str(k) for k, _ in env.listed) + " listed")
    if env.pending:
        parts.append("acked " + ",".join(map(str, sorted(env.pending))) + ", not taken")
    if env.prompts:
        parts.append("prompt " + ",".join(map(str, sorted(env.prompts))) + " shown")
    if env.update is not None:
        parts.append("update in flight")
    if env.get:
        parts.append("poll in flight")
    if env.t:
        parts.append("TTL passed")
    group = "at the user" if env.prompts else "on the server"
    return group, "\n".join(parts)
