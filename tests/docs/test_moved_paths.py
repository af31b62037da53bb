"""Old module paths keep working for one minor release, each name read from them warning
(``DeprecationWarning``) at the line that reads it, and being the new module's own."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

from fsm._deprecate import moved_module, warn_deprecated

MOVED = {
    "fsm.harness.demo": "fsm.demo.cli",
    "fsm.harness.mrtr_demo": "fsm.demo.mrtr_scene",
    "fsm.harness.mrtr_server": "fsm.wire.mrtr_server",
    "fsm.harness.proxy": "fsm.wire.proxy",
    "fsm.harness.scenarios": "fsm.wire.rig",
    "fsm.harness.sdk": "fsm.wire.sdk",
    "fsm.harness.server": "fsm.wire.server",
    "fsm.harness.serving": "fsm.wire.serving",
    "fsm.spec": "fsm.machines.spec",
    "fsm.tables": "fsm.machines.tables",
    "fsm.runtime": "fsm.machines.runtime",
    "fsm.mrtr_machines": "fsm.machines.rounds",
    "fsm.guard": "fsm.sse.guard",
    "fsm.history": "fsm.sse.history",
    "fsm.observe": "fsm.sse.observe",
    "fsm.mrtr_outcomes": "fsm.mrtr.outcomes",
    "fsm.world": "fsm.worlds.sse",
    "fsm.mrtr_world": "fsm.worlds.mrtr",
}
"""Each old module and where it moved (the CHANGELOG's "Moved" table says the same)."""

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_of_the_old_package_is_listed() -> None:
    old = {f"fsm.harness.{p.stem}" for p in (ROOT / "fsm" / "harness").glob("*.py")}
    assert old - {"fsm.harness.__init__"} == {m for m in MOVED if m.startswith("fsm.harness.")}


def test_every_deprecated_top_level_module_is_listed() -> None:
    shims = {
        f"fsm.{p.stem}"
        for p in (ROOT / "fsm").glob("*.py")
        if "\n__getattr__ = moved_module(" in p.read_text(encoding="utf-8")
    }
    assert shims == {m for m in MOVED if m.count(".") == 1}


def test_warn_deprecated_blames_the_caller_and_names_the_replacement() -> None:
    def old_api() -> None:
        warn_deprecated("old_api", "0.1.0", instead="new_api")

    with pytest.warns(DeprecationWarning) as caught:
        old_api()
    (warning,) = caught
    assert str(warning.message) == (
        "old_api is deprecated since dead-or-resumable 0.1.0; use new_api instead"
    )
    assert warning.filename == __file__
    with pytest.warns(DeprecationWarning, match="0.1.0 with no replacement$"):
        warn_deprecated(old_api, "0.1.0", instead=None)


def test_a_moved_module_forwards_each_name_with_a_warning_at_the_reader() -> None:
    getattr_ = moved_module("old.place", "json", "0.1.0")
    with pytest.warns(DeprecationWarning) as caught:
        dumps = getattr_("dumps")
    assert dumps is importlib.import_module("json").dumps
    (warning,) = caught
    assert str(warning.message) == (
        "old.place.dumps is deprecated since dead-or-resumable 0.1.0; use json.dumps instead"
    )
    assert warning.filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr_("__all__") is importlib.import_module("json").__all__
        for missing in ("no_such_name", "__path__"):
            with pytest.raises(AttributeError, match=f"'old.place' has no attribute '{missing}'"):
                getattr_(missing)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_still_imports_with_a_warning(old: str) -> None:
    pytest.importorskip("mcp")
    new = importlib.import_module(MOVED[old])
    module = importlib.import_module(old)
    # public names only: not those pytest's assertion rewriting adds (``@py_builtins``) to
    # the modules of a distribution that registers a pytest plugin, as this one does
    names = [
        n for n in getattr(new, "__all__", dir(new)) if n.isidentifier() and not n.startswith("_")
    ]
    assert names, f"{MOVED[old]} has no public name"
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"use {MOVED[old]}.{name} instead"):
            assert getattr(module, name) is getattr(new, name)


def test_the_documented_import_of_the_old_path_works() -> None:
    pytest.importorskip("mcp")
    from fsm.wire.server import running_server as new

    with pytest.warns(DeprecationWarning) as caught:
        from fsm.harness.server import running_server
    assert running_server is new
    assert [w.filename for w in caught] == [__file__]
