"""``fsm check --write-tests``: the tests it writes replay with the bounds ``--set`` gave,
find their model from anywhere (a shipped model by name, a model file relative to the
test), say what they assert (a witness passes while the bug exists, ``--regression``
fails while it does), and an unwritable target is a clean error with its own status."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from python_runner import Run

from fsm.checker.cli import NOT_WRITTEN, main

CLIENT = textwrap.dedent(
    '''
    """A client that shows each request it is sent{fixed}; P2 fails only where a replay
    repeats a request (replay=inclusive)."""
    from fsm.worlds.sse import Bounds, Cut, End, Event, Present, Resume, Timer, Wait, World

    DEDUPLICATES = {dedup}


    class Client:
        name = "client"

        def init(self):
            return (0, frozenset())

        def step(self, state, inp):
            cursor, shown = state
            if isinstance(inp, Event):
                cursor = inp.event_id
                if inp.what == "req" and not (DEDUPLICATES and inp.request in shown):
                    return (cursor, shown | {{inp.request}}), (Present(inp.request),)
                if inp.what == "resp":
                    return (cursor, shown), (End("completed"),)
                return (cursor, shown), ()
            if isinstance(inp, Cut):
                return state, (Wait(),)
            if isinstance(inp, Timer):
                return state, (Resume(cursor),)
            return state, ()


    {models}
    '''
)


def client(*, dedup: bool, models: str = "MODEL = World(Client(), Bounds(user='never'))") -> str:
    return CLIENT.format(
        dedup=dedup, fixed=" once" if dedup else " at each delivery", models=models
    )


def pytest_in(folder: Path, cwd: Path, python: Run) -> subprocess.CompletedProcess[str]:
    return python(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)], cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project of one's own: ``mine`` in ``models/`` (the client that shows every delivery),
    tests written to ``tests/generated``, run from ``elsewhere``."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.py").write_text(client(dedup=False))
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def _write(project: Path, *extra: str) -> tuple[int, Path]:
    out = project / "tests" / "generated"
    args = [str(project / "models" / "mine.py"), "-q", "--set", "replay=inclusive"]
    return main([*args, "--write-tests", str(out), *extra]), out


def test_written_tests_replay_with_the_bounds_set(project: Path, python: Run) -> None:
    status, out = _write(project)
    assert status == 1
    assert [p.name for p in out.iterdir()] == ["test_client_replay_inclusive_p2.py"]
    text = (out / "test_client_replay_inclusive_p2.py").read_text()
    assert 'SETTINGS: dict[str, str] = {"replay": "inclusive"}' in text
    done = pytest_in(out, project / "elsewhere", python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_written_test_finds_a_users_model_relative_to_itself(
    project: Path, python: Run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out = _write(project)
    text = next(out.iterdir()).read_text()
    assert 'Path(__file__).resolve().parent / "../../models/mine.py"' in text
    assert str(project) not in text  # nothing of where it was written
    moved = tmp_path_factory.mktemp("moved") / "project"
    shutil.copytree(project, moved)
    done = pytest_in(moved / "tests" / "generated", moved / "elsewhere", python)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_written_test_names_a_shipped_model_by_name(tmp_path: Path, python: Run) -> None:
    out = tmp_path / "generated"
    assert main(["-q", "--builtin", "seed_incident", "--write-tests", str(out)]) == 0
    text = (out / "test_seed_incident_p2.py").read_text()
    assert 'MODEL_FILE = builtin_model_file("seed_incident")' in text
    assert "models/seed_incident.py" not in text and "site-packages" not in text
    done = pytest_in(out, tmp_path, python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout


def test_a_witness_says_it_passes_while_the_bug_exists(project: Path, python: Run) -> None:
    _, out = _write(project)
    text = next(out.iterdir()).read_text()
    assert "this test PASSES WHILE THE BUG EXISTS" in text
    assert "def test_p2_still_violated() -> None:" in text
    (project / "models" / "mine.py").write_text(client(dedup=True))  # the bug is fixed
    done = pytest_in(out, project / "elsewhere", python)
    assert done.returncode == 1
    assert "the recorded path no longer violates P2: the bug it recorded is fixed" in done.stdout


def test_regression_tests_fail_while_the_bug_exists(project: Path, python: Run) -> None:
    status, out = _write(project, "--regression")
    assert status == 1
    assert [p.name for p in out.iterdir()] == ["test_client_replay_inclusive_p2_regression.py"]
    text = next(out.iterdir()).read_text()
    assert "they FAIL WHILE THE BUG EXISTS" in text
    assert "def test_p2_not_violated_along_recorded_path() -> None:" in text
    assert "def test_p2_holds() -> None:" in text
    done = pytest_in(out, project / "elsewhere", python)
    assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout
    assert "P2 is still violated along the recorded path: the bug is not fixed" in done.stdout
    (project / "models" / "mine.py").write_text(client(dedup=True))  # the bug is fixed
    done = pytest_in(out, project / "elsewhere", python)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def test_written_tests_load_one_of_several_models_by_its_own_name(
    project: Path, python: Run
) -> None:
    several = "MODELS = [World(Client(), Bounds(user='never'), name=n) for n in ('a', 'b')]"
    (project / "models" / "mine.py").write_text(client(dedup=False, models=several))
    status, out = _write(project)
    assert status == 1
    names = sorted(p.name for p in out.iterdir())
    assert names == ["test_a_replay_inclusive_p2.py", "test_b_replay_inclusive_p2.py"]
    assert 'MODEL_NAME = "a"' in (out / names[0]).read_text()
    done = pytest_in(out, project / "elsewhere", python)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def test_an_existing_file_as_the_target_is_a_clean_error_of_its_own(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = project / "taken"
    target.write_text("mine\n")
    model = str(project / "models" / "mine.py")
    assert main([model, "-q", "--write-tests", str(target)]) == NOT_WRITTEN == 3
    captured = capsys.readouterr()
    assert captured.err == f"fsm check: --write-tests {target}: exists and is not a directory\n"
    assert captured.out == "" and target.read_text() == "mine\n"
    assert main([model, "-q", "--regression"]) == 2
    assert "--regression writes tests: give --write-tests DIR too" in capsys.readouterr().err


def test_an_unwritable_target_is_exit_3(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    status, out = _write(project)
    assert status == NOT_WRITTEN
    assert capsys.readouterr().err.startswith(f"fsm check: cannot write {out}/test_client_")


def test_the_help_lists_exit_status_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "3  an output could not be written" in capsys.readouterr().out
