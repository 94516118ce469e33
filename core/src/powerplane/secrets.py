"""Secret references: ``{KIND: VALUE}``, resolved at use, never shown.

A config never holds a secret value, only where to find it: ``{env: NAME}`` (an environment
variable), ``{file: PATH}`` (a file's content, surrounding whitespace stripped), or a kind a
plugin registers through the hook ``register_secret_kinds`` (``{k8s: NS/NAME/KEY}`` comes
from powerplane-kubernetes). Core's ``env`` and ``file`` are registered through the same
hook (:mod:`powerplane.builtins`).

A :class:`SecretKind` has a ``resolve(value) -> str``, called only in
:meth:`SecretRef.reveal` (at use, never at load), an optional ``check(value)`` run at load
on the reference's shape alone (it reads no secret, no environment, no file, no network),
and an optional ``present(value)`` run when the channel that holds the reference opens
(:func:`secret_problems`: an unset variable or a missing file is then a config error
naming the field), so a command pays only for the secrets of the channels it touches;
``powerplane check`` resolves every reference of the file. An unknown kind is a config
error at load. ``repr``, ``str`` and the dumped form name the reference, never the value;
an error while resolving names the reference and the error's class only.

Which kinds exist is the registry's to say, and the registry is passed in: a validation
given a :class:`SecretKindSource` (a :class:`~powerplane.plugins.Registry`) in its context
under :data:`SECRET_KINDS` (``model_validate(data, context={SECRET_KINDS: registry})``, as
:func:`~powerplane.config.parse_config` validates every channel and port config) looks
kinds up there and nowhere else, beside core's own. A reference validated without one
(built by hand, outside a config load) knows core's kinds only (``env``, ``file``): a
plugin's kind is then refused, saying to validate it within a deployment or with the
registry in the context. This module asks no process-wide registry: it imports nothing
from a layer above its own. A validated reference keeps the kind it was validated with,
and :meth:`SecretRef.reveal` resolves through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationInfo,
    model_serializer,
    model_validator,
)

from powerplane.errors import PowerplaneError, SecretError

__all__ = ["CORE_KINDS", "NO_REGISTRY", "SECRET_KINDS", "SecretKind", "SecretKindSource",
           "SecretRef", "secret_kinds", "secret_problems", "secret_refs"]

SECRET_KINDS = "powerplane.secret_kinds"
"""Key of the pydantic validation context holding the :class:`SecretKindSource` (the
registry) a :class:`SecretRef` validates its kind against."""


@dataclass(frozen=True)
class SecretKind:
    """A kind of secret reference: ``{name: value}`` in a config.

    ``resolve(value)`` returns the secret; it runs at use only, and raises
    :class:`~powerplane.errors.SecretError` naming the reference (never a value) when it
    cannot (bad input), or another ``PowerplaneError`` of its choice, passed on as it is,
    when the failure may pass (e.g. the lifecycle's ``TemporaryPortError`` for a store
    that answered 503). ``check(value)``, optional, runs at load and raises
    ``ValueError`` with a plain message when the reference cannot be right by its shape
    (it must read no secret and not reach the network: a channel no command touches must
    never fail the load).
    ``present(value)``, optional, runs when the channel holding the reference opens and
    raises ``ValueError`` when the secret is not there to be read (an unset variable, a
    missing file), without reading it.
    """

    name: str
    """The key in the reference (``env``, ``file``, ``k8s``)."""
    resolve: Callable[[str], str]
    """Reads the secret now."""
    check: Callable[[str], None] | None = None
    """Validates the reference at load, without reading the secret from the network."""
    description: str = ""
    """What the value names, for people (``NAMESPACE/NAME/KEY``)."""
    present: Callable[[str], None] | None = None
    """Whether the secret is there to be read, when the channel that holds it opens."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a secret kind needs a non-empty name")
        if not callable(self.resolve):
            raise TypeError(f"secret kind {self.name!r}: resolve must be callable")


def _check_env(value: str) -> None:
    if not value or "=" in value or "\0" in value:
        raise ValueError(f"{value!r} is not an environment variable name")


def _present_env(value: str) -> None:
    if value not in os.environ:
        raise ValueError(f"environment variable {value!r} is not set")


def _resolve_env(value: str) -> str:
    found = os.environ.get(value)
    if found is None:
        raise SecretError(f"secret {{env: {value}}}: environment variable is not set")
    return found


def _check_file(value: str) -> None:
    if not value or "\0" in value:
        raise ValueError(f"{value!r} is not a file path")


def _present_file(value: str) -> None:
    if not Path(value).expanduser().is_file():
        raise ValueError(f"secret file {value!r} does not exist")


def _resolve_file(value: str) -> str:
    try:
        return Path(value).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecretError(f"secret {{file: {value}}}: cannot read file ({exc.strerror})") \
            from None


CORE_KINDS: Mapping[str, SecretKind] = {
    "env": SecretKind("env", _resolve_env, _check_env, "an environment variable's name",
                      present=_present_env),
    "file": SecretKind("file", _resolve_file, _check_file, "a file's path",
                       present=_present_file),
}
"""Core's kinds, registered through ``register_secret_kinds`` like any plugin's."""


class SecretKindSource(Protocol):
    """Where secret kinds are looked up: a :class:`~powerplane.plugins.Registry`."""

    @property
    def secret_kinds(self) -> Mapping[str, SecretKind]:
        """Kind name -> kind (looked up by name: only the plugin declaring it loads)."""
        ...

    def missing_hint(self, kind: str, name: str) -> str:
        """``; ...`` saying why ``name`` of hook ``kind`` (``secret``) may be missing
        (which distribution provides it, what ``POWERPLANE_LOAD_PLUGINS`` left out), or
        ``""``."""
        ...


