"""Two sessions: the first one is reaped, the client begins a second one whose server
numbers its requests from the start again (the same ids, keys ``(s2, r)``).

The library's policy must pass P1-P7 and L1 across both sessions and present the second
session's request although its id was presented in the first; the seed incident's client
and the mcp 2.3.0 client are checked again in this world and must violate what they
violate in one session (the SDK client also resumes the reaped session's stream: P3).
These spaces are ~30 times those of one session (every way the first session can end
carries into the second), too large for ``make demo``'s check of ``models/``: the tests
check them (``test_sessions.py``).
"""

from __future__ import annotations

from dataclasses import replace

from fsm.worlds.sse import Bounds, World
from models.guarded import CONFIG, GuardPolicy
from models.mcp_sdk_2_3 import MODEL as SDK
from models.mcp_sdk_2_3 import SdkPolicy
from models.seed_incident import MODEL as SEED
from models.seed_incident import NaivePolicy

MODELS = [
    World(
        GuardPolicy(CONFIG),
        Bounds(requests=1, unknown_answer="202", reaper=True, sessions=2),
        name="guarded[after,silent,202,answers,reaper] sessions=2",
    ),
    World(
        NaivePolicy(),
        replace(SEED.bounds, reaper=True, sessions=2),
        name="seed-incident sessions=2",
        expect=("P1", "P2", "P3", "P4", "P7", "L1"),
    ),
    World(
        SdkPolicy(),
        replace(SDK.bounds, reaper=True, sessions=2),
        name="mcp-sdk-2.3.0 sessions=2",
        expect=("P2", "P3", "P7"),
    ),
]
