"""The import graph of every installed powerplane distribution, read from the source (AST).

* ``powerplane`` (core) imports no other distribution, not even lazily;
* a plugin imports from core only names in ``powerplane.__all__`` (``from powerplane
  import X``: the channel SDK and the embedding API), in ``powerplane.lifecycle.__all__``
  (the port SDK) and ``powerplane.testing``;
* no import circle spans two distributions;
* inside core, no import circle at all, and every layer written down (docs/reference.md,
  ``powerplane``'s docstring, the package docstrings of the lifecycle and the authority)
  as the import contracts of ``pyproject.toml`` have it: order and membership.

Every ``import``/``from ... import`` counts, inside functions and under ``TYPE_CHECKING``
too, and so does ``importlib.import_module("literal")``: a lazy or type-only import is
still a dependency.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import powerplane
import powerplane.cli.kit
import powerplane.lifecycle

CORE = "powerplane"
PLUGIN_PREFIX = "powerplane_"
NOT_PLUGINS = {"powerplane_conformance", "powerplane_demo"}
"""Distributions of the powerplane family that are tools, not plugins."""

ALLOWED_CORE_MODULES = {"powerplane", "powerplane.lifecycle", "powerplane.testing"}
"""Where a plugin may import core names from (``powerplane.testing.*`` too)."""


@dataclass(frozen=True)
class Edge:
    """One import: ``module`` (in ``file``, at ``line``) imports ``target`` (``names``)."""

    module: str
    file: Path
    line: int
    target: str
    names: tuple[str, ...]

    def where(self) -> str:
        return f"{self.module}:{self.line}"


def packages() -> dict[str, Path]:
    """Every installed top-level package of the family: ``powerplane``, ``powerplane_*``."""
    found: dict[str, Path] = {}
    for top in importlib.metadata.packages_distributions():
        if top != CORE and not top.startswith(PLUGIN_PREFIX):
            continue
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            continue
        found[top] = Path(next(iter(spec.submodule_search_locations)))
    return found


def modules(top: str, root: Path) -> Iterator[tuple[str, Path]]:
    """``(dotted name, file)`` of every module of package ``top`` (generated code skipped)."""
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if "_generated" in rel.parts or "__pycache__" in rel.parts:
            continue
        parts = [top, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), file


def edges_of(module: str, file: Path) -> Iterator[Edge]:
    tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module, file, node.lineno, alias.name, ())
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield Edge(module, file, node.lineno, base, tuple(a.name for a in node.names))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module",
                                                                         "__import__"))
            )
        ):
            yield Edge(module, file, node.lineno, node.args[0].value, ())


def family(name: str) -> str | None:
    """The top-level package of ``name`` when it is of the family, else ``None``."""
    top = name.partition(".")[0]
    return top if top == CORE or top.startswith(PLUGIN_PREFIX) else None


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Edge]]:
    """Every family module and its imports of family modules."""
    out: dict[str, list[Edge]] = {}
    for top, root in packages().items():
        for module, file in modules(top, root):
            out[module] = [e for e in edges_of(module, file) if family(e.target)]
    return out


def test_the_walk_sees_every_distribution(graph: dict[str, list[Edge]]) -> None:
    tops = {m.partition(".")[0] for m in graph}
    assert {"powerplane", "powerplane_redfish", "powerplane_talos", "powerplane_pdu",
            "powerplane_cloud", "powerplane_conformance"} <= tops
    assert any(e.target == "powerplane.channel" for e in graph["powerplane.sim.channel"])


def test_the_walk_resolves_relative_and_dynamic_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "powerplane_x"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from . import b\nfrom .b import c\nimport importlib\n"
        "def f():\n    importlib.import_module('powerplane_conformance.api')\n"
    )
    found = {(e.target, e.names) for e in edges_of("powerplane_x.a", pkg / "a.py")}
    assert ("powerplane_x", ("b",)) in found
    assert ("powerplane_x.b", ("c",)) in found
    assert ("powerplane_conformance.api", ()) in found


def _core_imports_others(graph: dict[str, list[Edge]]) -> list[str]:
    return sorted(
        f"{e.where()} imports {e.target}"
        for module, edges in graph.items() if family(module) == CORE
        for e in edges if family(e.target) != CORE
    )


def test_core_imports_no_other_distribution(graph: dict[str, list[Edge]]) -> None:
    assert _core_imports_others(graph) == []


def test_the_demo_is_a_distribution_of_its_own(graph: dict[str, list[Edge]]) -> None:
    """``powerplane demo`` lives in powerplane-demo, above core, the suite and the plugins."""
    assert importlib.util.find_spec("powerplane.demo") is None
    assert any(m.startswith("powerplane_demo.") for m in graph)
    demo = [ep for ep in importlib.metadata.entry_points(group="powerplane.cli")
            if ep.name == "demo"]
    assert [ep.value for ep in demo] == ["powerplane_demo.cli:demo_cmd"]


def plugin_violations(graph: dict[str, list[Edge]]) -> list[str]:
    """Every import of core by a plugin that is not a public name or ``powerplane.testing``."""
    homes = {CORE: set(powerplane.__all__),
             "powerplane.lifecycle": set(powerplane.lifecycle.__all__),
             # the public kit of a command a plugin adds (powerplane.cli entry points)
             "powerplane.cli.kit": set(powerplane.cli.kit.__all__)}
    out = []
    for module, edges in graph.items():
        top = family(module)
        if top in (None, CORE) or top in NOT_PLUGINS:
            continue
        for e in edges:
            if family(e.target) != CORE:
                continue
            if e.target == "powerplane.testing" or e.target.startswith("powerplane.testing."):
                continue
            public = homes.get(e.target)
            if public is not None and e.names and all(n in public for n in e.names):
                continue
            what = f"{e.target} ({', '.join(e.names)})" if e.names else e.target
            if public is not None:
                what = f"{e.target} ({', '.join(n for n in e.names if n not in public)})"
            out.append(f"{e.where()} imports {what}")
    return sorted(out)


def test_plugins_import_only_the_public_api(graph: dict[str, list[Edge]]) -> None:
    """Every plugin imports only names in ``powerplane.__all__``, ``powerplane.lifecycle.__all__``,
    ``powerplane.cli.kit.__all__`` (a command it adds) and ``powerplane.testing``."""
    assert plugin_violations(graph) == []


def _cycles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    succ: dict[str, set[str]] = {}
    for module, edges in graph.items():
        targets: set[str] = set()
        for e in edges:
            for name in ([f"{e.target}.{n}" for n in e.names] if e.names else []) + [e.target]:
                if name in graph and name != module:
                    targets.add(name)
                    break
        succ[module] = targets
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            child = next(it, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    scc.append(member)
                    if member == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return out


def test_the_cycle_finder_finds_a_circle() -> None:
    def edge(a: str, b: str) -> Edge:
        return Edge(a, Path(a), 1, b, ())

    fake = {"powerplane.a": [edge("powerplane.a", "powerplane_x.b")],
            "powerplane_x.b": [edge("powerplane_x.b", "powerplane.a")],
            "powerplane.c": []}
    assert _cycles(fake) == [["powerplane.a", "powerplane_x.b"]]


def _spanning(graph: dict[str, list[Edge]]) -> list[list[str]]:
    return [c for c in _cycles(graph) if len({m.partition(".")[0] for m in c}) > 1]


def test_no_import_circle_spans_two_distributions(graph: dict[str, list[Edge]]) -> None:
    assert _spanning(graph) == []


# --- the layers inside core -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
CORE_LAYERS = "core-layers"
"""The ``id`` of core's layers contract in ``[tool.importlinter]`` (pyproject.toml)."""


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_edges_of(module: str, file: Path) -> list[Edge]:
    """The imports of ``module`` that run: every one of :func:`edges_of` but those under
    ``if TYPE_CHECKING:`` (inside functions too: a lazy import still runs)."""
    tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for inner in node.body:
                hidden.update(id(n) for n in ast.walk(inner))
    lines = {node.lineno for node in ast.walk(tree)
             if id(node) in hidden and isinstance(node, (ast.Import, ast.ImportFrom))}
    return [e for e in edges_of(module, file) if e.line not in lines]


