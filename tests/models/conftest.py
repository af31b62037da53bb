"""Put the repository root (for the ``models`` folder) and this folder (for ``shipped``)
on sys.path."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (str(HERE.parents[1]), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)
