"""The suite's layers, written down and kept.

The order is in the package docstring and in the ``conformance-layers`` import contract
of the workspace's pyproject.toml (``lint-imports`` keeps it in CI). These tests keep the
two together and hold the order without import-linter too:

* every module of the distribution sits in exactly one layer of the contract, and the
  docstring lists the same layers;
* walking every module's imports (AST; imports inside functions count, and, as the
  contract says, those under ``TYPE_CHECKING`` too), no module imports one in a layer
  above its own, nor a sibling of its layer (siblings are independent);
* the package's lazy exports are core's :func:`powerplane.lazy_exports`, not a second
  helper.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import powerplane
import powerplane_conformance

PACKAGE = Path(powerplane_conformance.__file__).parent
PYPROJECT = PACKAGE.parents[2] / "pyproject.toml"
CONTRACT = "conformance-layers"


def layers() -> list[set[str]]:
    """The contract's layers, top first: each a set of module names (without the package)."""
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    contracts = data["tool"]["importlinter"]["contracts"]
    found = [c for c in contracts if c.get("id") == CONTRACT]
    assert len(found) == 1, f"one [[tool.importlinter.contracts]] with id {CONTRACT!r}"
    contract = found[0]
    assert contract["type"] == "layers" and contract["containers"] == ["powerplane_conformance"]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def modules() -> set[str]:
    """Every module of the package (its own ``__init__`` and the plugin template aside)."""
    return {f.stem for f in PACKAGE.glob("*.py") if f.stem != "__init__"}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, *, type_only: bool = False) -> set[tuple[str, int]]:
    """``(module imported, line)`` for each import of a sibling module by ``module``,
    inside functions too, under ``TYPE_CHECKING`` only with ``type_only``."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not type_only and isinstance(node, ast.If) and _type_checking(node):
            skipped |= {id(n) for part in node.body for n in ast.walk(part)}
    found: set[tuple[str, int]] = set()
    ours = modules()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if base == "powerplane_conformance":
                names = [a.name for a in node.names]
            elif base.startswith("powerplane_conformance."):
                names = [base.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names
                     if a.name.startswith("powerplane_conformance.")]
        found |= {(n, node.lineno) for n in names if n in ours}
    return found


def test_every_module_sits_in_one_layer() -> None:
    placed = [m for layer in layers() for m in layer]
    assert sorted(placed) == sorted(set(placed)), "a module in two layers"
    assert set(placed) == modules()


def test_the_package_docstring_lists_the_same_layers() -> None:
    doc = powerplane_conformance.__doc__ or ""
    drawn = doc.split("Layers,", 1)[1].split("::", 1)[1]
    rows = [line.strip().split("  ")[0] for line in drawn.splitlines()
            if line.startswith("    ") and not line.startswith("     ")]
    assert [{n.strip() for n in row.split("|")} for row in rows] == layers()


def test_no_module_imports_a_layer_above_its_own_or_a_sibling() -> None:
    rank = {m: i for i, layer in enumerate(layers()) for m in layer}
    upward = sorted(
        f"{module} (line {line}) imports {target}"
        for module in modules() for target, line in imports_of(module)
        if target != module and rank[target] <= rank[module]
    )
    assert upward == []


def test_no_module_imports_a_layer_above_its_own_not_even_for_a_type() -> None:
    rank = {m: i for i, layer in enumerate(layers()) for m in layer}
    upward = sorted(
        f"{module} (line {line}) imports {target}"
        for module in modules() for target, line in imports_of(module, type_only=True)
        if target != module and rank[target] <= rank[module]
    )
    assert upward == []


def test_the_walk_sees_imports_inside_functions_and_skips_type_checking() -> None:
    session = {t for t, _ in imports_of("session")}
    assert {"model", "checks", "gate", "settings"} <= session
    assert "plan" not in session and "probes" not in session  # the session owns them
    plugin = {t for t, _ in imports_of("plugin")}
    assert {"plan", "report"} <= plugin  # imported inside functions (pytest loads it early)
    assert "session" not in plugin  # only under TYPE_CHECKING
    assert "session" in {t for t, _ in imports_of("plugin", type_only=True)}


def test_lazy_exports_are_cores() -> None:
    assert powerplane_conformance.__getattr__.__qualname__ == \
        powerplane.lazy_exports("x", {})[0].__qualname__
    assert powerplane_conformance.ConformanceSuite.__name__ == "ConformanceSuite"
    assert set(powerplane_conformance.__all__) <= set(dir(powerplane_conformance))
