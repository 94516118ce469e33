"""YAML loading, bounded: line of every value, duplicate keys rejected, hostile input refused.

The document is built from the parser's event stream by one loop (no recursion), so a
hostile file meets a limit and becomes a :class:`~powerplane.errors.ConfigError` naming the
file and the line, never a traceback, an endless expansion or a memory blow-up:

* the document is at most :data:`MAX_BYTES` (read no further than that);
* nesting is at most :data:`MAX_DEPTH` levels, aliases included;
* at most :data:`MAX_NODES` nodes, aliases expanded, and at most :data:`MAX_ALIASES`
  aliases (``*name``, also under ``<<``): the "billion laughs" bomb stops here;
* an alias to an anchor that is not complete (a recursive alias) is an error;
* only the core tags are accepted (``!!str``, ``!!int``, ``!!float``, ``!!bool``,
  ``!!null``, ``!!timestamp``, ``!!seq``, ``!!map``): ``!!python/...``, ``!foo`` and every
  other tag are errors;
* a merge key ``<<`` takes a mapping or a list of mappings, anything else is an error.

Booleans follow YAML 1.2: only true/false; ``on``, ``off``, ``yes``, ``no`` stay strings (so
``machines: {m1: on}`` means the power state, not a boolean).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from powerplane.errors import ConfigError, ConfigProblem

__all__ = [
    "MAX_ALIASES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_PROBLEMS",
    "Lines",
    "format_path",
    "load_yaml",
]

Path = tuple[str | int, ...]

MAX_BYTES = 4 * 1024 * 1024
"""Largest config document, in bytes (4 MiB: a 10,000-node deployment takes well under 2)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences, aliases expanded."""
MAX_ALIASES = 100_000
"""Most aliases (``*name``, including those under a merge key) in one document."""
MAX_NODES = 300_000
"""Most nodes in one document, aliases expanded (each use of an alias counts its anchor's
size): a 10,000-node deployment takes about 100,000; the "billion laughs" bomb stops here."""
MAX_PROBLEMS = 100
"""Most problems listed for one file; the rest are counted."""
MAX_NUMBER_CHARS = 1000
"""Longest scalar that may be read as a number (longer ones are refused, not converted)."""

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_SEQ_TAG = _TAG + "seq"
_MAP_TAG = _TAG + "map"
_STR_TAG = _TAG + "str"
_MERGE_TAG = _TAG + "merge"
_VALUE_TAG = _TAG + "value"
_ALLOWED = "!!str, !!int, !!float, !!bool, !!null, !!timestamp, !!seq, !!map"


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans (its resolver and scalar constructors are used)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _TAG + "bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _TAG + "bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)

_CParser: Any
try:
    import yaml._yaml

    _CParser = yaml._yaml.CParser
except (ImportError, AttributeError):  # pragma: no cover - libyaml ships in PyYAML's wheels
    _CParser = None


def format_path(path: Path) -> str:
    """``("channels", "bmc", "verify")`` -> ``channels.bmc.verify``; indexes as ``[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _show_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


class _Tree:
    """Lines of one collection: its own line and its children's (ints or trees)."""

    __slots__ = ("children", "line")

    def __init__(self, line: int, children: dict[Any, Any] | list[Any]) -> None:
        self.line = line
        self.children = children


class Lines(Mapping[Path, int]):
    """Path -> line (1-based) of every value as written; a path inside an alias gives the
    alias's line. Kept as a tree (not one entry per path), so a big file stays small."""

    def __init__(self, root: _Tree | int | None) -> None:
        self._root = root

    def _find(self, path: Path) -> int | None:
        node: _Tree | int | None = self._root
        if node is None:
            return None
        for part in path:
            if not isinstance(node, _Tree):
                return node  # inside a scalar or an alias: its own line
            children = node.children
            if isinstance(children, list):
                if not isinstance(part, int) or not 0 <= part < len(children):
                    return None
                node = children[part]
            else:
                node = children.get(part)
                if node is None:
                    return None
        return node.line if isinstance(node, _Tree) else node

    def __getitem__(self, path: Path) -> int:
        line = self._find(tuple(path))
        if line is None:
            raise KeyError(path)
        return line

    def __iter__(self) -> Iterator[Path]:
        stack: list[tuple[Path, _Tree | int]] = [] if self._root is None else [((), self._root)]
        while stack:
            path, node = stack.pop()
            yield path
            if isinstance(node, _Tree):
                items = (enumerate(node.children) if isinstance(node.children, list)
                         else node.children.items())
                stack.extend(((*path, k), v) for k, v in items)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return self._root is not None


class _Frame:
    """A collection being built."""

    __slots__ = ("anchor", "first", "height", "is_map", "key", "key_line",
                 "key_ok", "line", "lines", "merges", "path", "size", "value")

    def __init__(self, is_map: bool, anchor: str | None, line: int, path: Path) -> None:
        self.is_map = is_map
        self.anchor = anchor
        self.line = line
        self.path = path
        self.value: Any = {} if is_map else []
        self.lines: Any = {} if is_map else []
        self.size = 1
        self.height = 1
        self.first: dict[Any, int] = {}
        self.merges: list[tuple[Any, int]] = []
        self.key: Any = None
        self.key_line = 0
        self.key_ok = False  # a key is pending (the next node is its value)


class _Limit(Exception):
    """A bound was crossed: stop reading at once."""

    def __init__(self, message: str, line: int, path: Path = ()) -> None:
        self.message = message
        self.line = line
        self.path = path


class _Builder:
    """Builds the document from events, one loop, every bound checked as it goes."""

    def __init__(self) -> None:
        self.resolver = _Loader("")
        self.resolve: Callable[[type[yaml.Node], str, Any], str] = self.resolver.resolve
        self.problems: list[ConfigProblem] = []
        self.anchors: dict[str, tuple[Any, int, int, _Tree | int]] = {}
        self.open_anchors: set[str] = set()
        self.aliases = 0
        self.nodes = 0
        self.cache: dict[tuple[str, Any], Any] = {}
        self.stack: list[_Frame] = []
        self.root_lines: _Tree | int | None = None

    def problem(self, path: Path, message: str, line: int) -> None:
        self.problems.append(ConfigProblem(format_path(path), message, line))

    # -- where the next node goes ---------------------------------------------------------

    def child_path(self) -> Path:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if top.is_map:
            return (*top.path, str(top.key)) if top.key_ok else top.path
        return (*top.path, len(top.value))

    def check_depth(self, extra: int, line: int) -> None:
        if len(self.stack) + extra > MAX_DEPTH:
            raise _Limit(f"nesting deeper than {MAX_DEPTH} levels", line, self.child_path())

    # -- scalars -----------------------------------------------------------------------------

    def scalar(self, event: Any, line: int) -> Any:
        tag = event.tag
        value = event.value
        key = None
        if tag is None and len(value) <= 64:
            key = (value, event.implicit)
            hit = self.cache.get(key, _MISS)
            if hit is not _MISS:
                return hit
        known = len(self.problems)
        result = self.construct(event, tag, value, line)
        if key is not None and len(self.problems) == known:
            self.cache[key] = result
        return result

    def construct(self, event: Any, tag: str | None, value: str, line: int) -> Any:
        if tag is None or tag == "!":
            tag = self.resolve(yaml.ScalarNode, value, event.implicit)
        if tag in (_STR_TAG, _VALUE_TAG):
            return value
        if tag == _MERGE_TAG:
            return _MERGE
        if tag not in _SCALAR_TAGS:
            self.problem(self.child_path(), f"tag {_show_tag(tag)} is not accepted on a scalar; "
                               f"accepted tags: {_ALLOWED}", line)
            return None
        if tag in (_TAG + "int", _TAG + "float") and len(value) > MAX_NUMBER_CHARS:
            self.problem(self.child_path(), f"number longer than {MAX_NUMBER_CHARS} characters",
                         line)
            return None
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark)
        try:
            return _Loader.yaml_constructors[tag](self.resolver, node)
        except (ValueError, TypeError, OverflowError, yaml.YAMLError):
            self.problem(self.child_path(), f"not a valid {_show_tag(tag)} value", line)
            return None

    # -- placing a finished node ---------------------------------------------------------------

    def place(self, value: Any, lines: _Tree | int, size: int, height: int, line: int) -> Any:
        """Put a finished node into its parent; returns it when it is the document root."""
        if not self.stack:
            self.root_lines = lines
            return value
        top = self.stack[-1]
        top.size += size
        if height >= top.height:
            top.height = height + 1
        if not top.is_map:
            top.value.append(value)
            top.lines.append(lines)
            return None
        if not top.key_ok:  # this node is a key
            top.key_ok = True
            top.key_line = line
            if value is _MERGE or (isinstance(value, bool | int | float | str)
                                   and not isinstance(lines, _Tree)):
                top.key = value
            else:
                top.key = _BAD_KEY
                self.problem(top.path, "mapping keys must be scalars", line)
            return None
        key, kline = top.key, top.key_line
        top.key_ok = False
        top.key = None
        if key is _BAD_KEY:
            return None
        if key is _MERGE:
            self.merge(top, value, line)
            return None
        if key in top.first:
            self.problem((*top.path, str(key)),
                         f"duplicate key {key!r} (first defined at line {top.first[key]})",
                         kline)
            return None
        top.first[key] = kline
        top.value[key] = value
        top.lines[str(key)] = lines
        return None

    def merge(self, top: _Frame, value: Any, line: int) -> None:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(s, dict) for s in sources):
            self.problem((*top.path, "<<"), "a merge key '<<' takes a mapping or a list of "
                                            "mappings", line)
            return
        for source in sources:
            top.merges.append((source, line))

    def finish_map(self, frame: _Frame) -> None:
        """Apply merges: explicit keys win, then earlier merge sources over later ones."""
        for source, line in frame.merges:
            for key, value in source.items():
                if key in frame.value:
                    continue
                self.count(1, line)
                frame.value[key] = value
                frame.lines[str(key)] = line

    def count(self, nodes: int, line: int) -> None:
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            raise _Limit(f"more than {MAX_NODES} nodes, aliases expanded (an alias bomb?)",
                         line, self.child_path())

    # -- the loop --------------------------------------------------------------------------------

    def build(self, events: Iterator[Any]) -> Any:
        root: Any = None
        documents = 0
        lines_seen: dict[int, int] = {}
        for event in events:
            kind = type(event)
            if kind is yaml.ScalarEvent:
                line = event.start_mark.line + 1
                line = lines_seen.setdefault(line, line)
                self.count(1, line)
                value = self.scalar(event, line)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, 1, 0, line)
                done = self.place(value, line, 1, 0, line)
                if not self.stack:
                    root = done
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                is_map = kind is yaml.MappingStartEvent
                line = event.start_mark.line + 1
                self.count(1, line)
                self.check_depth(1, line)
                path = self.child_path()
                tag = event.tag
                want = _MAP_TAG if is_map else _SEQ_TAG
                if tag is not None and tag != "!" and tag != want:
                    what = "mapping" if is_map else "sequence"
                    self.problem(path, f"tag {_show_tag(tag)} is not accepted on a {what}; "
                                       f"accepted tags: {_ALLOWED}", line)
                if event.anchor is not None:
                    self.open_anchors.add(event.anchor)
                self.stack.append(_Frame(is_map, event.anchor, line, path))
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                frame = self.stack.pop()
                if frame.is_map:
                    self.finish_map(frame)
                tree = _Tree(frame.line, frame.lines)
                if frame.anchor is not None:
                    self.open_anchors.discard(frame.anchor)
                    self.anchors[frame.anchor] = (frame.value, frame.size, frame.height, tree)
                done = self.place(frame.value, tree, frame.size, frame.height, frame.line)
                if not self.stack:
                    root = done
            elif kind is yaml.AliasEvent:
                line = event.start_mark.line + 1
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _Limit(f"more than {MAX_ALIASES} aliases", line, self.child_path())
                name = event.anchor
                path = self.child_path()
                if name in self.open_anchors:
                    self.problem(path, f"recursive alias *{name}: it refers to a node that "
                                       "contains it", line)
                    value, size, height = None, 1, 0
                elif name not in self.anchors:
                    self.problem(path, f"undefined alias *{name}", line)
                    value, size, height = None, 1, 0
                else:
                    value, size, height, _ = self.anchors[name]
                    self.check_depth(height, line)
                    self.count(size, line)
                done = self.place(value, line, size, height, line)
                if not self.stack:
                    root = done
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    line = event.start_mark.line + 1
                    raise _Limit("expected a single document, found a second one", line)
            if len(self.problems) > MAX_PROBLEMS:
                break
        return root