def core_runtime_graph() -> dict[str, list[Edge]]:
    """Every core module and the core modules it imports at run time."""
    root = packages()[CORE]
    return {module: [e for e in runtime_edges_of(module, file) if family(e.target) == CORE]
            for module, file in modules(CORE, root)}


def test_the_runtime_walk_leaves_out_type_checking_imports(tmp_path: Path) -> None:
    file = tmp_path / "a.py"
    file.write_text(
        "from typing import TYPE_CHECKING\nimport powerplane.errors\n"
        "if TYPE_CHECKING:\n    from powerplane.host import PowerHost\n"
        "def f():\n    from powerplane.config import parse_config\n"
    )
    found = {e.target for e in runtime_edges_of("powerplane.a", file)}
    assert found == {"typing", "powerplane.errors", "powerplane.config"}


def core_graph() -> dict[str, list[Edge]]:
    """Every core module and every core module it imports: at run time, inside a function
    or under ``TYPE_CHECKING``."""
    root = packages()[CORE]
    return {module: [e for e in edges_of(module, file) if family(e.target) == CORE]
            for module, file in modules(CORE, root)}


def test_core_has_no_import_cycle() -> None:
    """No two core modules import each other, through any chain, an import inside a
    function or under ``TYPE_CHECKING`` included (a type-only import is a dependency too):
    the layers hold without imports hidden in functions or in type annotations. The CLI
    package is no exception."""
    assert _cycles(core_graph()) == []


