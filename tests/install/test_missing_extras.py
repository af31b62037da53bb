"""An optional part whose extra is not installed says which extra to install, with the
command, instead of a bare ``No module named ...`` (each missing module simulated by
blocking its import in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fsm._extras import missing_extra, require

CASES = [
    ("hypothesis", "import fsm.testing", "testing"),
    ("uvicorn", "from fsm.demo.cli import main; raise SystemExit(main([]))", "mcp"),
    ("httpx2", "import fsm.adapters.mcp2", "mcp"),
    ("mcp", "import fsm.adapters.mcp2", "mcp"),
    ("anyio", "import fsm.adapters.mcp1", "mcp1"),
    ("mcp", "import fsm.adapters.mrtr", "mcp"),
    ("mcp", "from fsm.wire import run_sync", "mcp"),
    (
        "uvicorn",
        "from fsm.gateway.cli import main; raise SystemExit(main("
        "['--upstream', 'http://127.0.0.1:9/mcp', '--listen', '127.0.0.1:0']))",
        "gateway",
    ),
    (
        "aiohttp",
        "from fsm.gateway.cli import main; raise SystemExit(main("
        "['--upstream', 'http://127.0.0.1:9/mcp', '--listen', '127.0.0.1:0']))",
        "gateway",
    ),
]


@pytest.mark.parametrize(("blocked", "code", "extra"), CASES)
def test_a_missing_module_names_its_extra(blocked: str, code: str, extra: str) -> None:
    script = f"import sys; sys.modules[{blocked!r}] = None\n{code}"
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode != 0
    assert f"needs {blocked}: pip install 'dead-or-resumable[{extra}]'" in run.stderr


def test_a_missing_module_of_fsm_itself_is_not_called_an_extra() -> None:
    err = missing_extra(
        "mcp", "x", ModuleNotFoundError("No module named 'fsm.nope'", name="fsm.nope")
    )
    assert "pip install" not in str(err) and err.name == "fsm.nope"


def test_require_names_the_first_missing_module() -> None:
    require("testing", "x", "json")  # installed: nothing raised
    with pytest.raises(ModuleNotFoundError, match=r"x needs no_such_module_here: pip install"):
        require("testing", "x", "json", "no_such_module_here")
