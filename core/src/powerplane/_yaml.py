"""YAML and JSON loading, bounded: line of every value, duplicate keys rejected, hostile
input refused.

The document is built from the event stream of libyaml's C parser (PyYAML's
``yaml._yaml.CParser``, whose events carry their marks, so every value keeps its line; the
pure-Python parser only where libyaml is absent) by one loop (no recursion), so a hostile
file meets a limit and becomes a :class:`~powerplane.errors.ConfigError` naming the file
and the line, never a traceback, an endless expansion or a memory blow-up:

* the document is at most :data:`MAX_BYTES` (read no further than that);
* nesting is at most :data:`MAX_DEPTH` levels, aliases included;
* at most :data:`MAX_NODES` nodes, aliases expanded (a file over 900,000 bytes one node
  per :data:`BYTES_PER_NODE` bytes), and at most :data:`MAX_ALIASES` aliases (``*name``,
  also under ``<<``): the "billion laughs" bomb stops here;
* an alias to an anchor that is not complete (a recursive alias) is an error;
* only the core tags are accepted (``!!str``, ``!!int``, ``!!float``, ``!!bool``,
  ``!!null``, ``!!timestamp``, ``!!seq``, ``!!map``): ``!!python/...``, ``!foo`` and every
  other tag are errors;
* a merge key ``<<`` takes a mapping or a list of mappings, anything else is an error.

The cost is linear in the size of the file: the line of each value is found only when a
problem is reported (a second pass, :class:`Lines`). The garbage collector is left as the
caller has it (library code never tunes it); the CLI turns it off in its own process while
a file loads, since each pass would walk every container made so far, again and again.

JSON is YAML 1.2, and :func:`powerplane._json.load_json` reads it with the standard
library's C decoder under the same bounds (the format for generated fleets of 10,000 nodes
and more); the lines of its problems come from this module's pass over the same text
(:func:`as_yaml`).

Plain scalars resolve by the YAML 1.2 core schema. Booleans: only true/false; ``on``,
``off``, ``yes``, ``no`` stay strings (so ``machines: {m1: on}`` means the power state, not
a boolean). Integers: ``17``, ``-17``, ``017`` (seventeen: decimal, not octal), ``0o17``,
``0x1F``; floats: ``2.5``, ``1e3``, ``.5``, ``+.inf``, ``.NaN``. YAML 1.1's other forms stay
strings: sexagesimal ``1:30`` (1.1: 90), ``1_000``, ``0b101``, ``-0x1F``. An explicitly
tagged scalar must be written as its tag reads it, else it is a problem at its line, never
a traceback: ``!!bool`` true or false (``!!bool yes`` is refused), ``!!null`` null, ``~``
or nothing, ``!!int`` and ``!!float`` in those same forms, ASCII digits only (Python would
read ``٦٢٣`` as 623), ``!!timestamp`` a date or a date and time.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from powerplane._bounds import MAX_BYTES, MAX_PROBLEMS, format_path
from powerplane.errors import ConfigError, ConfigProblem

__all__ = [
    "BYTES_PER_NODE",
    "MAX_ALIASES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_PROBLEMS",
    "Lines",
    "format_path",
    "load_yaml",
    "node_bound",
]

Path = tuple[str | int, ...]

MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences, aliases expanded."""
MAX_ALIASES = 100_000
"""Most aliases (``*name``, including those under a merge key) in one document."""
MAX_NODES = 300_000
"""Most nodes in a document of up to 900,000 bytes, aliases expanded (each use of an alias
counts its anchor's size): the "billion laughs" bomb stops here. A bigger file may hold one
node per :data:`BYTES_PER_NODE` bytes (:func:`node_bound`): a 10,000-node deployment
(1.4 MB) holds about 190,000 nodes, a 1,000,000-node one (140 MB) about 19,000,000."""
BYTES_PER_NODE = 3
"""Bytes of document per node allowed above :data:`MAX_NODES`: aliases never expand a big
file past a few times its own size (block YAML takes 7 to 8 bytes a node)."""
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


