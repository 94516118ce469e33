"""One definition of each shared thing (issue 25, "one way of doing each thing").

* ``MAX_WAIT_S`` (the longest readback wait) and ``GUARDED`` (the verbs that take a node out
  of service, which the guard is asked about and the CLI asks to confirm) are defined once,
  in ``powerplane.host.invoking``, the lowest layer that needs them; the CLI and the
  lifecycle import them. No module keeps its own copy (``DESTRUCTIVE`` was the CLI's).
* ``find(name_or_node)`` is one function, ``find_maintenance`` (``lifecycle.store``), that
  every store (the SQLite store and the Kubernetes store) answers ``find`` with, over its
  own reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane.capabilities import Verb
from powerplane.cli import cli
from powerplane.host import invoking
from powerplane.lifecycle.model import MaintenanceSpec, NodeMaintenance, Phase
from powerplane.lifecycle.store import NotFound, Store, find_maintenance

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "core" / "src", ROOT / "conformance" / "src", ROOT / "demo" / "src",
           *sorted((ROOT / "plugins").glob("*/src"))]
SHARED = {"MAX_WAIT_S", "GUARDED", "DESTRUCTIVE"}
GUARDED_WORDS = {"reboot", "shutdown", "terminate"}


def _modules() -> list[Path]:
    return sorted(p for src in SOURCES for p in src.rglob("*.py"))


def _assigned(tree: ast.Module) -> list[tuple[str, ast.expr | None, int]]:
    """Module-level names bound by an assignment: (name, value, line)."""
    out: list[tuple[str, ast.expr | None, int]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            out += [(t.id, node.value, node.lineno) for t in node.targets
                    if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.append((node.target.id, node.value, node.lineno))
    return out


def _words(value: ast.expr | None) -> set[str] | None:
    """The words of a set/frozenset/tuple/list literal of strings or ``Verb.X`` members."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in {"frozenset", "set", "tuple"} and len(value.args) == 1:
        value = value.args[0]
    if not isinstance(value, (ast.Set, ast.Tuple, ast.List)):
        return None
    words = set()
    for elt in value.elts:
        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
            words.add(elt.value)
        elif isinstance(elt, ast.Attribute) and isinstance(elt.value, ast.Name) \
                and elt.value.id == "Verb":
            words.add(elt.attr.lower())
        else:
            return None
    return words


def test_the_shared_constants_are_defined_once_in_the_host() -> None:
    where = {}
    copies = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, value, line in _assigned(tree):
            rel = f"{path.relative_to(ROOT)}:{line}"
            if name in SHARED:
                where.setdefault(name, []).append(rel)
            elif _words(value) == GUARDED_WORDS:
                copies.append(f"{rel} {name}")
    host = "core/src/powerplane/host/invoking.py"
    assert {n: [w.split(":")[0] for w in ws] for n, ws in where.items()} == {
        "MAX_WAIT_S": [host], "GUARDED": [host]}, where
    assert copies == [], f"a second set of the guarded verbs: {copies}"


def test_the_cli_wait_bound_and_confirmation_are_the_hosts() -> None:
    assert frozenset({Verb.REBOOT, Verb.SHUTDOWN, Verb.TERMINATE}) == invoking.GUARDED
    result = CliRunner().invoke(
        cli, ["invoke", "n1", "reboot", "--reason", "a reason", "--wait",
              str(invoking.MAX_WAIT_S + 1)])
    assert result.exit_code == 2
    assert f"from 0 to {invoking.MAX_WAIT_S:g}" in result.output


def _find_bodies() -> dict[str, str]:
    """Every ``find`` a store class defines in the source trees: where -> its code."""
    out = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            if any(isinstance(b, ast.Name) and b.id == "Protocol" for b in cls.bases):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "find":
                    body = [s for s in fn.body if not (
                        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                    out[f"{path.relative_to(ROOT)}:{cls.name}"] = "\n".join(
                        ast.unparse(s) for s in body)
    return out


def test_every_store_finds_through_the_one_function() -> None:
    bodies = _find_bodies()
    assert sorted(bodies) == [
        "core/src/powerplane/lifecycle/store.py:Store",
        "plugins/kubernetes/src/powerplane_kubernetes/store.py:KubernetesStore",
    ]
    assert set(bodies.values()) == {"return find_maintenance(self, name_or_node)"}


def _maintenance(name: str, node: str) -> NodeMaintenance:
    return NodeMaintenance(name=name, spec=MaintenanceSpec(
        node=node, intent="reboot", reason="replace the PSU in slot 2", requested_by="a"))


def test_find_by_name_else_the_nodes_active_else_its_latest(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    try:
        first = store.create(_maintenance("n1-reboot-1", "n1"))
        first.status.phase = Phase.COMPLETE
        store.update(first)
        store.create(_maintenance("n1-reboot-2", "n1"))
        store.create(_maintenance("n2", "n3"))  # a maintenance named like a node
        assert find_maintenance(store, "n1-reboot-1").phase is Phase.COMPLETE
        assert find_maintenance(store, "n1").name == "n1-reboot-2"  # the active one
        done = store.get("n1-reboot-2")
        done.status.phase = Phase.COMPLETE
        store.update(done)
        assert find_maintenance(store, "n1").name == "n1-reboot-2"  # the latest
        assert find_maintenance(store, "n2").node == "n3"  # the name wins
        assert store.find("n3").name == "n2"
        with pytest.raises(NotFound, match="no maintenance named 'n9' and none for a node"):
            find_maintenance(store, "n9")
    finally:
        store.close()
