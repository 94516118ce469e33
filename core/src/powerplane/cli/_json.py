"""Indented JSON, fast: the bytes of ``json.dumps(data, indent=2, default=str)``.

The standard library encodes with ``indent`` in pure Python (a generator per container,
a chunk per token): a 100,000-node ``offers -o json`` spent seconds there. Without
``indent`` it encodes in C. Here a container whose items are all scalars (``str``, ``int``,
``float``, ``bool``, ``None``, or anything ``default`` turns into a string) is encoded by one
:meth:`json.JSONEncoder.encode` call without ``indent``, whose item separator (documented
``separators=(item_separator, key_separator)``) carries the newline and the indent of its
depth; only the containers that hold containers are walked in Python. Only the documented
:mod:`json` API is used. The output is byte-for-byte the standard library's (keys in
insertion order, ``ensure_ascii``, ``NaN``/``Infinity`` allowed, the same key coercions and
errors).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["Encoded", "chunks_indented", "dumps_indented"]

_Encode = Callable[[Any], str]


class Encoded:
    """A value already encoded (by :func:`dumps_indented` with the ``depth`` it will sit
    at): written as it is. For a fleet's output whose nodes share one sub-document."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_CONTAINERS = (dict, list, tuple)
_SCALARS = (str, int, float)


def _encoder(item_separator: str, default: Callable[[Any], Any]) -> _Encode:
    """``json.dumps`` without ``indent`` and with these separators: one documented encoder
    (the standard library runs it in C where it can). It is given only scalars and containers
    of scalars, which cannot refer to themselves: no circular-reference check."""
    return json.JSONEncoder(separators=(item_separator, ": "), default=default,
                            check_circular=False).encode


_CACHEABLE = frozenset({str, bool, int, type(None)})
"""Value types whose encoding an equal value of the same type shares (not float: -0.0 and
0.0 are equal and encode differently)."""
_CACHE_ITEMS = 8
_CACHE_SIZE = 4096


class _Writer:
    """One document's encoders, one per depth (the item separator carries the indent), and
    the text of the small scalar-only containers already written (a fleet's offers repeat
    the same verb entries node after node)."""

    def __init__(self, indent: int, default: Callable[[Any], Any]) -> None:
        self.indent = " " * indent
        self.default = default
        self.flat: dict[int, _Encode] = {}
        self.scalar = _encoder(",", default)
        self.string = self.scalar  # a str is written as ``json.dumps`` writes it
        self.done: dict[Any, str] = {}

    def flat_text(self, obj: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int,
                  values: Any) -> str:
        """A non-empty container of scalars, encoded in one call of the encoder."""
        key: Any = None
        if len(obj) <= _CACHE_ITEMS:
            types = tuple(map(type, values))
            if _CACHEABLE.issuperset(types):
                key = ((depth, tuple(obj.items()), types, tuple(map(type, obj)))
                       if isinstance(obj, dict) else (depth, tuple(obj), types))
                found = self.done.get(key)
                if found is not None:
                    return found
        encode = self.flat.get(depth + 1)
        if encode is None:
            encode = self.flat[depth + 1] = _encoder(",\n" + self.indent * (depth + 1),
                                                     self.default)
        text = encode(obj)
        text = (text[0] + "\n" + self.indent * (depth + 1) + text[1:-1] + "\n"
                + self.indent * depth + text[-1])
        if key is not None and len(self.done) < _CACHE_SIZE:
            self.done[key] = text
        return text

    def key(self, key: Any) -> str:
        """A dict key as the encoders write it (str, float, bool, None, int; else an error)."""
        if isinstance(key, str):
            return self.string(key)
        text = self.scalar({key: 0})
        return text[1 : text.rindex(":")]

    def scalars_only(self, values: Any) -> bool:
        """Whether every value is a scalar (no container, nothing for ``default``)."""
        for v in values:
            t = type(v)
            if t is str or t is bool or t is int or v is None:
                continue
            if isinstance(v, _CONTAINERS) or not isinstance(v, _SCALARS):
                return False
        return True

    def write(self, obj: Any, depth: int, out: list[str]) -> None:
        """Append the text of ``obj`` to ``out``, its first line at ``depth`` levels in."""
        if isinstance(obj, dict):
            if not obj:
                out.append("{}")
            elif self.scalars_only(obj.values()):
                out.append(self.flat_text(obj, depth, obj.values()))
            else:
                self.write_dict(obj, depth, out)
        elif isinstance(obj, list | tuple):
            if not obj:
                out.append("[]")
            elif self.scalars_only(obj):
                out.append(self.flat_text(obj, depth, obj))
            else:
                inner = "\n" + self.indent * (depth + 1)
                sep = "[" + inner
                for value in obj:
                    out.append(sep)
                    self.write(value, depth + 1, out)
                    sep = "," + inner
                out.append("\n" + self.indent * depth + "]")
        elif isinstance(obj, str):
            out.append(self.string(obj))
        elif type(obj) is Encoded:
            out.append(obj.text)
        elif isinstance(obj, _SCALARS) or obj is None:
            out.append(self.scalar(obj))
        else:
            self.write(self.default(obj), depth, out)

    def write_dict(self, obj: dict[Any, Any], depth: int, out: list[str]) -> None:
        """A non-empty mapping that holds a container (or something for ``default``)."""
        inner = "\n" + self.indent * (depth + 1)
        sep = "{" + inner
        write = self.write
        string = self.string
        for key, value in obj.items():
            head = sep + (string(key) if isinstance(key, str) else self.key(key)) + ": "
            if type(value) is str:
                out.append(head + string(value))
            else:
                out.append(head)
                write(value, depth + 1, out)
            sep = "," + inner
        out.append("\n" + self.indent * depth + "}")


def chunks_indented(data: Any, indent: int = 2, default: Callable[[Any], Any] = str,
                    depth: int = 0) -> list[str]:
    """The chunks of ``json.dumps(data, indent=indent, default=default)``, in order;
    ``depth``: as the value would be written that many levels in (its first line not
    indented, as after a key)."""
    out: list[str] = []
    _Writer(indent, default).write(data, depth, out)
    return out


def dumps_indented(data: Any, indent: int = 2, default: Callable[[Any], Any] = str,
                   depth: int = 0) -> str:
    """``json.dumps(data, indent=indent, default=default)``, encoded mostly without
    ``indent`` (in C, where the standard library can); at
    ``depth`` as :func:`chunks_indented` says."""
    return "".join(chunks_indented(data, indent, default, depth))
