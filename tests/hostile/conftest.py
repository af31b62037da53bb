"""Make the repository root and this folder importable for the hostile-input tests; the
async ones run on asyncio (uvicorn serves their servers and gateways)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