_BOOL_WORDS = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})
_NULL_WORDS = frozenset({"", "~", "null", "Null", "NULL"})
_TIMESTAMP = yaml.SafeLoader.timestamp_regexp


# What an explicitly tagged scalar may say, checked before PyYAML's constructor reads it
# (which reads ``!!bool`` the YAML 1.1 way, ``on`` and ``yes`` true, and raises KeyError on
# ``maybe``; ``!!null`` reads anything as null; ``!!timestamp abc`` raises AttributeError).
_WRITTEN: dict[str, tuple[Callable[[str], bool], str]] = {
    _TAG + "bool": (_BOOL_WORDS.__contains__, "expected true or false"),
    _TAG + "null": (_NULL_WORDS.__contains__, "expected null, ~ or nothing"),
    _TAG + "int": (lambda v: _INT_12.match(v) is not None,
                   "expected an integer in ASCII digits: 17, -17, 0o21 or 0x11"),
    _TAG + "float": (lambda v: _FLOAT_12.match(v) is not None,
                     "expected a number in ASCII digits: 2.5, -1e3, .inf or .nan"),
    _TAG + "timestamp": (lambda v: _TIMESTAMP.match(v) is not None,
                         "expected a date, YYYY-MM-DD, or a date and time"),
}


class _Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's booleans, integers and floats (its
    resolver and scalar constructors are used)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers
            if tag not in (_TAG + "bool", _TAG + "int", _TAG + "float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _TAG + "bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)\Z"),
    list("tTfF"),
)
# YAML 1.2.2 section 10.3.2 (core schema), in its order: an integer first (``1`` also
# matches the float pattern). ASCII digits only ([0-9], never \d), no ``_`` separators, no
# ``0b`` binary, no sexagesimal ``1:30``: each of those is a string, as 1.2 says.
_INT_12: re.Pattern[str] = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_FLOAT_12: re.Pattern[str] = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z")
_Loader.add_implicit_resolver(_TAG + "int", _INT_12, list("-+0123456789"))
_Loader.add_implicit_resolver(_TAG + "float", _FLOAT_12, list("-+.0123456789"))


def _construct_int(loader: Any, node: yaml.ScalarNode) -> int:
    """A 1.2 integer: decimal (``017`` is seventeen, not octal), ``0o17`` or ``0x1F``."""
    value: str = node.value
    if value.startswith("0o"):
        return int(value[2:], 8)
    if value.startswith("0x"):
        return int(value[2:], 16)
    return int(value)


def _construct_float(loader: Any, node: yaml.ScalarNode) -> float:
    """A 1.2 float: ``2.5``, ``1e3``, ``.5``, ``+.inf``, ``.NaN``."""
    value: str = node.value
    if value.lstrip("+-").lower() == ".inf":
        return -math.inf if value.startswith("-") else math.inf
    if value.lower() == ".nan":
        return math.nan
    return float(value)


_Loader.add_constructor(_TAG + "int", _construct_int)
_Loader.add_constructor(_TAG + "float", _construct_float)

_CParser: Any
try:
    import yaml._yaml

    _CParser = yaml._yaml.CParser
