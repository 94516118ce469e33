"""Every distribution declares what its source imports.

For each workspace member (the root ``pyproject.toml``'s ``[tool.powerplane.workspace]``),
every ``import`` in its ``src`` tree (top level, inside functions, under ``TYPE_CHECKING``:
all of them) is mapped to the distributions that provide it
(:func:`importlib.metadata.packages_distributions`) and compared with the requirements in
its ``pyproject.toml``:

- a module outside a ``testing`` package must come from one of ``[project] dependencies``
  (a user installs those, and nothing else, with the distribution);
- a module of a ``testing`` package (the peers a distribution's tests and the demo start)
  may also come from an extra (``[project.optional-dependencies]``), which its tests install;
- the standard library and the distribution's own packages (the top level of ``src``) need
  nothing.

A module arriving only through another dependency (``httpx2`` through lightkube, ``h2``
through grpclib) is not declared: the dependency may drop or replace it in any release.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (PEP 503)."""
    bare = re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", bare).lower()


@dataclass(frozen=True)
class Member:
    """One workspace distribution and what it declares."""

    root: Path
    name: str
    dependencies: frozenset[str]
    extras: frozenset[str]


def _members() -> list[Member]:
    workspace = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["powerplane"][
        "workspace"]["members"]
    found: list[Member] = []
    for pattern in workspace:
        for root in sorted(ROOT.glob(pattern)):
            if not (root / "pyproject.toml").is_file():
                continue
            project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
            extras = project.get("optional-dependencies", {})
            found.append(Member(
                root=root,
                name=_name(project["name"]),
                dependencies=frozenset(_name(r) for r in project.get("dependencies", [])),
                extras=frozenset(_name(r) for reqs in extras.values() for r in reqs),
            ))
    return found


MEMBERS = _members()


@cache
def _providers() -> dict[str, frozenset[str]]:
    return {module: frozenset(_name(d) for d in dists)
            for module, dists in packages_distributions().items()}


def _parse(path: Path) -> ast.Module:
    """``path``'s syntax tree. CPython 3.11 before 3.11.8 can raise ``SystemError: AST
    constructor recursion depth mismatch`` in a process whose recursion bookkeeping an
    earlier caught RecursionError left off (python/cpython#106905): the tree is then built
    in a fresh interpreter and sent back as its import lines."""
    source = path.read_text(encoding="utf-8")
    try:
        return ast.parse(source, str(path))
    except SystemError:
        script = ("import ast, sys; t = ast.parse(open(sys.argv[1], encoding='utf-8').read()); "
                  "print('\\n'.join(ast.unparse(n) for n in ast.walk(t) "
                  "if isinstance(n, (ast.Import, ast.ImportFrom))))")
        lines = subprocess.run([sys.executable, "-c", script, str(path)], check=True,
                               capture_output=True, text=True, timeout=60).stdout
        return ast.parse(lines, str(path))


def _imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in one module."""
    names: set[str] = set()
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def undeclared(member: Member, base: Path = ROOT) -> list[str]:
    """One line per module a file imports that ``member`` does not declare (paths shown
    relative to ``base``)."""
    providers = _providers()
    problems: list[str] = []
    src = member.root / "src"
    own = {p.stem for p in src.iterdir()
           if (p.is_dir() and p.name.isidentifier()) or p.suffix == ".py"}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        testing = "testing" in rel.parts[:-1]
        allowed = member.dependencies | (member.extras if testing else frozenset())
        for module in sorted(_imports(path)):
            if module in sys.stdlib_module_names or module == "__future__":
                continue
            owners = providers.get(module, frozenset())
            if module in own or owners & allowed:
                continue
            where = "dependencies or an extra" if testing else "[project] dependencies"
            got = ", ".join(sorted(owners)) or "no installed distribution"
            problems.append(f"{path.relative_to(base)}: imports {module} "
                            f"({got}), not in {where}")
    return problems


def test_the_workspace_members_are_all_found() -> None:
    names = {m.name for m in MEMBERS}
    assert {"powerplane", "powerplane-redfish", "powerplane-kubernetes", "powerplane-talos",
            "powerplane-ipmi", "powerplane-pdu", "powerplane-cloud",
            "powerplane-conformance", "powerplane-demo"} <= names


@pytest.mark.parametrize("member", MEMBERS, ids=[m.name for m in MEMBERS])
def test_every_import_of_the_source_is_declared(member: Member) -> None:
    problems = undeclared(member)
    assert not problems, "\n".join(problems)


def test_an_undeclared_import_is_reported_with_its_file_and_distribution(
    tmp_path: Path,
) -> None:
    """The check itself: a module importing a package its distribution does not declare."""
    (tmp_path / "src" / "pkg" / "testing").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text(
        "import os\nimport pkg.other\nfrom yaml import safe_load\n"
        "def f():\n    import pluggy\n")
    (tmp_path / "src" / "pkg" / "testing" / "peer.py").write_text("import pluggy\n")
    member = Member(root=tmp_path, name="pkg", dependencies=frozenset({"pyyaml"}),
                    extras=frozenset({"pluggy"}))
    problems = undeclared(member, tmp_path)
    assert problems == [
        "src/pkg/mod.py: imports pluggy (pluggy), not in [project] dependencies"]