def _source_of(context: Any) -> SecretKindSource | None:
    """The source a validation was given in its context (None: none was)."""
    if not isinstance(context, Mapping):
        return None
    found: SecretKindSource | None = context.get(SECRET_KINDS)
    return found


def secret_kinds(source: SecretKindSource | None = None) -> Mapping[str, SecretKind]:
    """Every kind a config may use: core's, then those of ``source`` (none: core's only)."""
    if source is None:
        return dict(CORE_KINDS)
    return {**CORE_KINDS, **source.secret_kinds}


def _kind(name: str, source: SecretKindSource | None = None) -> SecretKind | None:
    """The kind named ``name``: core's, else looked up by name in ``source`` (so only the
    plugin declaring it loads); None when neither has it."""
    found = CORE_KINDS.get(name)
    if found is not None or source is None:
        return found
    return source.secret_kinds.get(name)


NO_REGISTRY = ("validated with no registry, a reference knows core's kinds only; validate "
               "it within a deployment (parse_config), or with the registry in the "
               "validation context: model_validate(data, context={"
               "powerplane.secrets.SECRET_KINDS: registry})")
"""What a reference of a kind core does not have says when it was validated without a
registry (:data:`SECRET_KINDS`)."""


class SecretRef(BaseModel):
    """Where a secret lives: ``{KIND: VALUE}`` with exactly one registered kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    """The reference's kind (``env``, ``file``, or a plugin's)."""
    ref: str
    """What the kind resolves: a variable name, a path, ``NAMESPACE/NAME/KEY``."""
    _resolver: SecretKind | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        if isinstance(data, SecretRef):
            return data
        if not isinstance(data, Mapping):
            raise ValueError(
                "expected a secret reference {env: NAME} or {file: PATH}; "
                "inline secret values are not accepted"
            )
        if set(data) == {"kind", "ref"}:  # the fields themselves
            return dict(data)
        given = [(str(k), v) for k, v in data.items() if v is not None]
        if len(given) != 1:
            names = ", ".join(sorted(str(k) for k, _ in given)) or "none"
            raise ValueError(f"expected exactly one secret reference kind ({names} given)")
        name, value = given[0]
        if not isinstance(value, str):
            raise ValueError(f"secret reference {name}: expected a string")
        return {"kind": name, "ref": value}

    @model_validator(mode="after")
    def _known(self, info: ValidationInfo) -> SecretRef:
        source = _source_of(info.context)
        if source is None and self._resolver is not None:
            return self  # validated already, with its kind (a model holding it, validated)
        kind = _kind(self.kind, source)
        if kind is None:
            known = ", ".join(sorted(secret_kinds(source)))
            msg = f"unknown secret reference kind {self.kind!r}; known kinds: {known}"
            if source is None:
                raise ValueError(f"{msg} ({NO_REGISTRY})")
            raise ValueError(msg + source.missing_hint("secret", self.kind))
        if kind.check is not None:
            kind.check(self.ref)
        self._resolver = kind
        return self

    @model_serializer(mode="plain")
    def _dumped(self) -> dict[str, str]:
        return {self.kind: self.ref}

    @property
    def env(self) -> str | None:
        """The variable name of an ``{env: NAME}`` reference."""
        return self.ref if self.kind == "env" else None

    @property
    def file(self) -> str | None:
        """The path of a ``{file: PATH}`` reference."""
        return self.ref if self.kind == "file" else None

    def reveal(self) -> str:
        """Read the secret now, through the kind it was validated with. Raises
        :class:`SecretError` naming the reference, never a value."""
        kind = self._resolver or _kind(self.kind)
        if kind is None:
            raise SecretError(f"secret {self}: no secret kind {self.kind!r} is registered")
        try:
            return kind.resolve(self.ref)
        except PowerplaneError:  # raised on purpose, naming the reference (SecretError: bad
            raise                # input; another class: e.g. its store failed for now)
        except Exception as exc:  # its message may quote what was read: name the class only
            raise SecretError(f"secret {self}: {type(exc).__name__} while resolving") from None

    def __str__(self) -> str:
        return f"{{{self.kind}: {self.ref}}}"

    def __repr__(self) -> str:
        return f"SecretRef({self})"


def secret_refs(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[
        tuple[tuple[str | int, ...], SecretRef]]:
    """Every :class:`SecretRef` held by ``value`` (a validated config: models, mappings,
    lists), with its path under ``path`` (a field by its key, an item by its index)."""
    if isinstance(value, SecretRef):
        yield path, value
    elif isinstance(value, BaseModel):
        fields = type(value).model_fields
        for name, field in fields.items():
            yield from secret_refs(getattr(value, name, None), (*path, field.alias or name))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from secret_refs(item, (*path, str(key)))
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(value):
            yield from secret_refs(item, (*path, i))


def secret_problems(
    config: Any, path: tuple[str | int, ...], *, resolve: bool = False
) -> list[tuple[tuple[str | int, ...], str]]:
    """``(path, message)`` for each secret of ``config`` that is not there to be read: each
    kind's ``present`` check (run when the channel holding them opens), and with
    ``resolve`` each one read now, its value dropped at once (``powerplane check``). The
    messages name references, never values."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    for where, ref in secret_refs(config, path):
        kind = ref._resolver or _kind(ref.kind)
        try:
            if kind is not None and kind.present is not None:
                kind.present(ref.ref)
            if resolve:
                ref.reveal()
        except SecretError as exc:
            out.append((where, "; ".join(p.message for p in exc.problems)))
        except ValueError as exc:
            out.append((where, str(exc)))
        except Exception as exc:  # a plugin's check: its message may quote what it read
            out.append((where, f"secret {ref}: {type(exc).__name__} while checking"))
    return out