except (ImportError, AttributeError):  # pragma: no cover - libyaml ships in PyYAML's wheels
    _CParser = None


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
    alias's line.

    Built on first use (a problem to report), by a second pass over the same text: a valid
    file never pays for it. Kept as a tree (not one entry per path), so a big file stays
    small. :attr:`parser` names the parser that read the text: ``"libyaml"`` (PyYAML's C
    binding) or ``"python"`` (PyYAML's pure parser, only where libyaml is absent).
    """

    def __init__(self, root: _Tree | int | None = None, *, text: str | None = None,
                 max_nodes: int = MAX_NODES, json: bool = False) -> None:
        self._root = root
        self._text = text
        self._max_nodes = max_nodes
        self._json = json
        self.parser = "libyaml" if _CParser is not None else "python"

    def _tree(self) -> _Tree | int | None:
        if self._text is not None:
            text, self._text = self._text, None
            builder = _Builder(track=True, max_nodes=self._max_nodes)
            if self._json:  # read as YAML, where libyaml reads JSON otherwise: no lines
                with contextlib.suppress(_Limit, _Enough, yaml.YAMLError):
                    _build_from(builder, as_yaml(text))
            else:
                _build_from(builder, text)
            self._root = builder.root_lines
        return self._root

    def _find(self, path: Path) -> int | None:
        node = self._tree()
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
        root = self._tree()
        stack: list[tuple[Path, _Tree | int]] = [] if root is None else [((), root)]
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
        return self._text is not None or self._root is not None


def node_bound(size: int) -> int:
    """The most nodes (aliases expanded) a document of ``size`` bytes may hold:
    :data:`MAX_NODES`, or one node per :data:`BYTES_PER_NODE` bytes of a bigger file."""
    return max(MAX_NODES, size // BYTES_PER_NODE)


class _Frame:
    """A collection being built."""

    __slots__ = ("anchor", "first", "height", "is_map", "key", "key_line", "key_ok", "line",
                 "lines", "merges", "start", "value")

    def __init__(self, is_map: bool, anchor: str | None, line: int, start: int,
                 track: bool) -> None:
        self.is_map = is_map
        self.anchor = anchor
        self.line = line
        self.start = start  # nodes counted before this one: its size is the difference
        self.value: Any = {} if is_map else []
        self.lines: Any = ({} if is_map else []) if track else None
        self.height = 1
        self.first: dict[Any, int] = {} if is_map else _NO_KEYS
        self.merges: list[tuple[Any, int]] | None = None
        self.key: Any = None
        self.key_line = 0
        self.key_ok = False  # a key is pending (the next node is its value)


class _Limit(Exception):
    """A bound was crossed: stop reading at once."""

    def __init__(self, message: str, line: int, path: Path = ()) -> None:
        self.message = message
        self.line = line
        self.path = path


class _Enough(Exception):
    """More than :data:`MAX_PROBLEMS` problems: stop reading, report those."""


class _Builder:
    """Builds the document from events, one loop, every bound checked as it goes.

    ``track``: also build the tree of lines (:class:`Lines`); the pass that reads the
    document does not.
    """

    def __init__(self, *, track: bool = False, max_nodes: int = MAX_NODES) -> None:
        self.track = track
        self.max_nodes = max_nodes
        self.resolver = _Loader("")
        self.resolve: Callable[[type[yaml.Node], str, Any], str] = self.resolver.resolve
        self.problems: list[ConfigProblem] = []
        self.anchors: dict[str, tuple[Any, int, int]] = {}
        self.open_anchors: set[str] = set()
        self.nodes = 0
        self.cache: dict[str, Any] = {}
        self.stack: list[_Frame] = []
        self.root_lines: _Tree | int | None = None

    def problem(self, path: Path, message: str, line: int) -> None:
        self.problems.append(ConfigProblem(format_path(path), message, line))
        if len(self.problems) > MAX_PROBLEMS:
            raise _Enough

    # -- where the next node goes ---------------------------------------------------------

    def path_at(self, depth: int) -> Path:
        """The path of the next node placed into ``stack[depth - 1]`` (0: the root)."""
        out: list[str | int] = []
        for frame in self.stack[:depth]:
            if not frame.is_map:
                out.append(len(frame.value))
            elif frame.key_ok:
                out.append(str(frame.key))
        return tuple(out)

    def child_path(self) -> Path:
        return self.path_at(len(self.stack))

    def too_many(self, line: int) -> _Limit:
        return _Limit(f"more than {self.max_nodes} nodes, aliases expanded (an alias bomb?)",
                      line, self.child_path())

    # -- scalars -----------------------------------------------------------------------------

    def plain(self, event: Any, value: str, line: int) -> Any:
        """A plain (unquoted, untagged) scalar: a string unless a core resolver matches."""
        resolvers = _RESOLVERS.get(value[:1], _WILDCARD)
        if not resolvers:
            return value
        short = len(value) <= 64
        if short:
            hit = self.cache.get(value, _MISS)
            if hit is not _MISS:
                return hit
        tag = next((tag for tag, rx in resolvers if rx.match(value)), None)
        if tag is None:
            return value
        known = len(self.problems)
        result = self.construct(event, tag, value, line, written=False)
        if short and len(self.problems) == known:
            self.cache[value] = result
        return result

    def construct(self, event: Any, tag: str, value: str, line: int,
                  written: bool = True) -> Any:
        """The value of a scalar of ``tag``; ``written``: the tag was written (else a
        resolver matched the plain scalar, so it is in the tag's form already)."""
        if tag == "!":
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
        form = _WRITTEN.get(tag) if written else None
        if form is not None and not form[0](value):
            self.problem(self.child_path(), f"not a valid {_show_tag(tag)} value ({form[1]})",
                         line)
            return None
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark)
        try:
            return _Loader.yaml_constructors[tag](self.resolver, node)
        except Exception:  # PyYAML's constructors fail many ways on odd text: never a traceback
            self.problem(self.child_path(), f"not a valid {_show_tag(tag)} value", line)
            return None

    # -- placing a finished node into its mapping ---------------------------------------------

    def key(self, top: _Frame, value: Any, line: int) -> None:
        top.key_ok = True
        top.key_line = line
        if value is _MERGE or isinstance(value, bool | int | float | str):
            top.key = value
        else:
            top.key = _BAD_KEY
            self.problem(self.path_at(len(self.stack) - 1), "mapping keys must be scalars", line)

    def put(self, top: _Frame, value: Any, lines: _Tree | int, line: int) -> None:
        key, kline = top.key, top.key_line
        top.key_ok = False
        top.key = None
        if key is _BAD_KEY:
            return
        if key is _MERGE:
            self.merge(top, value, line)
            return
        first = top.first
        if key in first:
            self.problem((*self.path_at(len(self.stack) - 1), str(key)),
                         f"duplicate key {key!r} (first defined at line {first[key]})", kline)
            return
        first[key] = kline
        top.value[key] = value
        if self.track:
            top.lines[key if type(key) is str else str(key)] = lines

    def merge(self, top: _Frame, value: Any, line: int) -> None:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(s, dict) for s in sources):
            self.problem((*self.path_at(len(self.stack) - 1), "<<"),
                         "a merge key '<<' takes a mapping or a list of mappings", line)
            return
        if top.merges is None:
            top.merges = []
        for source in sources:
            top.merges.append((source, line))

    def finish_map(self, frame: _Frame) -> None:
        """Apply merges: explicit keys win, then earlier merge sources over later ones."""
        assert frame.merges is not None
        for source, line in frame.merges:
            for key, value in source.items():
                if key in frame.value:
                    continue
                self.nodes += 1
                if self.nodes > self.max_nodes:
                    raise self.too_many(line)
                frame.value[key] = value
                if self.track:
                    frame.lines[str(key)] = line

    # -- the loop --------------------------------------------------------------------------------

    def build(self, events: Iterator[Any]) -> Any:
        try:
            return self._build(events)
        except _Enough:
            return None

    def _build(self, events: Iterator[Any]) -> Any:
        stack = self.stack
        track = self.track
        max_nodes = self.max_nodes
        anchors = self.anchors
        open_anchors = self.open_anchors
        plain = self.plain
        root: Any = None
        documents = 0
        aliases = 0
        for event in events:
            kind = type(event)
            if kind is _ScalarEvent:
                line = event.start_mark.line + 1
                self.nodes += 1
                if self.nodes > max_nodes:
                    raise self.too_many(line)
                value = event.value
                tag = event.tag
                if tag is not None:
                    value = self.construct(event, tag, value, line)
                elif event.implicit[0]:
                    value = plain(event, value, line)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1, 0)
                if not stack:
                    root = value
                    self.root_lines = line
                    continue
                top = stack[-1]
                if not top.is_map:
                    top.value.append(value)
                    if track:
                        top.lines.append(line)
                elif top.key_ok:
                    key = top.key
                    if type(key) is str and key not in top.first:  # the common case, inline
                        top.key_ok = False
                        top.first[key] = top.key_line
                        top.value[key] = value
                        if track:
                            top.lines[key] = line
                    else:
                        self.put(top, value, line, line)
                elif type(value) is str:  # a key (the common case, inline)
                    top.key = value
                    top.key_line = line
                    top.key_ok = True
                else:
                    self.key(top, value, line)
            elif kind is _MappingStartEvent or kind is _SequenceStartEvent:
                is_map = kind is _MappingStartEvent
                line = event.start_mark.line + 1
                self.nodes += 1
                if self.nodes > max_nodes:
                    raise self.too_many(line)
                if len(stack) >= MAX_DEPTH:
                    raise _Limit(f"nesting deeper than {MAX_DEPTH} levels", line,
                                 self.child_path())
                tag = event.tag
                if tag is not None and tag != "!" and tag != (_MAP_TAG if is_map else _SEQ_TAG):
                    what = "mapping" if is_map else "sequence"
                    self.problem(self.child_path(), f"tag {_show_tag(tag)} is not accepted on "
                                                    f"a {what}; accepted tags: {_ALLOWED}", line)
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                stack.append(_Frame(is_map, event.anchor, line, self.nodes - 1, track))
            elif kind is _MappingEndEvent or kind is _SequenceEndEvent:
                frame = stack.pop()
                if frame.merges is not None:
                    self.finish_map(frame)
                value = frame.value
                tree: Any = _Tree(frame.line, frame.lines) if track else None
                if frame.anchor is not None:
                    open_anchors.discard(frame.anchor)
                    anchors[frame.anchor] = (value, self.nodes - frame.start, frame.height)
                if not stack:
                    root = value
                    self.root_lines = tree
                    continue
                top = stack[-1]
                if frame.height >= top.height:
                    top.height = frame.height + 1
                if not top.is_map:
                    value_list: list[Any] = top.value
                    value_list.append(value)
                    if track:
                        top.lines.append(tree)
                elif top.key_ok:
                    self.put(top, value, tree, frame.line)
                else:
                    self.key(top, value, frame.line)
            elif kind is _AliasEvent:
                line = event.start_mark.line + 1
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise _Limit(f"more than {MAX_ALIASES} aliases", line, self.child_path())
                name = event.anchor
                height = 0
                if name in open_anchors:
                    self.problem(self.child_path(), f"recursive alias *{name}: it refers to a "
                                                    "node that contains it", line)
                    value = None
                elif name not in anchors:
                    self.problem(self.child_path(), f"undefined alias *{name}", line)
                    value = None
                else:
                    value, size, height = anchors[name]
                    if len(stack) + height > MAX_DEPTH:
                        raise _Limit(f"nesting deeper than {MAX_DEPTH} levels", line,
                                     self.child_path())
                    self.nodes += size
                    if self.nodes > max_nodes:
                        raise self.too_many(line)
                if not stack:
                    root = value
                    self.root_lines = line
                    continue
                top = stack[-1]
                if height >= top.height:
                    top.height = height + 1
                if not top.is_map:
                    top.value.append(value)
                    if track:
                        top.lines.append(line)
                elif top.key_ok:
                    self.put(top, value, line, line)
                else:
                    self.key(top, value, line)
            elif kind is _DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _Limit("expected a single document, found a second one",
                                 event.start_mark.line + 1)
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
_NO_KEYS: dict[Any, int] = {}  # a sequence's (never written)

