"""The public API is what `public_api.json` says, and every name in it is documented.

A name added to or dropped from an ``__all__`` fails here until ``public_api.json`` is changed
with it: a change to what users may import is a decision, recorded in the CHANGELOG, not
a side effect. Every exported name has a docstring of its own where it is defined (for a
constant or an alias, the string literal right after its assignment), found by reading the
source: a class's ``__doc__`` may have been written by ``dataclass`` or ``NamedTuple``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import sys
import types
from functools import cache
from pathlib import Path

import pytest

EXPORTS: dict[str, list[str]] = json.loads(
    (Path(__file__).with_name("public_api.json")).read_text(encoding="utf-8")
)
"""Each public package (and each adapter module a user imports) and its ``__all__``, as
pinned in ``public_api.json`` beside this file (sorted names; edit it with the change)."""

EXTRAS = {
    "fsm.testing": "hypothesis",
    "fsm.adapters.mcp2": "mcp",
    "fsm.adapters.mrtr": "mcp",
    "fsm.adapters.tasks": "mcp",
    "fsm.wire": "mcp",
}
"""A module that needs an extra, by the package the extra installs."""


def _import(name: str) -> types.ModuleType:
    extra = EXTRAS.get(name)
    if extra is not None and importlib.util.find_spec(extra) is None:
        pytest.skip(f"{name} needs {extra} (an extra), not installed here")
    return importlib.import_module(name)


def test_the_lists_are_sorted_and_name_no_name_twice() -> None:
    for names in EXPORTS.values():
        assert names == sorted(names) and len(set(names)) == len(names)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_all_is_pinned(name: str) -> None:
    module = _import(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported), f"{name}.__all__ names a name twice"
    assert sorted(exported) == EXPORTS[name]
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what {name} does not define: {missing}"


def test_every_package_of_fsm_that_defines_all_is_pinned() -> None:
    root = Path(importlib.import_module("fsm").__file__ or "").parent
    packages = {
        "fsm." + ".".join(init.parent.relative_to(root).parts)
        for init in root.glob("*/__init__.py")
        if "__all__" in init.read_text(encoding="utf-8")
    }
    assert packages - set(EXPORTS) == set()


# ------------------------------------------------------------------ docstrings


@cache
def _tree(module: str) -> tuple[ast.Module, bool]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    path = Path(spec.origin)
    return ast.parse(path.read_text(encoding="utf-8")), path.name == "__init__.py"


def _docstring(module: str, name: str) -> str | None:
    """The docstring of ``name`` where it is defined, following ``from ... import``
    from ``module``; a submodule's own docstring when ``name`` is one."""
    tree, is_package = _tree(module)
    body = tree.body
    for i, node in enumerate(body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                return ast.get_docstring(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                after = body[i + 1] if i + 1 < len(body) else None
                if (
                    isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    return after.value.value
                return None
    imports = [n for n in body if isinstance(n, ast.ImportFrom)]
    for node in body:  # imports guarded by a try (an optional part naming its extra)
        if isinstance(node, ast.Try):
            imports += [n for n in node.body if isinstance(n, ast.ImportFrom)]
    for node in imports:
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            package = module if is_package else module.rpartition(".")[0]
            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            submodule = f"{source}.{alias.name}"
            if importlib.util.find_spec(source) is not None and _is_module(submodule):
                return importlib.import_module(submodule).__doc__
            return _docstring(source, alias.name)
    raise LookupError(f"{name} is not defined or imported at the top level of {module}")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_every_exported_name_has_a_docstring(name: str) -> None:
    module = _import(name)
    assert module.__doc__, f"{name} has no module docstring"
    undocumented = [n for n in module.__all__ if not _docstring(name, n)]
    assert not undocumented, f"{name}: exported without a docstring: {undocumented}"


def test_the_docstring_finder_sees_a_missing_docstring(tmp_path: Path) -> None:
    """The check above can fail: an undocumented class, function or constant, also
    when re-exported, is reported; the docstring ``dataclass`` writes (``Bare(x: int)``)
    does not count."""
    package = tmp_path / "undocumented_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A package."""\nfrom .mod import Bare, Documented, LIMIT, NAMED, func\n'
    )
    (package / "mod.py").write_text(
        '"""A module."""\nfrom dataclasses import dataclass\n\n'
        "@dataclass\nclass Bare:\n    x: int\n\n"
        'class Documented:\n    """Yes."""\n\n'
        "def func():\n    pass\n\n"
        "LIMIT = 3\n\n"
        'NAMED = 4\n"""Four."""\n'
    )
    sys.path.insert(0, str(tmp_path))
    try:
        found = {
            n: _docstring("undocumented_pkg", n)
            for n in ("Bare", "Documented", "LIMIT", "NAMED", "func")
        }
    finally:
        sys.path.remove(str(tmp_path))
        for loaded in [m for m in sys.modules if m.startswith("undocumented_pkg")]:
            del sys.modules[loaded]
    assert found == {
        "Bare": None,
        "Documented": "Yes.",
        "LIMIT": None,
        "NAMED": "Four.",
        "func": None,
    }
