"""The config key types every config model uses, core's and every plugin's.

``StrictBool``, ``StrictInt``, ``StrictFloat`` and ``TlsVerify`` (what each takes and
refuses, with one wording: :data:`BOOL_EXPECTED` and its siblings), ``Timeouts`` (a
channel's own bounds on one request), and the readers of a config model's fields
(:func:`secret_fields`, :func:`timeouts_field`) and of an unknown key
(:func:`unknown_key`).

They are part of the seam vocabulary, beside :mod:`powerplane.channel` and
:mod:`powerplane.secrets`: the channel contract and the deployment config
(:mod:`powerplane.config`, which re-exports them) are built on them, and this module
imports nothing of powerplane but secret references. Plugins import them from
``powerplane``.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator
from pydantic_core import PydanticCustomError

from powerplane.secrets import SecretRef

__all__ = [
    "BOOL_EXPECTED",
    "FINITE_EXPECTED",
    "INT_EXPECTED",
    "MAX_TIMEOUT_S",
    "NUMBER_EXPECTED",
    "VERIFY_EXPECTED",
    "StrictBool",
    "StrictFloat",
    "StrictInt",
    "Timeouts",
    "TlsVerify",
    "not_finite",
    "secret_fields",
    "timeouts_field",
    "unknown_key",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


FINITE_EXPECTED = "Input should be a finite number"
"""What a number key says about NaN or infinity (pydantic's words with ``allow_inf_nan``)."""


def not_finite(value: Any) -> bool:
    """NaN or an infinity, also written as a string pydantic reads as one (``'inf'``)."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            value = float(value)
        except ValueError:
            return False
    return isinstance(value, float) and not math.isfinite(value)


BOOL_EXPECTED = "expected true or false"
"""What every boolean config key says about a value that is not ``true`` or ``false``."""


def _true_or_false(value: Any) -> Any:
    if value is True or value is False:
        return value
    raise PydanticCustomError("bool_type", BOOL_EXPECTED)


StrictBool = Annotated[bool, BeforeValidator(_true_or_false)]
"""A boolean config key: only YAML ``true`` or ``false`` (a Python ``bool``).

``yes``, ``on``, ``1``, ``'true'`` and every other spelling are refused with
:data:`BOOL_EXPECTED`, whatever the model's mode (pydantic's own ``bool`` reads them as
booleans). Every boolean field of a config model, core's and every plugin's, is typed
``StrictBool``::

    from powerplane import StrictBool

    class MyConfig(BaseModel):
        force: StrictBool = False
"""

INT_EXPECTED = "expected a whole number"
"""What every whole-number config key (:data:`StrictInt`) says about any other value."""
NUMBER_EXPECTED = "expected a number"
"""What every number config key (:data:`StrictFloat`) says about a value that is not one."""


def _whole_number(value: Any) -> Any:
    if type(value) is int:
        return value
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)  # ``3.0``: a whole number, as pydantic's own ``int`` reads it
    raise PydanticCustomError("int_type", INT_EXPECTED)


def _number(value: Any) -> Any:
    if type(value) is float:
        if not math.isfinite(value):
            raise PydanticCustomError("finite_number", FINITE_EXPECTED)
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:  # a YAML integer of hundreds of digits
            raise PydanticCustomError("finite_number", FINITE_EXPECTED) from None
    if isinstance(value, str) and not_finite(value):
        raise PydanticCustomError("finite_number", FINITE_EXPECTED)  # ``inf``, ``nan``
    raise PydanticCustomError("float_type", NUMBER_EXPECTED)


StrictInt = Annotated[int, BeforeValidator(_whole_number)]
"""A whole-number config key: a YAML integer (``3``, ``0x1F``; ``3.0`` reads as 3).

