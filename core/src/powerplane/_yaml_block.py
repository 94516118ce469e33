"""A fast first pass over the plain block YAML that big deployment files are made of.

:func:`read_block` reads a strict subset of YAML line by line (one loop, no recursion, no
event objects) and returns exactly the document the full path (:mod:`powerplane._yaml`,
libyaml's events) builds for it, or :data:`DECLINE` when the text is outside the subset or
anything about it is doubtful; the caller then reads the text the full way, which reports
every problem with its line as before. The commonest line (one more ``key: word``,
``key: 'word'``, ``key: {a: b, c: d}`` or ``key: [{a: b}]`` of the mapping being read) is
read by one regex and a few dictionary operations; every other line by the general regexes
and the indentation stack. The text is split into lines a mebibyte at a time, and the
patterns are compiled on first use.

The subset:

* block mappings and block sequences by indentation (a sequence may sit at its key's own
  indentation, as PyYAML writes it; ``- - x`` and ``- key: value`` open nested collections);
* ``key: value`` lines whose key is a plain or quoted scalar, ``- value`` lines, empty
  values (null, or the collection on the lines below);
* plain scalars on one line, resolved by the caller's ``plain`` (the full path's own
  resolver and cache), single-quoted scalars (``''``) and double-quoted ones with their
  escapes;
* flow mappings and sequences of such scalars, nested, on one line;
* comments, blank lines and one leading ``---``.

Declined: tabs, carriage returns and every other character libyaml reads specially or
refuses, anchors, aliases, tags, merge keys, ``?`` keys, block scalars (``|``, ``>``),
scalars or flow collections over several lines, a second document, directives, a key
that is not a string, number or boolean, a duplicate key, a key longer than 1,000
characters, a problem the resolver reports, more nodes than ``max_nodes`` or nesting as
deep as ``max_depth``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Container, Iterator
from itertools import chain
from typing import Any

__all__ = ["DECLINE", "read_block"]


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DECLINE: Any = _Marker("<declined>")
"""What :func:`read_block` returns for a text it does not read: use the full path."""

_NOTHING = _Marker("<no value pending>")
_PENDING_ITEM = _Marker("<a sequence item pending>")

_KEY_TYPES = (str, int, float, bool)
_LONGEST_KEY = 1000  # libyaml refuses a simple key over 1024 characters

# Characters the subset does not read as themselves: tab, carriage return, NEL, line and
# paragraph separators (libyaml's other line breaks), byte-order mark, control characters,
# surrogates and the rest libyaml refuses as unprintable.
_OUTSIDE = "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"

# A plain scalar: not starting with an indicator (``-`` only before a character that
# keeps it a scalar), no ``: `` and no `` #`` inside, no trailing spaces; in flow context
# also none of ``,[]{}`` and no ``:`` at all.
_FIRST = r"(?:[^ \-?:,\[\]{}#&*!|>'\"%@`]|-(?=[^ :#,\[\]{}]))"
_PLAIN = _FIRST + r"(?:[^ :#]++|:(?=[^ ])|#| ++(?=[^ :#]))*+"
_FLOW_PLAIN = _FIRST + r"(?:[^ :#,\[\]{}]++| ++(?=[^ :#,\[\]{}]))*+"
_SINGLE = r"'((?:[^']++|'')*+)'"
_DOUBLE = r'"((?:[^"\\]++|\\.)*+)"'
_TAIL = r" *(?:(?<= )#.*)?$"
# the usual one-line flows, matched whole: a mapping of plain scalars, a sequence of plain
# scalars, a sequence of such mappings (scalars with no space inside, none starting with -)
_WORD = r"[^ \-?:,\[\]{}#&*!|>'\"%@`][^ :#,\[\]{}]*+"
_PAIRS = rf"\{{ *+(?:{_WORD}: ++{_WORD}(?: *+, *+{_WORD}: ++{_WORD})*+)? *+\}}"
_ITEMS = rf"\[ *+(?:{_WORD}(?: *+, *+{_WORD})*+)? *+\]"
_MAPS = rf"\[ *+(?:{_PAIRS}(?: *+, *+{_PAIRS})*+)? *+\]"
# a value's groups: plain, single, double, the three usual flows, any other flow; all
# None: an empty value
_VALUE_GROUPS = (rf"(?:({_PLAIN})|{_SINGLE}|{_DOUBLE}|({_PAIRS})|({_ITEMS})|({_MAPS})"
                 rf"|([\[{{].*))?{_TAIL}")
# groups: indentation, key (plain, single, double), the value's
_KEY_LINE = rf"( *)(?:({_PLAIN})|{_SINGLE}|{_DOUBLE}) *:(?: +|$){_VALUE_GROUPS}"
_DASH = r"( *)-(?: +|$)"
_DOCUMENT_START = r"---(?: +(?:#.*)?)?$"
# groups: punctuation, ': ', single, double, plain
_TOKEN = rf" *(?:([\[\]{{}},])|(: )|{_SINGLE}|{_DOUBLE}|({_FLOW_PLAIN}))"
_PAIR = rf"({_WORD}): ++({_WORD})"
_PAIR_OR_OPEN = rf"(\{{)|({_WORD}): ++({_WORD})"
# The commonest lines, one regex with no alternatives tried in vain: a key (no space in it)
# and a value that is a plain word, a single-quoted scalar with no quote in it, a flow
# mapping of up to four pairs of words, a flow sequence of one such mapping, or nothing.
# groups: indentation, key, plain, single, four pairs, four pairs in a sequence
_KEY_WORD = r"[^ \-?:,\[\]{}#&*!|>'\"%@`][^ :#]{0,998}+"
_VALUE_WORD = r"[^ \-?:,\[\]{}#&*!|>'\"%@`][^ :#]*+"
_FLOW_KEY = r"[^ \-?:,\[\]{}#&*!|>'\"%@`][^ :#,\[\]{}]{0,998}+"
_PAIRS4 = (rf"\{{ *+({_FLOW_KEY}): ++({_WORD})"
           + rf"(?: *+, *+({_FLOW_KEY}): ++({_WORD}))?+" * 3 + r" *+\}")
_COMMON = (
    rf"( *)({_KEY_WORD}):(?: (?:({_VALUE_WORD})|'([^']*+)'|{_PAIRS4}|\[ *+{_PAIRS4} *+\])|)$"
)
_CACHED_FLOWS = 4096  # flow mappings of plain scalars kept by their text (labels repeat)
_CACHED_KEYS = 65536  # resolved plain keys kept by their text (field names repeat)
_CHUNK = 1 << 20  # characters split into lines at a time (not a list of every line)

_ESCAPE = r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))"
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
            "_": "\xa0", "L": "\u2028", "P": "\u2029"}


class _Patterns:
    """The regexes, compiled on first use (it takes milliseconds: a small file never pays)."""

    def __init__(self) -> None:
        self.outside = re.compile(_OUTSIDE)
        self.key_line = re.compile(_KEY_LINE)
        self.value = re.compile(_VALUE_GROUPS)
        self.dash = re.compile(_DASH)
        self.document_start = re.compile(_DOCUMENT_START)
        self.token = re.compile(_TOKEN)
        self.flow_tail = re.compile(_TAIL)
        self.pair = re.compile(_PAIR)
        self.pair_or_open = re.compile(_PAIR_OR_OPEN)
        self.item = re.compile(_WORD)
        self.common = re.compile(_COMMON)
        self.escape = re.compile(_ESCAPE)


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


def _unescape(text: str) -> str | None:
    """A double-quoted scalar's text with its escapes replaced; ``None`` for one not known
    or a code point libyaml refuses."""
    if "\\" not in text:
        return text
    out: list[str] = []
    end = 0
    for m in _patterns().escape.finditer(text):
        out.append(text[end:m.start()])
        end = m.end()
        short, middle, wide, char = m.groups()
        if char is not None:
            known = _ESCAPES.get(char)
            if known is None:
                return None
            out.append(known)
            continue
        code = int(short or middle or wide, 16)
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            return None
        out.append(chr(code))
    out.append(text[end:])
    return "".join(out)


class _Everything:
    """Every first character: each plain scalar goes through the resolver."""

    def __contains__(self, item: object) -> bool:
        return True


class _Reader:
    """What one reading shares: the resolver, the keys met so far, the bounds."""

    __slots__ = ("flats", "keys", "max_depth", "needs", "plain", "rx")

    def __init__(self, plain: Callable[[str], Any], needs: Container[str] | None,
                 max_depth: int) -> None:
        self.plain = plain
        self.needs: Container[str] = _Everything() if needs is None else needs
        self.keys: dict[str, Any] = {}
        self.flats: dict[str, dict[Any, Any]] = {}
        self.max_depth = max_depth
        self.rx = _patterns()

    def key(self, text: str) -> Any:
        """A plain key's value (a string, number or boolean), or :data:`DECLINE`; for one
        whose first character is in :attr:`needs` (others are strings)."""
        key = self.keys.get(text, DECLINE)
        if key is DECLINE:
            key = self.plain(text)
            if type(key) not in _KEY_TYPES:
                return DECLINE  # null, a timestamp, the merge key
            if len(self.keys) < _CACHED_KEYS:
                self.keys[text] = key
        return key

    def scalar(self, unquoted: str | None, single: str | None, double: str | None) -> Any:
        """One scalar's value, or :data:`DECLINE`."""
        if unquoted is not None:
            return self.plain(unquoted) if unquoted[:1] in self.needs else unquoted
        if single is not None:
            return single.replace("''", "'") if "''" in single else single
        assert double is not None
        value = _unescape(double)
        return DECLINE if value is None else value

    def pairs(self, text: str) -> dict[Any, Any] | None:
        """A new flow mapping of plain scalars from its text (:data:`_PAIRS`); ``None`` for
        a duplicate key or a key that is not a string, number or boolean."""
        got = self.flats.get(text)
        if got is None:
            key, plain, needs = self.key, self.plain, self.needs
            found = self.rx.pair.findall(text)
            if len(text) > _LONGEST_KEY and any(len(k) > _LONGEST_KEY for k, _ in found):
                return None
            got = {}
            for k, v in found:
                if k[:1] in needs:
                    k = key(k)
                    if k is DECLINE:
                        return None
                got[k] = plain(v) if v[:1] in needs else v
            if len(got) != len(found):
                return None
            if len(self.flats) < _CACHED_FLOWS:
                self.flats[text] = got
        return got.copy()

    def four(self, texts: tuple[str | None, ...]) -> dict[Any, Any] | None:
        """A flow mapping from the up to four ``(key, value)`` texts of :data:`_COMMON`;
        ``None`` as :meth:`pairs`."""
        key, plain, needs = self.key, self.plain, self.needs
        out: dict[Any, Any] = {}
        count = 0
        for k, v in zip(texts[::2], texts[1::2], strict=True):
            if k is None or v is None:
                break
            if k[:1] in needs:
                k = key(k)
                if k is DECLINE:
                    return None
            out[k] = plain(v) if v[:1] in needs else v
            count += 1
        return out if len(out) == count else None

    def maps(self, text: str) -> tuple[list[Any], int] | None:
        """A flow sequence of flow mappings of plain scalars from its text (:data:`_MAPS`)
        and its count of nodes; ``None`` as :meth:`pairs`."""
        key, plain, needs = self.key, self.plain, self.needs
        out: list[Any] = []
        here: dict[Any, Any] = {}
        count = 0
        nodes = 1
        found = self.rx.pair_or_open.findall(text, 1)
        if len(text) > _LONGEST_KEY and any(len(k) > _LONGEST_KEY for _, k, _ in found):
            return None
        for opening, k, v in found:
            if opening:
                if len(here) != count:
                    return None
                here = {}
                count = 0
                out.append(here)
                nodes += 1
                continue
            if k[:1] in needs:
                k = key(k)
                if k is DECLINE:
                    return None
            here[k] = plain(v) if v[:1] in needs else v
            count += 1
            nodes += 2
        if len(here) != count:
            return None
        return out, nodes

    def flow(self, pairs: str | None, items: str | None, maps: str | None, line: str,
             at: int, depth: int) -> tuple[Any, int]:
        """A flow collection on one line and its count of nodes, or ``(DECLINE, 0)``:
        ``pairs``, ``items``, ``maps``: the text of a usual one (:data:`_VALUE_GROUPS`),
        else the one that starts at ``line[at]``; ``depth``: collections open around it."""
        if depth + 1 >= self.max_depth:
            return DECLINE, 0
        if pairs is not None:
            got = self.pairs(pairs)
            return (DECLINE, 0) if got is None else (got, 1 + 2 * len(got))
        if items is not None:
            plain, needs = self.plain, self.needs
            out = [plain(v) if v[:1] in needs else v for v in self.rx.item.findall(items, 1)]
            return out, 1 + len(out)
        if maps is not None:
            return self.maps(maps) or (DECLINE, 0)
        return self.tokens(line, at, depth)

    def tokens(self, line: str, pos: int, depth: int) -> tuple[Any, int]:
        """:meth:`flow` token by token, for any other flow collection on one line."""
        token = self.rx.token.match
        parents: list[tuple[Any, bool]] = []
        root: Any = None
        here: Any = None
        is_map = False
        key: Any = None
        key_at = 0
        # 0: just opened, 1: after an entry, 2: after ',', 3: after a key, 4: after ': '
        state = 0
        nodes = 0
        while True:
            m = token(line, pos)
            if m is None:
                return DECLINE, 0
            pos = m.end()
            punct, colon, single, double, unquoted = m.groups()
            if punct is not None:
                if punct == "[" or punct == "{":
                    if here is not None:
                        if (state != 4) if is_map else (state == 1):
                            return DECLINE, 0  # a collection as a key, or no ',' before it
                        if depth + len(parents) + 1 >= self.max_depth:
                            return DECLINE, 0
                    new: Any = {} if punct == "{" else []
                    nodes += 1
                    if here is None:
                        root = new
                    else:
                        if is_map:
                            here[key] = new
                        else:
                            here.append(new)
                        parents.append((here, is_map))
                    here, is_map, state = new, punct == "{", 0
                elif punct == ",":
                    if state != 1:
                        return DECLINE, 0
                    state = 2
                else:
                    if (punct == "}") != is_map or state > 1:
                        return DECLINE, 0
                    if not parents:
                        break
                    here, is_map = parents.pop()
                    state = 1
                continue
            if colon is not None:
                if state != 3 or m.start(2) - key_at > _LONGEST_KEY:
                    return DECLINE, 0
                state = 4
                continue
            if is_map and state != 4:
                if state == 1 or state == 3:
                    return DECLINE, 0
                value = self.key(unquoted) if unquoted is not None else self.scalar(
                    None, single, double)
                if value is DECLINE or value in here:
                    return DECLINE, 0
                key, key_at, state = value, m.start(), 3
                nodes += 1
                continue
            value = self.scalar(unquoted, single, double)
            if value is DECLINE:
                return DECLINE, 0
            nodes += 1
            if is_map:
                here[key] = value
            elif state == 1:
                return DECLINE, 0
            else:
                here.append(value)
            state = 1
        if self.rx.flow_tail.match(line, pos) is None:
            return DECLINE, 0
        return root, nodes


