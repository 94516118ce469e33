"""Core's public API: one home per audience, one list per home, the list equal to what the
home gives.

* ``powerplane``: the channel SDK (what a channel plugin imports) and the embedding API
  (``PowerHost`` and what its methods return, the config loaders);
* ``powerplane.lifecycle``: the port SDK (cluster, storage and store port types, their
  protocols and errors) and the maintenance engine an application runs;
* ``powerplane.testing``: the helper set for peers, tests and benchmarks.

Each home's ``__init__`` names its exports three times for three readers (the ``__all__``
list, the lazy-export table, the imports under ``TYPE_CHECKING`` for type checkers): the three
agree, each lazy target is the object the type checker sees, and ``__all__`` is exactly the
public names the module gives (``dir`` minus private names and submodules). A lifecycle name
has one home, and every public name has a user: a plugin, a tool, or the documentation.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
HOMES = ("powerplane", "powerplane.lifecycle", "powerplane.testing")
_FUTURE = type(annotations)  # what ``from __future__ import annotations`` binds


def _init_file(home: str) -> Path:
    module = importlib.import_module(home)
    assert module.__file__ is not None
    return Path(module.__file__)


def _lists(home: str) -> tuple[list[str], dict[str, str], dict[str, tuple[str, str]]]:
    """``(__all__, lazy table, TYPE_CHECKING imports)`` as written in the home's ``__init__``.

    The lazy table maps a name to its target (``".module"`` or ``".module:attr"``); the
    type-checking imports map the exported name to ``(absolute module, attribute)``.
    """
    tree = ast.parse(_init_file(home).read_text(encoding="utf-8"))
    all_: list[str] | None = None
    lazy: dict[str, str] | None = None
    typed: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            all_ = ast.literal_eval(node.value)
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") in ("lazy_exports", "_lazy_exports")
        ):
            lazy = ast.literal_eval(node.value.args[1])
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                for alias in stmt.names:
                    typed[alias.asname or alias.name] = (stmt.module, alias.name)
    assert all_ is not None and lazy is not None, f"{home}: no __all__ or lazy table"
    return all_, lazy, typed


def _importable(home: str) -> set[str]:
    """The public names the imported home gives: its ``dir`` minus private names, submodules
    and the ``from __future__`` directive."""
    module = importlib.import_module(home)
    return {
        name for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), ModuleType | _FUTURE)
    }


@pytest.mark.parametrize("home", HOMES)
def test_the_three_lists_of_a_home_agree(home: str) -> None:
    all_, lazy, typed = _lists(home)
    assert len(all_) == len(set(all_)), f"{home}.__all__ names a name twice"
    assert all_ == sorted(all_), f"{home}.__all__ is kept sorted"
    module = importlib.import_module(home)
    eager = {n for n in all_ if n in vars(module) and n not in lazy}  # imported at the top
    assert set(lazy) | eager == set(all_), f"{home}: lazy table vs __all__"
    assert set(typed) | eager == set(all_), f"{home}: TYPE_CHECKING imports vs __all__"


@pytest.mark.parametrize("home", HOMES)
def test_each_lazy_target_is_what_the_type_checker_sees(home: str) -> None:
    _, lazy, typed = _lists(home)
    module = importlib.import_module(home)
    for name, target in lazy.items():
        where, _, attr = target.partition(":")
        resolved = importlib.import_module(where, home) if where.startswith(".") else (
            importlib.import_module(where))
        assert (resolved.__name__, attr or name) == typed[name], f"{home}.{name}"
        assert getattr(module, name) is getattr(resolved, attr or name), f"{home}.{name}"


@pytest.mark.parametrize("home", HOMES)
def test_all_equals_what_the_home_gives(home: str) -> None:
    module = importlib.import_module(home)
    for name in module.__all__:
        getattr(module, name)  # every listed name loads
    assert sorted(_importable(home)) == sorted(module.__all__)


def test_all_equals_what_a_fresh_import_lists() -> None:
    """Before any name is used, ``dir`` already lists every export (and nothing else)."""
    code = (
        "import importlib, types\n"
        f"for home in {HOMES!r}:\n"
        "    m = importlib.import_module(home)\n"
        "    names = [n for n in m.__dir__() if not n.startswith('_')\n"
        "             and not isinstance(vars(m).get(n), types.ModuleType)\n"
        "             and n != 'annotations']\n"
        "    assert sorted(names) == sorted(m.__all__), (home, set(names) ^ set(m.__all__))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_lifecycle_name_has_one_home() -> None:
    import powerplane
    import powerplane.lifecycle
    import powerplane.testing

    top, life, testing = (set(powerplane.__all__), set(powerplane.lifecycle.__all__),
                          set(powerplane.testing.__all__))
    assert top & life == set()
    assert (top | life) & testing == set()
    from_lifecycle = sorted(
        n for n in top if getattr(getattr(powerplane, n), "__module__", "").startswith(
            "powerplane.lifecycle"))
    assert from_lifecycle == [], "lifecycle names are public in powerplane.lifecycle only"


def _corpus() -> str:
    """What a public name's users are read from: every plugin's, tool's and benchmark's
    source and tests, the plugin template, and the documentation."""
    globs = ("plugins/*/src/**/*.py", "plugins/*/tests/**/*.py", "demo/src/**/*.py",
             "conformance/src/**/*.py", "conformance/src/**/*.tmpl", "bench/*.py",
             "README.md", "docs/*.md", "docs/reference/*.md", "plugins/*/README.md",
             "conformance/README.md",
             "demo/README.md")
    return "\n".join(p.read_text(encoding="utf-8") for g in globs for p in REPO.glob(g))


@pytest.mark.parametrize("home", HOMES)
def test_every_public_name_has_a_user(home: str) -> None:
    """A name public in a home is used by a plugin or a tool, or documented (the API table
    in docs/reference.md lists the embedding API's result types)."""
    corpus = _corpus()
    module = importlib.import_module(home)
    unused = [n for n in module.__all__ if not re.search(rf"\b{re.escape(n)}\b", corpus)]
    assert unused == [], f"{home}: public names nobody uses or documents"


def _private_core_imports(text: str) -> list[str]:
    """Every import in ``text`` of a private core module (``powerplane._x``,
    ``powerplane.cli._common``, ``from powerplane.cli import _common``)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] == "powerplane" and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{node.lineno}: {target}")
                break
    return found


def test_the_private_import_scan_sees_each_spelling() -> None:
    text = ("import powerplane._yaml\nfrom powerplane.cli._common import esc\n"
            "from powerplane.cli import _common\nfrom powerplane.cli.kit import esc\n"
            "from powerplane import lazy_exports\n")
    assert _private_core_imports(text) == ["1: powerplane._yaml", "2: powerplane.cli._common",
                                           "3: powerplane.cli._common"]


def test_no_plugin_or_tool_imports_a_private_core_module() -> None:
    """Plugins, the demo and the conformance suite (their source and the plugin template)
    reach core through its public homes; a CLI extension's kit is ``powerplane.cli.kit``.
    (The benchmarks are white-box measurements and may time a private function.)"""
    found = {
        str(p.relative_to(REPO)): hits
        for g in ("plugins/*/src/**/*.py", "demo/src/**/*.py", "conformance/src/**/*.py")
        for p in REPO.glob(g)
        if "_generated" not in p.parts and (hits := _private_core_imports(p.read_text("utf-8")))
    }
    assert found == {}


def test_the_cli_kit_is_what_the_built_in_commands_use() -> None:
    from powerplane.cli import _common, kit

    assert kit.__all__ == sorted(kit.__all__)
    for name in kit.__all__:
        assert getattr(kit, name) is getattr(_common, name), name
