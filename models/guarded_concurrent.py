"""The library's policy with concurrent server requests on one stream.

``models/guarded.py`` sweeps every environment variant with one request; here the
variants that exercise interleavings (the user answers; every deadline and replay mode;
answer-to-unknown accepted or rejected) run with 2 concurrent requests, and two of them
with 3. All must pass P1-P7 and L1. Larger sweeps (3 requests everywhere: ~775k states
for the worst variant) are measured in ``bench/``, not checked here.
"""

from __future__ import annotations

from .guarded import variants

LEGEND = (
    "guarded[replay,deadline,answer,user(,reaper)]: the server replays after the cursor"
    " or inclusive of it; the request's deadline passes silent or with "
    "notifications/cancelled; an answer to an unknown request gets 202, 404, a JSON-RPC "
    "error (rpc) or a 500 holding one (500rpc); the user answers or never; reaper: the "
    "session is reaped; xN: N concurrent server requests on one stream"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

TWO = {
    f"{r},{d},{u},answers"
    for r in ("after", "inclusive")
    for d in ("silent", "cancel")
    for u in ("202", "rpc")
}
THREE = {"after,silent,rpc,answers", "inclusive,silent,rpc,answers"}

MODELS = variants(2, TWO) + variants(3, THREE)