class _Outside(Exception):
    """A character the subset does not read as itself (:data:`_OUTSIDE`)."""


def _lines(text: str, outside: re.Pattern[str]) -> Iterator[list[str]]:
    """The lines of ``text`` (without their line breaks), a mebibyte of text at a time; a
    final empty line is left out. Raises :class:`_Outside` at a chunk with a character
    ``outside`` finds."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start + _CHUNK)
        if end < 0:
            end = size
        chunk = text[start:end]
        if chunk.isascii():  # printable ASCII and line feeds: the quickest check there is
            if not chunk.replace("\n", " ").isprintable():
                raise _Outside
        elif outside.search(chunk) is not None:
            raise _Outside
        yield chunk.split("\n")
        start = end + 1


def read_block(text: str, plain: Callable[[str], Any], needs: Container[str] | None,
               max_nodes: int, max_depth: int) -> Any:
    """The document in ``text`` (``None`` for an empty one), or :data:`DECLINE`.

    ``plain`` resolves a plain scalar (the full path's resolver: the same types, the same
    cache); the caller declines too when it reported a problem. ``needs``: the first
    characters of the plain scalars ``plain`` may read as something other than the text
    itself (``None``: any). ``max_nodes`` and ``max_depth``: the full path's bounds,
    declined at (that path reports them).
    """
    rx = _patterns()
    try:
        return _read(text, rx, plain, needs, max_nodes, max_depth)
    except _Outside:
        return DECLINE


def _read(text: str, rx: _Patterns, plain: Callable[[str], Any], needs: Container[str] | None,
          max_nodes: int, max_depth: int) -> Any:
    """:func:`read_block`, which see; :class:`_Outside` from :func:`_lines`."""
    reader = _Reader(plain, needs, max_depth)
    common = rx.common.match
    key_line = rx.key_line.match
    value_match = rx.value.match
    dash = rx.dash.match
    document_start = rx.document_start.match
    four = reader.four
    flow = reader.flow
    flat = reader.pairs
    flats = reader.flats
    maps_of = reader.maps
    key_of = reader.key
    scalar = reader.scalar
    needs_of = reader.needs
    longest = _LONGEST_KEY
    null = plain("")
    holder: list[Any] = []
    # the open collections below the current one: (indentation, collection, is a mapping,
    # pending key or item, a sequence at its key's own indentation)
    stack: list[tuple[int, Any, bool, Any, bool]] = []
    here: Any = holder
    pending: Any = _PENDING_ITEM
    indent, is_map, flush = -1, False, False
    nodes = 0
    started = False
    for line in chain.from_iterable(_lines(text, rx.outside)):
        c = common(line)
        if c is not None:
            last = c.lastindex or 0
            if c.end(1) == indent and is_map and pending is _NOTHING and indent:
                # the commonest case: one more key of the mapping being read
                key = c[2]
                if key[:1] in needs_of:
                    key = key_of(key)
                    if key is DECLINE:
                        return DECLINE
                if key in here:
                    return DECLINE
                if last == 3:
                    value = c[3]
                    here[key] = plain(value) if value[:1] in needs_of else value
                    nodes += 2
                elif last == 4:
                    here[key] = c[4]
                    nodes += 2
                elif last == 2:
                    pending = key
                    nodes += 1
                elif len(stack) + 2 >= max_depth:
                    return DECLINE
                elif last <= 12:
                    value = line[c.end(2) + 2:]
                    got = flats.get(value)
                    if got is None:
                        got = four(c.group(5, 6, 7, 8, 9, 10, 11, 12))
                        if got is None:
                            return DECLINE
                        if len(flats) < _CACHED_FLOWS:
                            flats[value] = got
                    here[key] = got.copy()
                    nodes += 2 + 2 * len(got)
                else:
                    got = four(c.group(13, 14, 15, 16, 17, 18, 19, 20))
                    if got is None:
                        return DECLINE
                    here[key] = [got]
                    nodes += 3 + 2 * len(got)
                continue
        place = True
        if c is not None and last <= 4:  # the same line, where the structure changes
            space, key_plain, unquoted, single = c.group(1, 2, 3, 4)
            key_single = key_double = double = pairs = items = maps = other = None
            m = None
        else:
            m = key_line(line)
            if m is None:
                d = dash(line)
                if d is None:
                    stripped = line.lstrip(" ")
                    if not stripped or stripped[0] == "#":
                        continue
                    if started or document_start(line) is None:
                        return DECLINE  # a scalar line, a continuation, a marker, a directive
                    started = True
                    continue
                started = True
                at = len(d.group(1))
                while at < indent:
                    if pending is not _NOTHING:
                        if is_map:
                            here[pending] = null
                        else:
                            here.append(null)
                        nodes += 1
                    indent, here, is_map, pending, flush = stack.pop()
                if at == indent and not is_map:
                    if pending is not _NOTHING:
                        here.append(null)
                        nodes += 1
                        pending = _NOTHING
                elif pending is _NOTHING or len(stack) >= max_depth:
                    return DECLINE
                else:  # a new sequence: the pending value, maybe at its key's indentation
                    new: Any = []
                    nodes += 1
                    if is_map:
                        here[pending] = new
                    else:
                        here.append(new)
                    stack.append((indent, here, is_map, _NOTHING, flush))
                    indent, here, is_map, pending, flush = (at, new, False, _NOTHING,
                                                            at == indent)
                # the item: its value, or a nested sequence or mapping opened on this line
                pos = d.end()
                while True:
                    if line.startswith("-", pos) and (len(line) == pos + 1
                                                      or line[pos + 1] == " "):
                        if len(stack) >= max_depth:
                            return DECLINE
                        new = []
                        nodes += 1
                        here.append(new)
                        stack.append((indent, here, False, _NOTHING, flush))
                        indent, here, is_map, pending, flush = pos, new, False, _NOTHING, False
                        d = dash(line, pos)
                        assert d is not None
                        pos = d.end()
                        continue
                    m = key_line(line, pos)
                    if m is not None:
                        if len(stack) >= max_depth:
                            return DECLINE
                        new = {}
                        nodes += 1
                        here.append(new)
                        stack.append((indent, here, False, _NOTHING, flush))
                        indent, here, is_map, pending, flush = pos, new, True, _NOTHING, False
                        break
                    v = value_match(line, pos)
                    if v is None:
                        return DECLINE
                    unquoted, single, double, pairs, items, maps, other = v.groups()
                    if unquoted is not None or single is not None or double is not None:
                        value = scalar(unquoted, single, double)
                        nodes += 1
                    elif pairs is None and items is None and maps is None and other is None:
                        pending = _PENDING_ITEM
                        break
                    else:
                        value, count = flow(pairs, items, maps, line, v.start(7), len(stack))
                        nodes += count
                    if value is DECLINE:
                        return DECLINE
                    here.append(value)
                    break
                if m is None:
                    continue
                place = False
            (space, key_plain, key_single, key_double, unquoted, single, double, pairs, items,
             maps, other) = m.groups()
        if place:  # a key line: find its mapping, close what it ends, open what it starts
            at = len(space)
            if not at and key_plain is not None and key_plain[:3] in ("---", "..."):
                return DECLINE  # a document marker, not a key
            if at != indent or not is_map or pending is not _NOTHING:
                while at < indent:
                    if pending is not _NOTHING:
                        if is_map:
                            here[pending] = null
                        else:
                            here.append(null)
                        nodes += 1
                    indent, here, is_map, pending, flush = stack.pop()
                if at == indent:
                    if not is_map:
                        if not flush:
                            return DECLINE  # a key among a sequence's items
                        if pending is not _NOTHING:
                            here.append(null)
                            nodes += 1
                        indent, here, is_map, pending, flush = stack.pop()
                    elif pending is not _NOTHING:
                        here[pending] = null
                        nodes += 1
                        pending = _NOTHING
                elif pending is _NOTHING or len(stack) >= max_depth:
                    return DECLINE  # a continuation line, or too deep
                else:  # a new mapping: the pending value
                    new = {}
                    nodes += 1
                    if is_map:
                        here[pending] = new
                    else:
                        here.append(new)
                    stack.append((indent, here, is_map, _NOTHING, flush))
                    indent, here, is_map, pending, flush = at, new, True, _NOTHING, False
                started = True
        # the key and its value into ``here``, a mapping
        if key_plain is not None:
            if key_plain[:1] in needs_of:
                key = key_of(key_plain)
                if key is DECLINE:
                    return DECLINE
            else:
                key = key_plain
        else:
            key = scalar(None, key_single, key_double)
            if key is DECLINE:
                return DECLINE
        if key in here:
            return DECLINE
        if m is not None and len(line) > longest and (
                line.index(":", max(m.end(2), m.end(3), m.end(4))) - m.end(1) > longest):
            return DECLINE  # libyaml's bound on a simple key, from its start to its ':'
        if unquoted is not None:
            here[key] = plain(unquoted) if unquoted[:1] in needs_of else unquoted
            nodes += 2
        elif single is not None:
            here[key] = single.replace("''", "'") if "''" in single else single
            nodes += 2
        elif pairs is not None:
            if len(stack) + 1 >= max_depth:
                return DECLINE
            got = flat(pairs)
            if got is None:
                return DECLINE
            here[key] = got
            nodes += 2 + 2 * len(got)
        elif maps is not None:
            if len(stack) + 2 >= max_depth:
                return DECLINE
            seq = maps_of(maps)
            if seq is None:
                return DECLINE
            here[key] = seq[0]
            nodes += 1 + seq[1]
        elif double is not None:
            value = _unescape(double)
            if value is None:
                return DECLINE
            here[key] = value
            nodes += 2
        elif items is None and other is None:
            pending = key
            nodes += 1
        else:
            assert m is not None
            value, count = flow(None, items, None, line, m.start(11), len(stack))
            if value is DECLINE:
                return DECLINE
            here[key] = value
            nodes += 1 + count
    while stack:
        if pending is not _NOTHING:
            if is_map:
                here[pending] = null
            else:
                here.append(null)
            nodes += 1
        indent, here, is_map, pending, flush = stack.pop()
    if nodes > max_nodes:
        return DECLINE
    return holder[0] if holder else None
