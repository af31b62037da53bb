"""The library's policy with concurrent server requests on one stream.

``models/guarded.py`` sweeps every environment variant with one request; here the
variants that exercise interleavings (the user answers; every deadline and replay mode;
answer-to-unknown accepted or rejected) run with 2 concurrent requests, and two of them
with 3. All must pass P1-P7 and L1. Larger sweeps (3 requests everywhere: ~775k states
for the worst variant) are measured in ``bench/``, not checked here.
"""

from __future__ import annotations

from .guarded import variants

TWO = {
    f"{r},{d},{u},answers"
    for r in ("after", "inclusive")
    for d in ("silent", "cancel")
    for u in ("202", "rpc")
}
THREE = {"after,silent,rpc,answers", "inclusive,silent,rpc,answers"}

MODELS = variants(2, TWO) + variants(3, THREE)
