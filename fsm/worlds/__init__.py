"""The closed worlds the checker explores: an environment (server, network, user) times
a client's policy, one per era, on one base.

* :mod:`~fsm.worlds.common`: :class:`~fsm.worlds.common.WorldBase` (interning, memo, the
  standard properties, validated bounds) and the policy adapter every era shares.
* :mod:`~fsm.worlds.sse`: the SSE era's world, :class:`~fsm.worlds.sse.World` and
  :class:`~fsm.worlds.sse.Bounds`.
* :mod:`~fsm.worlds.mrtr`: the MRTR era's world, :class:`~fsm.worlds.mrtr.MrtrWorld` and
  :class:`~fsm.worlds.mrtr.MrtrBounds`.
* :mod:`~fsm.worlds.tasks`: the tasks era's world, :class:`~fsm.worlds.tasks.TasksWorld`
  and :class:`~fsm.worlds.tasks.TasksBounds`.
"""
