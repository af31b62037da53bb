"""The wheel, installed into a fresh virtualenv outside the checkout, works as a new
user's install does: the console script, the shipped models, every diagram, the demo on
a real server, the audit and the conformance kit, each run from another directory; and
without the extras, each command that needs one says which in one line.

The wheel is built from a copy of the sources (the checkout stays clean); pip installs
its dependencies from its cache when it has them. Deselect with ``-m "not install"``.
"""

from __future__ import annotations

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

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "fsm", "models")
SHIPPED_MODELS = sum(len(load_models(builtin_model_file(n))) for n in builtin_models())


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