``true`` and ``false`` (which pydantic's own ``int`` reads as 1 and 0), a quoted ``'5'``,
``2.5`` and every other value are refused with :data:`INT_EXPECTED`, whatever the model's
mode. Bounds stay the field's own (``Field(4, ge=1)``). Every integer field of a config
model, core's and every plugin's, is typed ``StrictInt``::

    from powerplane import StrictInt

    class MyConfig(BaseModel):
        retries: StrictInt = Field(1, ge=0, le=10)
"""

StrictFloat = Annotated[float, BeforeValidator(_number)]
"""A number config key: a finite YAML float or integer (``2.5``, ``30``, ``1e3``).

``true`` and ``false`` (which pydantic's own ``float`` reads as 1.0 and 0.0), a quoted
``'5'`` and every other value that is not a number are refused with
:data:`NUMBER_EXPECTED`; NaN and infinity (``.nan``, ``.inf``, ``1e400``) with
:data:`FINITE_EXPECTED`. Unlike pydantic's ``StrictFloat``, an integer is accepted (as a
float). Every float field of a config model, core's and every plugin's, is typed
``StrictFloat``::

    from powerplane import StrictFloat

    class MyConfig(BaseModel):
        settle_s: StrictFloat = Field(5.0, ge=0, le=600)
"""

VERIFY_EXPECTED = "expected true, false or the path of a CA bundle file"
"""What every ``verify`` key (:data:`TlsVerify`) says about a value it cannot use."""

_LAX_VERIFY = frozenset({"", "yes", "no", "y", "n", "on", "off", "t", "f", "true", "false",
                         "1", "0", "none", "null", "~"})
"""Strings that mean a boolean (or nothing) to someone, never a CA bundle's file name."""


def _tls_verify(value: Any) -> bool | str:
    if value is True or value is False:
        return value
    if (not isinstance(value, str) or value.strip().lower() in _LAX_VERIFY
            or "\x00" in value or len(value) > 4096):
        raise PydanticCustomError("tls_verify", VERIFY_EXPECTED)
    path = Path(value).expanduser()
    try:
        is_file = path.is_file()
        exists = is_file or path.exists()
    except (OSError, ValueError):  # a name too long for the file system, say
        is_file = exists = False
    if not exists:
        where = "" if path.is_absolute() else " (a relative one is read from the working directory)"
        raise PydanticCustomError("tls_verify", f"{VERIFY_EXPECTED}: no file at that path{where}")
    if not is_file:
        raise PydanticCustomError("tls_verify", f"{VERIFY_EXPECTED}: that path is not a file")
    return str(path)


TlsVerify = Annotated[bool | str, PlainValidator(_tls_verify, json_schema_input_type=bool | str)]
"""A ``verify`` config key: ``true`` (the system's CAs), ``false`` (no verification) or the
path of a CA bundle file (``~`` expanded), which must exist when the file is loaded.

Anything else (``1``, ``yes``, ``'true'``, a list, a path with nothing there, a directory)
is one problem at the key, :data:`VERIFY_EXPECTED`. The value is ``True``, ``False`` or
the path as a ``str``::

    from powerplane import TlsVerify

    class MyConfig(BaseModel):
        verify: TlsVerify = True
"""


MAX_TIMEOUT_S = 86_400.0
"""The longest timeout a config may name: one day."""


class Timeouts(_Strict):
    """A channel's own bounds on one request, embedded by plugin configs as ``timeouts:``.

    ::

        class MyConfig(BaseModel):
            timeouts: Timeouts = Timeouts(connect_s=5, read_s=30)

    Each a finite number of seconds above 0 and at most 86,400 (NaN and infinity are
    refused). ``connect_s`` bounds opening the connection (TCP, TLS); ``read_s`` bounds
    waiting for each answer once a request was sent.
    """

    connect_s: StrictFloat = Field(5.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    """Seconds to open a connection to the device (TCP connect and TLS handshake)."""
    read_s: StrictFloat = Field(30.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    """Seconds to wait for an answer once a request was sent."""

    @property
    def total_s(self) -> float:
        """``connect_s + read_s``: the longest one request can take."""
        return self.connect_s + self.read_s


def _members(tp: Any) -> list[Any]:
    """The types an annotation can hold: ``X | None`` -> [X], ``Annotated[X, ...]`` -> [X]."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) if a is not type(None) for m in _members(a)]
    return [tp]


def _secret_paths(tp: Any, prefix: str, seen: frozenset[Any]) -> list[str]:
    out: list[str] = []
    for member in _members(tp):
        origin = typing.get_origin(member)
        args = typing.get_args(member)
        if member is SecretRef:
            out.append(prefix)
        elif isinstance(member, type) and issubclass(member, BaseModel):
            if member in seen:
                continue
            for name, field in member.model_fields.items():
                key = field.alias or name
                out += _secret_paths(field.annotation, f"{prefix}.{key}" if prefix else key,
                                     seen | {member})
        elif origin in (dict, Mapping, typing.Mapping) and len(args) == 2:
            out += _secret_paths(args[1], f"{prefix}.*" if prefix else "*", seen)
        elif origin in (list, tuple, set, frozenset) and args:
            for arg in args:
                if arg is not Ellipsis:
                    out += _secret_paths(arg, f"{prefix}.*" if prefix else "*", seen)
    return out


def secret_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """Dotted paths of every field of ``model`` typed :class:`~powerplane.secrets.SecretRef`.

    Found by type, through nested models, unions, mappings and lists (``*`` stands for any
    key or item): ``password``, ``auth.secret``, ``feeds.*.community``. Sorted, no repeats.
    """
    return tuple(sorted(set(_secret_paths(model, "", frozenset()))))


def timeouts_field(model: type[BaseModel]) -> str | None:
    """The top-level field of ``model`` typed :class:`Timeouts` (by its key), or ``None``."""
    for name, field in model.model_fields.items():
        if any(m is Timeouts for m in _members(field.annotation)):
            return field.alias or name
    return None


def unknown_key(key: str, known: list[str]) -> str:
    """``unknown key`` with a "did you mean" (difflib), else the keys that are accepted."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    if known:
        return f"unknown key; accepted keys: {', '.join(sorted(known))}"
    return "unknown key"
