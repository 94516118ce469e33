"""YAML loading that remembers the line of every value and rejects duplicate keys."""

from __future__ import annotations

import re
from typing import Any

import yaml

from powerplane.errors import ConfigError, ConfigProblem

Path = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false; ``on``, ``off``, ``yes``, ``no`` stay
    strings (so ``machines: {m1: on}`` means the power state, not a boolean)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def format_path(path: Path) -> str:
    """``("channels", "bmc", "verify")`` -> ``channels.bmc.verify``; indexes as ``[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_yaml(text: str, source: str) -> tuple[Any, dict[Path, int]]:
    """Parse ``text``; return the data and a map from each value's path to its line (1-based)."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "not valid YAML"
        raise ConfigError(
            [ConfigProblem("", f"YAML syntax error: {what}", line)], source=source
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem("", f"YAML error: {exc}")], source=source) from None
    lines: dict[Path, int] = {}
    problems: list[ConfigProblem] = []
    constructor = _Loader("")

    def walk(node: yaml.Node, path: Path) -> Any:
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            constructor.flatten_mapping(node)
            out: dict[Any, Any] = {}
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = constructor.construct_object(key_node, deep=True)
                if not isinstance(key, (str, int, float, bool)):
                    problems.append(
                        ConfigProblem(format_path(path), "mapping keys must be scalars",
                                      key_node.start_mark.line + 1)
                    )
                    continue
                kline = key_node.start_mark.line + 1
                if key in first:
                    problems.append(
                        ConfigProblem(
                            format_path((*path, str(key))),
                            f"duplicate key {key!r} (first defined at line {first[key]})",
                            kline,
                        )
                    )
                    continue
                first[key] = kline
                out[key] = walk(value_node, (*path, str(key)))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [walk(item, (*path, i)) for i, item in enumerate(node.value)]
        return constructor.construct_object(node, deep=True)

    data = walk(root, ()) if root is not None else {}
    if problems:
        raise ConfigError(problems, source=source)
    return data, lines