_ScalarEvent = yaml.ScalarEvent
_MappingStartEvent = yaml.MappingStartEvent
_SequenceStartEvent = yaml.SequenceStartEvent
_MappingEndEvent = yaml.MappingEndEvent
_SequenceEndEvent = yaml.SequenceEndEvent
_AliasEvent = yaml.AliasEvent
_DocumentStartEvent = yaml.DocumentStartEvent

# A plain scalar's implicit resolvers by its first character, as PyYAML's
# BaseResolver.resolve picks them (the character's own, then the wildcard ones); a
# character with none is a string at once.
_WILDCARD: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    _Loader.yaml_implicit_resolvers.get(None, []))
_RESOLVERS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    first: (*resolvers, *_WILDCARD)
    for first, resolvers in _Loader.yaml_implicit_resolvers.items() if first is not None
}


def _events(text: str) -> tuple[Iterator[Any], Callable[[], None]]:
    """The event stream of ``text`` (libyaml's parser when present) and its cleanup."""
    if _CParser is not None:
        parser = _CParser(text)
        return iter(parser.get_event, None), parser.dispose
    return iter(yaml.parse(text, Loader=_Loader)), lambda: None  # pragma: no cover


def _line_at(text: str, offset: int) -> int:
    if _CParser is not None:  # offset: in UTF-8 bytes, at least as many as the characters
        if text.isascii():
            return text.count("\n", 0, offset) + 1
        return text[:offset].encode("utf-8", "replace")[:offset].count(b"\n") + 1
    return text[:offset].count("\n") + 1  # pragma: no cover


