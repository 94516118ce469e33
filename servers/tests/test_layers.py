"""The surface's layers, written down and kept: the ``servers-layers`` import contract of
the workspace's pyproject.toml (``lint-imports`` checks the imports) places every module
of the package in one layer, and the package docstring lists the same layers."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import powerplane_servers

PACKAGE = Path(powerplane_servers.__file__).parent
PYPROJECT = PACKAGE.parents[2] / "pyproject.toml"
CONTRACT = "servers-layers"


def layers() -> list[set[str]]:
    """The contract's layers, top first: each a set of module names (without the package)."""
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    found = [c for c in data["tool"]["importlinter"]["contracts"] if c.get("id") == CONTRACT]
    assert len(found) == 1, f"one [[tool.importlinter.contracts]] with id {CONTRACT!r}"
    (contract,) = found
    assert contract["type"] == "layers" and contract["containers"] == ["powerplane_servers"]
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def modules() -> set[str]:
    """Every module and subpackage of the package (its own ``__init__`` aside)."""
    return ({f.stem for f in PACKAGE.glob("*.py") if f.stem != "__init__"}
            | {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()})


def _without_parentheses(text: str) -> str:
    while True:
        shorter = re.sub(r"\([^()]*\)", "", text)
        if shorter == text:
            return text
        text = shorter


def written() -> list[set[str]]:
    """The layers the package docstring lists after "top first:": ``;`` between layers,
    up to the end of the sentence; what stands in parentheses is a comment."""
    doc = powerplane_servers.__doc__ or ""
    after = _without_parentheses(doc.split("top first", 1)[1].split(":", 1)[1])
    sentence = re.split(r"\.\s|\.$", after, maxsplit=1)[0]
    return [set(re.findall(r"``([\w.]+)``", part)) for part in sentence.split(";")]


def test_every_module_sits_in_one_layer() -> None:
    placed = [m for layer in layers() for m in layer]
    assert sorted(placed) == sorted(set(placed)), "a module in two layers"
    assert set(placed) == modules()


def test_the_package_docstring_lists_the_same_layers() -> None:
    assert written() == layers()
