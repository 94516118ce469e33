"""CEL for the admission policies: cel-python's parser, value types and functions, each
expression compiled once into Python closures.

cel-python (``celpy``) parses an expression (its Lark grammar of the CEL spec) and its
interpreter walks the parse tree on every evaluation: about 40 ms for the ten validations
of ``operator manifests``' policy, per request, which would make the server's admission
cost more than everything else it does. :func:`compile_cel` walks the tree once and builds
closures that call cel-python's own operators and functions (``celpy.evaluation
.base_functions``, ``celpy.celtypes``), with the CEL spec's semantics where cel-python's
interpreter differs from cel-go, the evaluator Kubernetes runs: ``&&``, ``||`` and ``?:``
short-circuit left to right (an error on one side is absorbed when the other decides, as
the spec's commutative logic says); ``has(e.f)`` is an error when ``e`` is; a field that
holds null reads as absent (``k8s.io/apiserver/pkg/cel/common/values.go``).
``tests/test_admission_cel.py`` evaluates every generated expression both ways, here and by
cel-python's interpreter, and compares.

What cel-python has not, Kubernetes' CEL libraries: the strings extension (``join``,
``split``, ``lowerAscii``, ``upperAscii``, ``trim``, ``replace``, ``indexOf``,
``lastIndexOf``, ``substring``, ``charAt``), ``dyn`` and the ``authorizer`` (given by the
caller, :data:`Functions`); and ``string(bool)`` is ``true``/``false``, as cel-go writes
it (cel-python's is ``True``). An expression that does not parse, names a function neither
has, builds a message (``Foo{...}``) or reads a variable the caller does not provide is
refused when it is compiled (:class:`CelUnsupported`), never evaluated to a silent pass.
Evaluation errors are values (``CELEvalError``), as in cel-python; no cost limit is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions, celbytes, celstr

__all__ = [
    "EXTENSIONS",
    "CelUnsupported",
    "Functions",
    "Program",
    "compile_cel",
    "error_text",
    "to_cel",
]

_RAW = frozenset({dict, list, str, int, float, bool})
Fn = Callable[[dict[str, Any]], Any]
"""A compiled expression: the variables (name -> value) to its value."""
Functions = Mapping[str, Callable[..., Any]]
"""Extension functions by name: a method ``x.f(a)`` is ``f(x, a)``."""


class CelUnsupported(ValueError):
    """An expression this server cannot evaluate as Kubernetes would: refused at compile."""


def to_cel(value: Any) -> Any:
    """A JSON value as cel-python's types, a null field of an object absent."""
    kind = type(value)
    if kind is dict:
        return celtypes.MapType({celtypes.StringType(k): to_cel(v)
                                 for k, v in value.items() if v is not None})
    if kind is list:
        return celtypes.ListType([to_cel(v) for v in value])
    if kind is str:
        return celtypes.StringType(value)
    if kind is bool:
        return celtypes.BoolType(value)
    if kind is int:
        return celtypes.IntType(value)
    if kind is float:
        return celtypes.DoubleType(value)
    return value


def error_text(value: Any) -> str:
    """An evaluation error in words."""
    if isinstance(value, CELEvalError):
        return "; ".join(str(a) for a in value.args if not isinstance(a, type)) or repr(value)
    return repr(value)


def _err(text: str, exc: BaseException | None = None) -> CELEvalError:
    out = CELEvalError(text, type(exc) if exc is not None else None,
                       exc.args if exc is not None else None)
    if exc is not None:
        out.__cause__ = exc
    return out


def _c(value: Any) -> Any:
    """A value as cel-python's types (a JSON value read from a variable is converted only
    where an operator or a function takes it)."""
    return to_cel(value) if type(value) in _RAW else value


def _call(fn: Callable[..., Any], name: str, args: list[Any]) -> Any:
    """``fn(*args)`` as cel-python's function evaluation: an error argument is the result;
    a Python error is a CEL one."""
    for arg in args:
        if isinstance(arg, CELEvalError):
            return arg
    try:
        return fn(*[_c(a) for a in args])
    except (ValueError, OverflowError) as exc:
        return _err(f"{name}: return error for overflow", exc)
    except ZeroDivisionError as exc:
        return _err(f"{name}: divide by zero", exc)
    except KeyError as exc:
        return _err(f"{name}: no such key {exc.args[0]!r}" if exc.args else "no such key",
                    exc)
    except IndexError as exc:
        return _err(f"{name}: invalid_argument", exc)
    except (TypeError, AttributeError) as exc:
        return _err(f"{name}: no such overload", exc)


