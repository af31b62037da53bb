"""Put this folder on sys.path (for ``durable_script``, which the crash child imports too)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