def test_the_full_walk_sees_type_checking_imports() -> None:
    """The walk the cycle test reads counts what the runtime walk leaves out."""
    hidden = {e.target for e in core_graph()["powerplane.hookspecs"]}
    run = {e.target for e in core_runtime_graph()["powerplane.hookspecs"]}
    assert "powerplane.kinds" in hidden and "powerplane.kinds" not in run


def _contracts() -> list[dict[str, object]]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


def _layer_modules(contract: dict[str, object]) -> set[str]:
    layers = contract["layers"]
    assert isinstance(layers, list)
    return {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}


def test_every_core_module_has_a_layer() -> None:
    """A new module of core is placed in the layers contract (private helpers, named
    ``_x``, stay free to be used from any layer)."""
    (core,) = [c for c in _contracts() if c.get("id") == CORE_LAYERS]
    placed = _layer_modules(core)
    tops = {m.split(".")[1] for m in core_runtime_graph() if m.count(".") >= 1}
    unplaced = sorted(f"powerplane.{t}" for t in tops
                      if not t.startswith("_") and f"powerplane.{t}" not in placed)
    assert unplaced == []


def test_the_layer_contracts_hold() -> None:
    """``lint-imports`` (import-linter) finds every contract of pyproject.toml kept, as
    ``./dev test`` runs it after mypy."""
    import subprocess
    import sys

    tool = Path(sys.executable).with_name("lint-imports")
    assert tool.exists(), "import-linter is a dev dependency: ./dev install"
    out = subprocess.run([str(tool), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 broken" in out.stdout and "KEPT" in out.stdout


def test_every_simulator_lives_in_sim() -> None:
    """The simulated channel, machines, cluster and storage are in ``powerplane.sim``: the
    lifecycle (and every other core package) holds protocols and engine, no simulator (a
    ``Simulated*`` class that is not a config model)."""
    root = packages()[CORE]
    outside = []
    for module, file in modules(CORE, root):
        if module == "powerplane.sim" or module.startswith("powerplane.sim."):
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
        outside += [f"{module}.{node.name}" for node in ast.walk(tree)
                    if isinstance(node, ast.ClassDef) and node.name.startswith("Simulated")
                    and not node.name.endswith("Config")]
    assert outside == []
    from powerplane.plugins import load_plugins

    reg = load_plugins()
    assert reg.channel_types["simulated"].factory.__module__ == "powerplane.sim.channel"
    assert reg.cluster_types["simulated"].factory.__module__ == "powerplane.builtins"


# --- the layers written down ------------------------------------------------------------------

REFERENCE = ROOT / "docs" / "reference.md"
"""The reference's index; the layers are on its plugin API page."""


def _contract_layers(contract_id: str, prefix: str = "") -> list[set[str]]:
    """The layers of contract ``contract_id``, top first, each the set of its modules
    (``prefix`` taken off each name)."""
    (contract,) = [c for c in _contracts() if c.get("id") == contract_id]
    layers = contract["layers"]
    assert isinstance(layers, list)
    return [{name.strip().removeprefix(prefix) for name in layer.replace(":", "|").split("|")}
            for layer in layers]


def _without_parentheses(text: str) -> str:
    import re

    while True:
        shorter = re.sub(r"\([^()]*\)", "", text)
        if shorter == text:
            return text
        text = shorter


def written_layers(text: str, marker: str, quote: str) -> list[set[str]]:
    """The layers a list written after ``marker`` names, top first: ``;`` between layers,
    each module in ``quote`` (backticks), up to the end of the sentence; what stands in
    parentheses is a comment."""
    import re

    assert marker in text, f"no {marker!r}"
    after = _without_parentheses(text.split(marker, 1)[1])
    sentence = re.split(r"\.\s|\.$| \|", after, maxsplit=1)[0]
    q = re.escape(quote)
    return [set(re.findall(rf"{q}([\w.]+){q}", part)) for part in sentence.split(";")]


def test_the_reader_of_a_written_list_takes_layers_and_leaves_comments() -> None:
    text = "top first: ``a`` (one; two); ``b``, ``c`` and ``d``; ``e``. ``f``; ``g``"
    assert written_layers(text, "top first:", "``") == [{"a"}, {"b", "c", "d"}, {"e"}]


def _reference_rows() -> list[list[str]]:
    """The rows of the table of docs/reference.md, "Layers inside core", as columns."""
    text = (REFERENCE.parent / "reference" / "plugin-api.md").read_text(encoding="utf-8")
    section = text.split("## Layers inside core\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| layer |") and rows[1].startswith("| --- |")
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


def test_the_reference_lists_cores_layers_as_the_contract_does() -> None:
    """docs/reference.md, "Layers inside core": one row per layer of the contract, in its
    order, naming its modules (order and membership)."""
    import re

    found = [set(re.findall(r"`powerplane\.(\w+)`", _without_parentheses(row[1])))
             for row in _reference_rows()]
    assert found == _contract_layers(CORE_LAYERS, "powerplane.")


@pytest.mark.parametrize(("package", "contract", "marker"), [
    ("lifecycle", "core-lifecycle-layers", "inside it, top first:"),
    ("authority", "core-authority-layers", "inside the authority, top first:"),
    ("host", "core-host-layers", "inside it, top first:"),
])
def test_the_reference_lists_each_packages_layers_as_its_contract_does(
    package: str, contract: str, marker: str,
) -> None:
    (row,) = [r for r in _reference_rows() if f"`powerplane.{package}`" in r[1]]
    assert written_layers(row[2], marker, "`") == _contract_layers(contract)


def test_powerplanes_docstring_lists_cores_layers_as_the_contract_does() -> None:
    assert written_layers(powerplane.__doc__ or "", "top first:", "``") == _contract_layers(
        CORE_LAYERS, "powerplane.")


@pytest.mark.parametrize(("package", "contract"), [
    ("lifecycle", "core-lifecycle-layers"),
    ("authority", "core-authority-layers"),
])
def test_a_packages_docstring_lists_its_layers_as_its_contract_does(
    package: str, contract: str,
) -> None:
    import importlib

    doc = importlib.import_module(f"powerplane.{package}").__doc__ or ""
    assert written_layers(doc, "top first:", "``") == _contract_layers(contract)