def _select(target: Any, name: str) -> Any:
    """``target.name``: a map's key (a null one absent), or an extension object's field."""
    if type(target) is dict:  # a JSON object (the common case): a null field is absent
        found = target.get(name)
        return _err(f"no such key: {name!r}") if found is None else found
    if isinstance(target, CELEvalError):
        return target
    if isinstance(target, dict):
        return target[name] if name in target else _err(f"no such key: {name!r}")
    select = getattr(target, "cel_select", None)
    if select is not None:
        try:
            return select(name)
        except KeyError:
            return _err(f"no such field: {name!r}")
    return _err(f"type {type(target).__name__} does not support field selection ({name})")


def _has(target: Any, name: str) -> Any:
    if type(target) is dict:  # a JSON object: a null field is absent
        return _TRUE if target.get(name) is not None else _FALSE
    if isinstance(target, CELEvalError):
        return target
    if isinstance(target, dict):
        return _TRUE if name in target and target[name] is not None else _FALSE
    return _err(f"has(): type {type(target).__name__} has no fields ({name})")


# -- Kubernetes' strings extension (cel-go ext/strings.go), where cel-python has none -------
def _join(items: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise TypeError("join() takes a list of strings")
    return celtypes.StringType(str(sep).join(items))


def _split(text: Any, sep: Any, limit: Any = -1) -> celtypes.ListType:
    if not isinstance(text, str):
        raise TypeError("split() of a string")
    parts = text.split(sep) if int(limit) < 0 else text.split(sep, max(int(limit) - 1, 0))
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _string_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(text: Any, *args: Any) -> Any:
        if not isinstance(text, str):
            raise TypeError("a string function of a non-string")
        return fn(str(text), *args)
    return run


def _string(value: Any) -> celtypes.StringType:
    """``string(x)``: a bool as cel-go writes it (``true``; cel-python's is ``True``)."""
    if isinstance(value, celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    return celtypes.StringType(value)


EXTENSIONS: dict[str, Callable[..., Any]] = {
    "string": _string,
    "join": _join,
    "split": _split,
    "lowerAscii": _string_fn(lambda s: celtypes.StringType(s.lower())),
    "upperAscii": _string_fn(lambda s: celtypes.StringType(s.upper())),
    "trim": _string_fn(lambda s: celtypes.StringType(s.strip())),
    "replace": _string_fn(lambda s, a, b, n=-1: celtypes.StringType(s.replace(a, b, int(n)))),
    "indexOf": _string_fn(lambda s, sub, start=0: celtypes.IntType(s.find(sub, int(start)))),
    "lastIndexOf": _string_fn(lambda s, sub: celtypes.IntType(s.rfind(sub))),
    "substring": _string_fn(lambda s, a, b=None: celtypes.StringType(
        s[int(a):] if b is None else s[int(a):int(b)])),
    "charAt": _string_fn(lambda s, i: celtypes.StringType(s[int(i):int(i) + 1])),
    "dyn": lambda x: x,
}
"""Kubernetes' CEL functions that cel-python lacks."""

_TRUE, _FALSE = celtypes.BoolType(True), celtypes.BoolType(False)
_PLAIN = frozenset({celtypes.StringType, celtypes.IntType, celtypes.BoolType,
                    celtypes.UintType, celtypes.DoubleType, str, int, bool, float})
"""The types whose equality is Python's (a list or a map compares its members by CEL's)."""
_RELATIONS = {"relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_",
              "relation_ge": "_>=_", "relation_eq": "_==_", "relation_ne": "_!=_",
              "relation_in": "_in_"}
_ARITHMETIC = {"addition_add": "_+_", "addition_sub": "_-_", "multiplication_mul": "_*_",
               "multiplication_div": "_/_", "multiplication_mod": "_%_"}
_MACROS = {"all", "exists", "exists_one", "map", "filter"}
_PARSERS: dict[str, celpy.Environment] = {}


@dataclass
class Program:
    """A compiled expression."""

    text: str
    fn: Fn
    names: frozenset[str] = field(default_factory=frozenset)
    """The variables it reads."""

    def evaluate(self, variables: dict[str, Any]) -> Any:
        """Its value: a cel-python value, or a ``CELEvalError``."""
        try:
            return _c(self.fn(variables))
        except RecursionError as exc:
            return _err("expression too deep", exc)


class _Compiler:
    """A parse tree to closures (see the module docstring)."""

    def __init__(self, functions: Functions, names: Collection[str]) -> None:
        self.functions: dict[str, Callable[..., Any]] = {
            **base_functions, **EXTENSIONS, **functions}
        self.names = set(names)
        self.read: set[str] = set()

    def node(self, tree: Any) -> Fn:
        if not isinstance(tree, lark.Tree):
            raise CelUnsupported(f"unexpected token {tree!r}")
        method = getattr(self, f"c_{tree.data}", None)
        if method is None:
            raise CelUnsupported(f"'{tree.data}' is not supported")
        compiled: Fn = method(tree.children)
        return compiled

    def c_expr(self, kids: list[Any]) -> Fn:
        if len(kids) == 1:
            return self.node(kids[0])
        cond, yes, no = (self.node(k) for k in kids)

        def ternary(env: dict[str, Any]) -> Any:
            c = _c(cond(env))
            if isinstance(c, CELEvalError):
                return c
            if not isinstance(c, celtypes.BoolType):
                return _err("?: of a non-bool condition")
            return yes(env) if c else no(env)
        return ternary

    def c_conditionalor(self, kids: list[Any]) -> Fn:
        return self._logic(kids, decides=True)

    def c_conditionaland(self, kids: list[Any]) -> Fn:
        return self._logic(kids, decides=False)

    def _logic(self, kids: list[Any], *, decides: bool) -> Fn:
        if len(kids) == 1:
            return self.node(kids[0])
        left, right = self.node(kids[0]), self.node(kids[1])
        name = "||" if decides else "&&"

        def logic(env: dict[str, Any]) -> Any:
            a = _c(left(env))
            if isinstance(a, celtypes.BoolType) and bool(a) is decides:
                return a
            b = _c(right(env))
            if isinstance(b, celtypes.BoolType) and bool(b) is decides:
                return b
            if isinstance(a, CELEvalError):
                return a
            if isinstance(b, CELEvalError):
                return b
            if isinstance(a, celtypes.BoolType) and isinstance(b, celtypes.BoolType):
                return _FALSE if decides else _TRUE
            return _err(f"{name} of a non-bool")
        return logic

    def c_relation(self, kids: list[Any]) -> Fn:
        return self._binary(kids, _RELATIONS)

    def c_addition(self, kids: list[Any]) -> Fn:
        return self._binary(kids, _ARITHMETIC)

    def c_multiplication(self, kids: list[Any]) -> Fn:
        return self._binary(kids, _ARITHMETIC)

    def _binary(self, kids: list[Any], table: Mapping[str, str]) -> Fn:
        if len(kids) == 1:
            return self.node(kids[0])
        op_tree, right_tree = kids
        name = table[op_tree.data]
        fn = self.functions[name]
        left, right = self.node(op_tree.children[0]), self.node(right_tree)
        if name in ("_==_", "_!=_"):
            negate = name == "_!=_"

            def equal(env: dict[str, Any]) -> Any:
                a, b = left(env), right(env)
                if type(a) is type(b) and type(a) in _PLAIN:  # the same plain type: no cast
                    return _TRUE if (a == b) is not negate else _FALSE
                return _call(fn, name, [a, b])
            return equal
        return lambda env: _call(fn, name, [left(env), right(env)])

    def c_unary(self, kids: list[Any]) -> Fn:
        if len(kids) == 1:
            return self.node(kids[0])
        name = "!_" if kids[0].data == "unary_not" else "-_"
        fn, inner = self.functions[name], self.node(kids[1])
        return lambda env: _call(fn, name, [inner(env)])

    def c_member(self, kids: list[Any]) -> Fn:
        return self.node(kids[0])

    def c_primary(self, kids: list[Any]) -> Fn:
        return self.node(kids[0])

    def c_paren_expr(self, kids: list[Any]) -> Fn:
        return self.node(kids[0])

    def c_member_dot(self, kids: list[Any]) -> Fn:
        target, name = self.node(kids[0]), str(kids[1].value)
        return lambda env: _select(target(env), name)

    def c_member_index(self, kids: list[Any]) -> Fn:
        fn = self.functions["_[_]"]
        target, index = self.node(kids[0]), self.node(kids[1])
        return lambda env: _call(fn, "_[_]", [target(env), index(env)])

    def c_ident(self, kids: list[Any]) -> Fn:
        name = str(kids[0].value)
        if name not in self.names:
            raise CelUnsupported(f"undeclared reference to '{name}'")
        self.read.add(name)

        return lambda env: env[name]

    def c_literal(self, kids: list[Any]) -> Fn:
        token = kids[0]
        kind, text = token.type, token.value
        value: Any
        if kind == "FLOAT_LIT":
            value = celtypes.DoubleType(text)
        elif kind == "INT_LIT":
            value = celtypes.IntType(int(text, 0) if "x" in text.lower() else int(text))
        elif kind == "UINT_LIT":
            value = celtypes.UintType(text[:-1])
        elif kind in ("MLSTRING_LIT", "STRING_LIT"):
            value = celstr(token)
        elif kind == "BYTES_LIT":
            value = celbytes(token)
        elif kind == "BOOL_LIT":
            value = celtypes.BoolType(text == "true")
        elif kind == "NULL_LIT":
            value = None
        else:
            raise CelUnsupported(f"literal {text!r}")
        return lambda env: value

    def _list(self, tree: Any) -> list[Fn]:
        return [] if tree is None else [self.node(k) for k in tree.children]

    def c_list_lit(self, kids: list[Any]) -> Fn:
        items = self._list(kids[0] if kids else None)

        def make(env: dict[str, Any]) -> Any:
            values = [_c(f(env)) for f in items]
            bad = next((v for v in values if isinstance(v, CELEvalError)), None)
            return bad if bad is not None else celtypes.ListType(values)
        return make

    def c_map_lit(self, kids: list[Any]) -> Fn:
        flat = self._list(kids[0] if kids else None)
        pairs = list(zip(flat[::2], flat[1::2], strict=True))

        def make(env: dict[str, Any]) -> Any:
            out = celtypes.MapType()
            for k, v in pairs:
                key, value = _c(k(env)), _c(v(env))
                for part in (key, value):
                    if isinstance(part, CELEvalError):
                        return part
                if key in out:
                    return _err(f"duplicate map key {key!r}")
                out[key] = value
            return out
        return make

    def c_ident_arg(self, kids: list[Any]) -> Fn:
        name = str(kids[0].value)
        args = kids[1].children if len(kids) > 1 and kids[1] is not None else []
        if name == "has":
            return self._has(args)
        return self._function(name, None, [self.node(a) for a in args])

    def c_member_dot_arg(self, kids: list[Any]) -> Fn:
        name = str(kids[1].value)
        args = kids[2].children if len(kids) > 2 and kids[2] is not None else []
        if name in _MACROS:
            return self._macro(name, self.node(kids[0]), args)
        return self._function(name, self.node(kids[0]), [self.node(a) for a in args])

    def _has(self, args: list[Any]) -> Fn:
        inner = args[0] if len(args) == 1 else None
        while isinstance(inner, lark.Tree) and inner.data != "member_dot" \
                and len(inner.children) == 1:
            inner = inner.children[0]
        if not isinstance(inner, lark.Tree) or inner.data != "member_dot":
            raise CelUnsupported("has() takes a field selection (has(e.f))")
        target, name = self.node(inner.children[0]), _token(inner.children[1])
        return lambda env: _has(target(env), name)

    def _function(self, name: str, target: Fn | None, args: list[Fn]) -> Fn:
        fn = self.functions.get(name)
        if fn is None:
            raise CelUnsupported(f"undeclared reference to function '{name}'")
        if target is None:
            return lambda env: _call(fn, name, [a(env) for a in args])
        return lambda env: _call(fn, name, [target(env), *(a(env) for a in args)])

    def _macro(self, name: str, target: Fn, args: list[Any]) -> Fn:
        if len(args) not in ((2, 3) if name == "map" else (2,)):
            raise CelUnsupported(f"{name}() takes a variable and an expression")
        var = self._variable(args[0])
        self.names.add(var)
        body = [self.node(a) for a in args[1:]]
        run = _MACRO_RUNNERS[name if len(body) == 1 else "map3"]

        def macro(env: dict[str, Any]) -> Any:
            items = target(env)
            if isinstance(items, CELEvalError):
                return items
            if not isinstance(items, (list, dict)):
                return _err(f"{name}() of a {type(items).__name__}")
            return run(items, var, body, env)
        return macro

    @staticmethod
    def _variable(tree: Any) -> str:
        inner = tree
        while isinstance(inner, lark.Tree) and inner.data != "ident" \
                and len(inner.children) == 1:
            inner = inner.children[0]
        if not isinstance(inner, lark.Tree) or inner.data != "ident":
            raise CelUnsupported("a macro's first argument is a variable name")
        return _token(inner.children[0])


def _token(node: Any) -> str:
    if not isinstance(node, lark.Token):
        raise CelUnsupported(f"expected a name, found {node!r}")
    return str(node.value)


def _each(items: Iterable[Any], var: str, fn: Fn, env: dict[str, Any]) -> Iterable[Any]:
    scope = dict(env)
    for item in items:
        scope[var] = item
        yield _c(fn(scope))


def _all(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    error = None
    for value in _each(items, var, body[0], env):
        if isinstance(value, celtypes.BoolType):
            if not value:
                return value
        else:
            error = error or (value if isinstance(value, CELEvalError) else
                              _err("all() of a non-bool"))
    return error if error is not None else celtypes.BoolType(True)


def _exists(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    error = None
    for value in _each(items, var, body[0], env):
        if isinstance(value, celtypes.BoolType):
            if value:
                return value
        else:
            error = error or (value if isinstance(value, CELEvalError) else
                              _err("exists() of a non-bool"))
    return error if error is not None else celtypes.BoolType(False)


def _exists_one(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    count = 0
    for value in _each(items, var, body[0], env):
        if not isinstance(value, celtypes.BoolType):
            return value if isinstance(value, CELEvalError) else _err("exists_one() of a "
                                                                       "non-bool")
        count += bool(value)
    return celtypes.BoolType(count == 1)


def _filter(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    out = []
    for item, keep in zip(items, _each(items, var, body[0], env), strict=True):
        if not isinstance(keep, celtypes.BoolType):
            return keep if isinstance(keep, CELEvalError) else _err("filter() of a non-bool")
        if keep:
            out.append(_c(item))
    return celtypes.ListType(out)


def _map(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    out = list(_each(items, var, body[0], env))
    bad = next((v for v in out if isinstance(v, CELEvalError)), None)
    return bad if bad is not None else celtypes.ListType(out)


def _map3(items: Any, var: str, body: list[Fn], env: dict[str, Any]) -> Any:
    kept = _filter(items, var, body[:1], env)
    return kept if isinstance(kept, CELEvalError) else _map(kept, var, body[1:], env)


_MACRO_RUNNERS: dict[str, Callable[[Any, str, list[Fn], dict[str, Any]], Any]] = {
    "all": _all, "exists": _exists, "exists_one": _exists_one, "filter": _filter,
    "map": _map, "map3": _map3}


def _parse(text: str) -> Any:
    env = _PARSERS.get("parser")
    if env is None:
        env = _PARSERS["parser"] = celpy.Environment()
    try:
        return env.compile(text)
    except Exception as exc:  # cel-python's CELParseError, or the grammar's own
        raise CelUnsupported(f"compilation failed: {exc}") from exc


def compile_cel(text: str, names: Collection[str],
                functions: Functions | None = None) -> Program:
    """``text`` parsed by cel-python and compiled (see the module docstring), reading only
    the variables ``names``; :class:`CelUnsupported` for what cannot be evaluated."""
    compiler = _Compiler(functions or {}, names)
    fn = compiler.node(_parse(text))
    return Program(text, fn, frozenset(compiler.read))