class _Marker:
    """A placeholder: a refused key (its value is skipped), or the merge key ``<<``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_BAD_KEY = _Marker("<refused key>")
_MISS = _Marker("<not cached>")
_MERGE = _Marker("<<")


def _events(text: str) -> tuple[Iterator[Any], Callable[[], None]]:
    """The event stream of ``text`` (libyaml's parser when present) and its cleanup."""
    if _CParser is not None:
        parser = _CParser(text)
        return iter(parser.get_event, None), parser.dispose
    return iter(yaml.parse(text, Loader=_Loader)), lambda: None  # pragma: no cover


def _line_at(text: str, offset: int) -> int:
    if _CParser is not None:
        return text.encode("utf-8", "replace")[:offset].count(b"\n") + 1
    return text[:offset].count("\n") + 1  # pragma: no cover


def load_yaml(text: str, source: str) -> tuple[Any, Mapping[Path, int]]:
    """Parse ``text``; return the data and a map from each value's path to its line (1-based).

    Raises :class:`ConfigError` naming ``source`` and the line for a syntax error, a
    refused tag, a duplicate key or any crossed bound (see the module's docstring).
    """
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise ConfigError([ConfigProblem("", f"the file is larger than {MAX_BYTES} bytes")],
                          source=source)
    builder = _Builder()
    events, dispose = _events(text)
    try:
        root = builder.build(events)
    except _Limit as exc:
        raise ConfigError(
            [*builder.problems[:MAX_PROBLEMS],
             ConfigProblem(format_path(exc.path), exc.message, exc.line)],
            source=source,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "not valid YAML"
        raise ConfigError(
            [*builder.problems[:MAX_PROBLEMS],
             ConfigProblem("", f"YAML syntax error: {what}", line)],
            source=source,
        ) from None
    except yaml.reader.ReaderError as exc:
        raise ConfigError(
            [ConfigProblem("", f"YAML error: {exc.reason}", _line_at(text, exc.position))],
            source=source,
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem("", f"YAML error: {exc}")], source=source) from None
    finally:
        dispose()
    if builder.problems:
        problems = builder.problems
        if len(problems) > MAX_PROBLEMS:
            problems = [*problems[:MAX_PROBLEMS],
                        ConfigProblem("", "more problems not shown; fix these first")]
        raise ConfigError(problems, source=source)
    if root is None:
        return {}, Lines(None)
    return root, Lines(builder.root_lines)
