"""JSON loading, bounded as :mod:`powerplane._yaml` bounds YAML (see its docstring): the
standard library's C decoder under the same bounds (nesting, nodes, the length of a
number); a duplicate key and ``NaN``/``Infinity`` (not JSON) refused; the lines, when a
problem is reported, from :mod:`powerplane._yaml`'s pass over the same text (the same
paths), else from the decoder's own position."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import chain, compress
from typing import Any

from powerplane._yaml import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    Lines,
    as_yaml,
    checked_size,
    full_pass,
    load_yaml,
    node_bound,
)
from powerplane.errors import ConfigError, ConfigProblem

__all__ = ["load_json"]

# -- JSON ----------------------------------------------------------------------------------


class _Refused(Exception):
    """A value the JSON decoder's hooks refuse (a duplicate key, a number too long): the
    text is read again as YAML, which names the problem's path and line."""

    def __init__(self, message: str) -> None:
        self.message = message


class _NotJson(Exception):
    """``NaN``, ``Infinity`` or ``-Infinity``: accepted by Python's decoder, not JSON."""

    def __init__(self, name: str) -> None:
        self.name = name


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate key {key!r}")
            seen.add(key)
    return out


def _json_number(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise _Refused(f"number longer than {MAX_NUMBER_CHARS} characters")
        return convert(text)

    return read


def _json_constant(name: str) -> Any:
    raise _NotJson(name)


_JSON = json.JSONDecoder(object_pairs_hook=_json_object, parse_int=_json_number(int),
                         parse_float=_json_number(float), parse_constant=_json_constant)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')
_JSON_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
def _json_bound(root: Any, bound: int) -> str | None:
    """The bound ``root`` crosses, in words, else ``None``: nesting deeper than
    :data:`MAX_DEPTH`, more than ``bound`` nodes (counted as the YAML path counts them:
    each collection, key and value one). One level at a time, the collections among each
    level's values picked out in C (no Python step per value)."""
    nodes = 1
    level: list[Any] = [root] if type(root) in _COLLECTIONS else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return f"nesting deeper than {MAX_DEPTH} levels"
        dicts = [c for c in level if type(c) is dict]
        lists = [c for c in level if type(c) is list] if len(dicts) != len(level) else []
        nodes += 2 * sum(map(len, dicts)) + sum(map(len, lists))

        def values(dicts: list[Any] = dicts, lists: list[Any] = lists) -> Iterator[Any]:
            return chain(chain.from_iterable(map(dict.values, dicts)),
                         chain.from_iterable(lists))

        level = list(compress(values(), map(_COLLECTIONS.__contains__, map(type, values()))))
    if nodes > bound:
        return f"more than {bound} nodes"
    return None


_COLLECTIONS = frozenset({dict, list})


def _refused_json(text: str, source: str, bound: int, message: str) -> ConfigError:
    """The problem of a JSON document the decoder or the bounds refused, with its path and
    line from this module's YAML pass over the same text, which reads a refused duplicate
    key, number or nesting the same way; without them if libyaml reads it otherwise."""
    try:
        full_pass(as_yaml(text), source, bound)
    except ConfigError as exc:
        return exc
    return ConfigError([ConfigProblem("", message)], source=source)


def load_json(text: str, source: str, *, size: int | None = None,
              or_yaml: bool = False) -> tuple[Any, Lines]:
    """Parse JSON ``text`` as :func:`load_yaml` parses YAML: the data (the document YAML
    1.2 reads from the same text) and a map from each value's path to its line.

    The bounds are :func:`load_yaml`'s (size, nesting, nodes, the length of a number); a
    duplicate key, ``NaN``, ``Infinity`` or ``-Infinity`` (not JSON) is refused. The lines
    are found only when asked for (a problem to report), by the YAML pass over the text.
    ``or_yaml``: a text that is not JSON, or that JSON refuses, is read by
    :func:`load_yaml` instead (a YAML file that starts with a flow mapping ``{``), which
    names every problem the YAML way.

    Raises :class:`ConfigError` naming ``source`` and the line.
    """
    bound = node_bound(checked_size(text, source, size))
    body = text[1:] if text.startswith("\ufeff") else text
    try:
        root = _JSON.decode(body)
        crossed = _json_bound(root, bound)
    except (json.JSONDecodeError, _NotJson, _Refused, RecursionError) as exc:
        if or_yaml:  # not JSON, or JSON refused: YAML reads it and names every problem
            return load_yaml(text, source, size=size)
        raise _json_error(exc, body, source, bound) from None
    if crossed is not None:
        if or_yaml:
            return load_yaml(text, source, size=size)
        raise _refused_json(body, source, bound, crossed)
    if root is None:
        return {}, Lines(None)
    return root, Lines(text=body, max_nodes=bound, json=True)


def _json_error(exc: Exception, text: str, source: str, bound: int) -> ConfigError:
    """The :class:`ConfigError` of JSON ``text`` the decoder refused with ``exc``."""
    if isinstance(exc, json.JSONDecodeError):
        return ConfigError([ConfigProblem(
            "", f"JSON syntax error: {exc.msg} (column {exc.colno})", exc.lineno)],
            source=source)
    if isinstance(exc, _NotJson):
        found = next((m for m in _JSON_TOKEN.finditer(text) if m.group(1)), None)
        line = text.count("\n", 0, found.start()) + 1 if found is not None else None
        return ConfigError([ConfigProblem(
            "", f"{exc.name} is not JSON: a number must be finite", line)], source=source)
    if isinstance(exc, _Refused):
        return _refused_json(text, source, bound, exc.message)
    return ConfigError([ConfigProblem("", f"nesting deeper than {MAX_DEPTH} levels",
                                      _json_too_deep(text))], source=source)


def _json_too_deep(text: str) -> int | None:
    """The line of the first collection of JSON ``text`` nested deeper than
    :data:`MAX_DEPTH` (brackets inside strings skipped)."""
    depth = 0
    for m in _JSON_BRACKET.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, m.start()) + 1
        elif token in "]}":
            depth -= 1
    return None
