"""The standalone GET stream cut before any event id, and opened fresh, again and again.

Beside the tool call of ``models/guarded.py``, the session's standalone GET stream is
cut three times before it carried any event id; after each cut the client opens a fresh
GET (a new connection generation). The library's policy names each generation as a
stream of its own and must pass P1-P7 and L1 in every variant here (the user answering
or never, the session reaped or not); the same guard fed every fresh GET under one name
(the SDK adapter's former defect) must be found violating P5: the generation that ended
is ended again.
"""

from __future__ import annotations

from fsm.worlds.sse import Bounds, World

from .guarded import CONFIG, POLICY, GuardPolicy, variants

LEGEND = (
    "guarded[replay,deadline,answer,user(,reaper)]: the server replays after the cursor"
    " or inclusive of it; the request's deadline passes silent or with "
    "notifications/cancelled; an answer to an unknown request gets 202, 404, a JSON-RPC "
    "error (rpc) or a 500 holding one (500rpc); the user answers or never; reaper: the "
    "session is reaped; get3: the standalone GET cut three times before any event id"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

GET_CUTS = 3

PASSING = {"after,silent,202,answers", "after,silent,202,never", "after,silent,202,answers,reaper"}
"""The GET stream meets the tool call only through the session (its expiry, in the
``reaper`` variant, ends the open generation): variants of the call's deadlines, replays
and answer outcomes multiply the states and add nothing here (``models/guarded.py`` has
them)."""

ONE_NAME = World(
    GuardPolicy(CONFIG, fresh_get_names=False),
    Bounds(requests=1, cuts=1, post_faults=0, user="never", get_cuts=2),
    name="one name for every fresh GET",
    expect=("P5",),
)

MODELS = [*variants(1, PASSING, POLICY, get_cuts=GET_CUTS), ONE_NAME]
