"""The wheel, installed into a fresh virtualenv outside the checkout, works as a new
user's install does: the console script, the shipped models, every diagram, the demo on
a real server, the audit and the conformance kit, each run from another directory; and
without the extras, each command that needs one says which in one line.

The wheel is built from a copy of the sources (the checkout stays clean); pip installs
its dependencies from its cache when it has them. Deselect with ``-m "not install"``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fsm
from fsm.checker.loader import builtin_model_file, builtin_models, load_models
from fsm.render.registry import PRODUCERS

pytestmark = [pytest.mark.install, pytest.mark.heavy(minutes=1)]

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "LICENSE", "fsm", "models")
SHIPPED_MODELS = sum(len(load_models(builtin_model_file(n))) for n in builtin_models())
TEST_BED = ROOT / "tests" / "support"
TEST_BED_IMPORTS = {"support", "tests", "fastmcp"}
"""What only the test bed imports: itself, the tests, fastmcp (its scenario clients)."""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240)
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for name in SHIPPED:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(origin, src / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist")]
    _run([*pip, str(src)], work)
    (built,) = (work / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory far from the checkout, where every command runs."""
    return tmp_path_factory.mktemp("elsewhere")


def _venv(home: Path, name: str) -> Path:
    """A fresh venv (no pip of its own: the test's pip installs into it); its bin/."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(home / name)], home)
    return home / name / "bin"


def _pip_install(venv: Path, requirement: str) -> list[str]:
    python = str(venv / "python")
    return [sys.executable, "-m", "pip", "--python", python, "install", "-q", requirement]


def test_the_wheel_holds_every_module_and_model(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "fsm").rglob("*.py")}
    models = {f"fsm/models/{p.name}" for p in (ROOT / "models").glob("*.py")}
    missing = sorted((sources | models | {"fsm/py.typed"}) - names)
    assert not missing, f"not in the wheel: {missing} (list new packages in pyproject.toml)"
    assert wheel.name == f"dead_or_resumable-{fsm.__version__}-py3-none-any.whl"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE"
    dist_info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(wheel).read(dist_info).decode()
    assert "License-Expression: MIT" in metadata.splitlines()


def _test_bed_in(sources: dict[str, str]) -> list[str]:
    """The modules of ``sources`` (wheel path -> text) that belong to the test bed: a
    module of ``tests/support`` by name where the test bed used to live (``fsm/demo/``,
    ``fsm/harness/``; there only deprecation shims, a ``moved_module`` each, may stay), or
    any module that imports the test bed or what only it needs."""
    bed = {p.name for p in TEST_BED.glob("*.py")} - {"__init__.py"}
    found = []
    for name, text in sorted(sources.items()):
        folder, _, file = name.rpartition("/")
        tree = ast.parse(text)
        if folder in ("fsm/demo", "fsm/harness") and file in bed:
            shim = [type(node) for node in tree.body] == [ast.Expr, ast.ImportFrom, ast.Assign]
            if folder == "fsm/demo" or not (shim and "moved_module(__name__" in text):
                found.append(name)
                continue
        imported = {
            alias.name.partition(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            (node.module or "").partition(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0
        }
        if imported & TEST_BED_IMPORTS:
            found.append(name)
    return found


def test_the_wheel_holds_no_test_bed_module(wheel: Path) -> None:
    """What only the tests and the benchmarks use (``tests/support``) stays out of the
    wheel: ``fsm.wire`` holds the wire scenarios, ``fsm.demo`` what ``fsm demo`` runs on
    them, ``fsm.harness`` only shims."""
    with zipfile.ZipFile(wheel) as zf:
        sources = {n: zf.read(n).decode() for n in zf.namelist() if n.endswith(".py")}
    assert "fsm/demo/cli.py" in sources and "fsm/harness/server.py" in sources
    assert "fsm/wire/scenarios.py" in sources
    assert _test_bed_in(sources) == []


def test_the_test_bed_check_finds_a_test_bed_module() -> None:
    """The check above can fail: a test bed module back in the package, under its name
    or another, or a shim that does more than re-export, is reported."""
    shim = (ROOT / "fsm" / "harness" / "server.py").read_text(encoding="utf-8")
    runner = (TEST_BED / "redis_server.py").read_text(encoding="utf-8")
    planted = {
        "fsm/wire/server.py": (ROOT / "fsm" / "wire" / "server.py").read_text(encoding="utf-8"),
        "fsm/harness/server.py": shim,
        "fsm/harness/scenarios.py": (TEST_BED / "scenarios.py").read_text(encoding="utf-8"),
        "fsm/demo/redis_server.py": runner,
        "fsm/harness/gateway.py": shim + "\nimport anyio\n",
        "fsm/demo/clients.py": (TEST_BED / "fastmcp_clients.py").read_text(encoding="utf-8"),
        "fsm/gateway/bed.py": "def f():\n    from support.gateway import running_gateway\n",
    }
    assert _test_bed_in(planted) == [
        "fsm/demo/clients.py",
        "fsm/demo/redis_server.py",
        "fsm/gateway/bed.py",
        "fsm/harness/gateway.py",
        "fsm/harness/scenarios.py",
    ]


def test_installed_with_and_without_extras(home: Path, wheel: Path) -> None:
    """Two venvs: the core alone, and with every extra (installed meanwhile)."""
    full = _venv(home, "full")
    installing = subprocess.Popen(
        _pip_install(full, f"{wheel}[mcp,diagrams,testing]"),
        cwd=home,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    core = _venv(home, "core")
    _run(_pip_install(core, str(wheel)), home)
    py, cli = str(core / "python"), str(core / "fsm")

    version = _run([cli, "--version"], home)
    assert version.stdout == f"dead-or-resumable {fsm.__version__}\n"
    assert _run([py, "-c", "import fsm; print(fsm.__version__)"], home).stdout.strip() == (
        fsm.__version__
    )
    # Every shipped model; guarded_concurrent (which reuses guarded's variants through a
    # relative import) with one request each, to keep it short.
    check = [py, "-m", "fsm", "check", "--brief", "--quiet"]
    others = [a for n in builtin_models() if n != "guarded_concurrent" for a in ("--builtin", n)]
    concurrent = ["--builtin", "guarded_concurrent", "--set", "requests=1"]
    lines = _run([*check, *concurrent], home).stdout.splitlines()
    assert "guarded[inclusive,silent,rpc,answers] x3 [requests=1]" in "\n".join(lines)
    lines += _run([*check, *others], home).stdout.splitlines()
    assert len(lines) == SHIPPED_MODELS
    assert all("properties hold" in x or "as declared" in x for x in lines)

    # Without the extras: one line each, naming what to install.
    kit = _run([py, "-c", "import fsm.testing"], home, check=False)
    assert kit.returncode == 1
    assert "fsm.testing needs hypothesis: pip install 'dead-or-resumable[testing]'" in kit.stderr
    for command, extra in (("render", "[diagrams]"), ("demo", "[mcp]")):
        done = _run([cli, command], home, check=False)
        assert done.returncode == 2 and extra in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr

    out, err = installing.communicate(timeout=240)
    assert installing.returncode == 0, out + err
    py, cli = str(full / "python"), str(full / "fsm")
    _run([py, "-c", "import fsm.testing, hypothesis"], home)
    rendered = _run([cli, "render", "--out", "diagrams"], home)
    assert rendered.stdout == f"rendered {len(PRODUCERS)} diagram(s) into diagrams\n"
    assert _run([cli, "render", "--check", "--out", str(ROOT / "diagrams")], home).returncode == 0
    ours = sorted(p.name for p in (home / "diagrams").iterdir())
    assert ours == sorted(p.name for p in (ROOT / "diagrams").iterdir() if p.suffix != ".png")

    demo = json.loads(_run([cli, "demo", "--json"], home).stdout)
    assert len(demo["guarded"]["presentations"]) == 1 and demo["guarded"]["violations"] == []

    log = home / "log.jsonl"
    records = [
        {"kind": "header", "schema": "dead-or-resumable/trace/1"},
        {"kind": "delivered", "t": 0.0, "key": ["s1", 1], "stream": "post:1"},
        {"kind": "presented", "t": 0.0, "key": ["s1", 1]},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    audited = _run([cli, "audit", str(log)], home)
    assert audited.stdout == f"{log}: conforms (2 records)\n"
