"""Benchmarks: each ``bench/*_bench.py`` module has a ``main()``; ``python -m bench`` runs them.

The benchmarks run the tests' test bed (``tests/support``: the gateway runner, the Redis
runner), imported as ``support.<module>`` as the tests import it. The checkout's ``tests/``
goes on ``sys.path`` once, here, last (it shadows nothing), so ``python -m bench...`` from
the repository root finds it, and so does each child process a benchmark starts
(``python -m bench.<module> ...``).
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
