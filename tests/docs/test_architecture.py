"""The layering docs/architecture.md draws holds in the code: every ``fsm`` module imports
only from its own group or from lower layers, as the doc's ``layers`` table says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
FSM = ROOT / "fsm"
EXEMPT = {"__init__", "__main__"}
"""Modules outside the table: the public names and the command."""


def layers(doc: str) -> dict[str, tuple[int, str]]:
    """``{unit: (layer, group)}`` from the doc's ``layers`` block."""
    block = re.search(r"```layers\n(.*?)```", doc, re.S)
    assert block is not None, "docs/architecture.md has no ```layers block"
    table: dict[str, tuple[int, str]] = {}
    for line in block.group(1).strip().splitlines():
        m = re.fullmatch(r"(\d+) (\w+): (.+)", line.strip())
        assert m is not None, line
        for unit in m.group(3).split():
            table[unit] = (int(m.group(1)), m.group(2))
    return table


def unit_of(module: str) -> str:
    """The table's unit of ``fsm.<...>``: its package, or ``adapters._transport``."""
    parts = module.split(".")[1:]
    if parts[:2] == ["adapters", "_transport"]:
        return "adapters._transport"
    return parts[0]


def imports(path: Path) -> set[str]:
    """The ``fsm`` modules ``path`` imports (``from fsm import x`` counts as ``fsm.x``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "fsm":
                out.update(f"fsm.{a.name}" for a in node.names)
            elif node.module.startswith("fsm."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("fsm."))
    return out


def violations(table: dict[str, tuple[int, str]]) -> list[str]:
    bad = []
    for path in sorted(FSM.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        if module == "fsm" or (rel.name in EXEMPT and rel.parent == Path("fsm")):
            continue
        unit = unit_of(module)
        if unit not in table:  # a deprecated path: it may only point at the new home
            continue
        layer, group = table[unit]
        for target in sorted(imports(path)):
            dest = unit_of(target)
            if dest == unit or dest not in table:
                continue
            dest_layer, dest_group = table[dest]
            if dest_group != group and dest_layer >= layer:
                bad.append(
                    f"{module} ({group}, {layer}) imports {target} ({dest_group}, {dest_layer})"
                )
    return bad


def test_every_module_imports_only_downward() -> None:
    table = layers(DOC.read_text(encoding="utf-8"))
    assert violations(table) == []


def test_every_package_of_fsm_is_in_the_table() -> None:
    table = layers(DOC.read_text(encoding="utf-8"))
    packages = {p.name for p in FSM.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"harness"} <= set(table)  # harness: deprecated paths only


def _unlisted(table: dict[str, tuple[int, str]]) -> set[str]:
    """Top-level modules of ``fsm`` the table leaves out that are not deprecated paths (a
    deprecated path re-exports its new home through ``fsm._deprecate``)."""
    return {
        path.stem
        for path in FSM.glob("*.py")
        if path.stem not in table | dict.fromkeys(EXEMPT)
        and "fsm._deprecate" not in path.read_text(encoding="utf-8")
    }


def test_every_module_of_fsm_is_in_the_table_or_a_deprecated_path() -> None:
    table = layers(DOC.read_text(encoding="utf-8"))
    assert _unlisted(table) == set()
    del table["_extras"]  # the check can fail: a module left out is named
    assert _unlisted(table) == {"_extras"}


def test_the_check_finds_an_upward_import() -> None:
    """The rule can fail: with the eras above the worlds, the worlds' imports break it."""
    table = layers(DOC.read_text(encoding="utf-8"))
    table["checker"] = (9, "checker")  # the worlds build on the checker: now upward
    assert any(v.startswith("fsm.worlds") for v in violations(table))