def _build_from(builder: _Builder, text: str) -> Any:
    """``builder``'s document from the events of ``text``."""
    events, dispose = _events(text)
    try:
        return builder.build(events)
    finally:
        dispose()


def full_pass(text: str, source: str, bound: int) -> Any:
    """The document from libyaml's events; :class:`ConfigError` for every problem."""
    builder = _Builder(max_nodes=bound)
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
    return root


def checked_size(text: str, source: str, size: int | None) -> int:
    """The text's size in UTF-8 bytes (``size`` when the caller knows it: the file's; else
    counted, without a copy of an ASCII text); :class:`ConfigError` over :data:`MAX_BYTES`."""
    if size is None:
        size = (len(text) if len(text) > MAX_BYTES or text.isascii()
                else len(text.encode("utf-8", "replace")))
    if size > MAX_BYTES:
        raise ConfigError([ConfigProblem("", f"the file is larger than {MAX_BYTES} bytes")],
                          source=source)
    return size


def load_yaml(text: str, source: str, *, size: int | None = None) -> tuple[Any, Lines]:
    """Parse ``text``; return the data and a map from each value's path to its line (1-based).

    ``size``: the text's length in UTF-8 bytes when the caller knows it (the file's size):
    else it is counted, without a copy of an ASCII text.

    Raises :class:`ConfigError` naming ``source`` and the line for a syntax error, a
    refused tag, a duplicate key or any crossed bound (see the module's docstring).
    """
    bound = node_bound(checked_size(text, source, size))
    root = full_pass(text, source, bound)
    if root is None:
        return {}, Lines(None)
    return root, Lines(text=text, max_nodes=bound)


_YAML_UNPRINTED = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
_SURROGATES = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})",
                         re.IGNORECASE)


def as_yaml(text: str) -> str:
    """JSON text as libyaml reads it to the same document, line for line: tabs and carriage
    returns (only whitespace between tokens in JSON) as spaces, so the lines count line
    feeds as JSON's do; in strings, the characters YAML does not print or breaks lines at
    (DEL, C1 controls, U+2028, U+2029, U+FFFE, U+FFFF) as escapes, and a surrogate pair
    ``\\ud83d\\ude00`` as one ``\\U0001f600``."""
    text = text.replace("\t", " ").replace("\r", " ")
    if not text.isascii() or "\x7f" in text:
        text = _YAML_UNPRINTED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    def pair(m: re.Match[str]) -> str:
        high, low = int(m.group(2), 16), int(m.group(3), 16)
        return f"{m.group(1)}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    return _SURROGATES.sub(pair, text) if "\\u" in text else text
