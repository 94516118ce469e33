"""The ``conformance.negative.<channel>`` hints, and the configs the network negatives
shape from a channel's config with them (or, without them, from the channel type's
declarations: its address, its secret fields, its ``Timeouts`` field).

This is the loading layer's part of the negatives: :func:`hint_problems` builds every
config a hint shapes (the closed-port and silent-server config, the wrong-secret config,
the unknown target) and validates it against the channel type's own model when the target
is loaded (:func:`powerplane_conformance.settings.load_target`), so that a mistake in the
target file is a :class:`~powerplane.errors.ConfigError` (exit 2) at
``conformance.negative.<channel>.<hint>``, before any check runs; the checks
(:mod:`powerplane_conformance.negatives`) shape their configs with the same functions.
"""

from __future__ import annotations

import copy
import os
import secrets as pysecrets
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from powerplane import Address, ChannelType, Deployment, StrictFloat
from powerplane.plugins import Registry
from powerplane.secrets import SECRET_KINDS
from powerplane_conformance.model import describe_error

__all__ = [
    "BOGUS_KEY",
    "HOST",
    "LOAD_PORT",
    "NegativeHints",
    "Transport",
    "hint_problems",
    "hinted_address",
    "raw_channel_config",
    "set_path",
    "short_timeouts",
    "wrong_secret",
]

HOST = "127.0.0.1"
"""Where the suite's fakes listen."""
BOGUS_KEY = "powerplane_conformance_bogus"
LOAD_PORT = 49152
"""The port written into a derived config validated at load (the fakes' ports are only
known when a check runs; a port never decides whether a config is valid)."""
Transport = Literal["tcp", "udp"]


class NegativeHints(BaseModel):
    """Overrides for how the suite builds the negative cases from one channel's config.

    Without them the suite reads the channel type's declarations (``address=``, the
    ``SecretRef`` fields, the ``Timeouts`` field); each key given here wins over them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address_key: str | None = None
    """The channel config key that holds the device address (``endpoint``, ``host``)."""
    address_format: str = "{host}:{port}"
    """How to write a loopback address into ``address_key`` (``https://{host}:{port}``)."""
    port_key: str | None = None
    """Where the port goes when the channel keeps it in a key of its own."""
    secret_key: str | None = None
    """The channel config key that holds its secret (a ``{env:}``/``{file:}`` reference)."""
    timeout_key: str | list[str] | None = None
    """The channel config key(s) that bound one call (seconds); set low for the negative cases."""
    timeout_s: StrictFloat = Field(1.0, gt=0, le=86_400, allow_inf_nan=False)
    """The value written into ``timeout_key`` (or the ``Timeouts`` field's ``connect_s`` and
    ``read_s``) for the negative cases: the fakes never answer, so a short bound proves the
    same as a long one; a channel that retries waits ``(retries + 1) x read_s``."""
    unknown_target: Any = None
    """A target the device does not have (default: the first target with a suffix, if a string)."""
    transport: Literal["tcp", "udp"] | None = None
    """How the device is reached, for the closed-port and silent-server fakes (default: TCP
    for an HTTP(S) URL address, else what the channel type's address declares)."""


def set_path(raw: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """The top-level overrides that set the dotted ``path`` of config ``raw`` to ``value``.

    ``*`` matches every key of a mapping or item of a list present in ``raw``; a path
    whose parents are absent from ``raw`` yields no override (that secret is not
    configured).
    """
    head, _, rest = path.partition(".")
    if not rest:
        if head == "*":
            return {k: value for k in raw}
        return {head: value} if head in raw else {}
    if head == "*":
        keys = list(raw)
    elif head in raw:
        keys = [head]
    else:
        return {}
    out: dict[str, Any] = {}
    for key in keys:
        child = copy.deepcopy(raw[key])
        if _set_in(child, rest, value):
            out[key] = child
    return out


def _set_in(node: Any, path: str, value: Any) -> bool:
    head, _, rest = path.partition(".")
    if isinstance(node, dict):
        keys: list[Any] = list(node) if head == "*" else [head] if head in node else []
    elif isinstance(node, list):
        if head == "*":
            keys = list(range(len(node)))
        elif head.isdigit() and int(head) < len(node):
            keys = [int(head)]
        else:
            keys = []
    else:
        return False
    done = False
    for key in keys:
        if not rest:
            node[key] = value
            done = True
        elif _set_in(node[key], rest, value):
            done = True
    return done


HINT_ORDER = ("address_key", "address_format", "port_key", "timeout_key", "timeout_s",
              "secret_key")
"""Which hint a config problem is laid at when it is not at a key one hint wrote."""


def hinted_address(hints: NegativeHints, port: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The config keys the ``address_key`` (and ``port_key``) hints write for
    ``HOST:port``, and which hint wrote each key."""
    assert hints.address_key is not None
    out: dict[str, Any] = {hints.address_key: hints.address_format.format(host=HOST, port=port)}
    wrote = {hints.address_key: "address_key"}
    if hints.port_key:
        out[hints.port_key] = port
        wrote[hints.port_key] = "port_key"
    return out, wrote


def short_timeouts(
    ctype: ChannelType[Any, Any], hints: NegativeHints
) -> tuple[dict[str, Any], float | None, dict[str, str]]:
    """Overrides that bound one call short, that bound (None: nothing to set), and which
    hint wrote each key (empty where they come from the type's ``Timeouts`` field and the
    default ``timeout_s``)."""
    t = hints.timeout_s
    if hints.timeout_key is not None:
        keys = [hints.timeout_key] if isinstance(hints.timeout_key, str) else hints.timeout_key
        return {key: t for key in keys}, t * 2, dict.fromkeys(keys, "timeout_key")
    field = ctype.timeouts_field()
    if field is None:
        return {}, None, {}
    wrote = {field: "timeout_s"} if "timeout_s" in hints.model_fields_set else {}
    return {field: {"connect_s": t, "read_s": t}}, t * 2, wrote


def wrong_secret(
    ctype: ChannelType[Any, Any], raw: Mapping[str, Any], hints: NegativeHints, env: str
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """Overrides that replace every configured secret with ``{env: ...}`` (None: the
    channel is configured with none), and which hint wrote each key."""
    ref = {"env": env}
    if hints.secret_key is not None:
        return {hints.secret_key: ref}, {hints.secret_key: "secret_key"}
    out: dict[str, Any] = {}
    for path in ctype.secret_fields():
        for top, value in set_path({**raw, **out}, path, ref).items():
            out[top] = value
    return out or None, {}


def raw_channel_config(deployment: Deployment, channel: str) -> dict[str, Any]:
    """The channel's config as the file wrote it, without ``type``."""
    raw = (deployment.raw or {}).get("channels", {})
    found = raw.get(channel, {}) if isinstance(raw, Mapping) else {}
    return {k: v for k, v in dict(found).items() if k != "type"}


def _hint_at(error: Mapping[str, Any], overrides: Mapping[str, Any],
             wrote: Mapping[str, str]) -> str | None:
    """The hint a config error is laid at; None: a key the declarations derived."""
    loc = error.get("loc") or ()
    top = str(loc[0]) if loc else ""
    if top in wrote:
        return wrote[top]
    if top in overrides:
        return None  # a key the type's own declarations set: checked when the check runs
    # the file's config is valid alone: an error elsewhere comes from the keys set
    return next((h for h in HINT_ORDER if h in wrote.values()), None)


def _channel_hint_problems(
    name: str, ctype: ChannelType[Any, Any], config: Any, raw: dict[str, Any],
    hints: NegativeHints, registry: Registry,
) -> list[tuple[str, str]]:
    """``(hint, message)`` for every config this channel's hints shape that its type's
    model rejects."""
    problems: list[tuple[str, str]] = []
    cases: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    address: Address | None = None
    try:
        address = ctype.address_for(config)
    except Exception:
        address = None  # reported by the checks, with the reason
    declared = ""
    if address is not None:
        where = address.field if address.source == "config" else "each node's target"
        declared = (f"channel type {ctype.name} declares its address ({where}, written as "
                    f"{address.format}): without address_key the suite uses it")
    addr: dict[str, Any] = {}
    addr_wrote: dict[str, str] = {}
    if hints.address_key is None:
        for key in ("address_format", "port_key"):
            if key in hints.model_fields_set:
                problems.append((key, f"{key} applies only with address_key" +
                                 (f"; {declared}" if declared else "")))
        if address is not None and address.source == "config":
            addr = address.config_overrides(HOST, LOAD_PORT)
    else:
        try:
            addr, addr_wrote = hinted_address(hints, LOAD_PORT)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            problems.append(("address_format", f"{hints.address_format!r} cannot be written "
                             f"with host and port ({describe_error(exc)}): use the fields "
                             "{host} and {port}"))
    short, _, short_wrote = short_timeouts(ctype, hints)
    cases.append(("the closed-port and silent-server config", {**addr, **short},
                  {**addr_wrote, **short_wrote}))
    env = f"POWERPLANE_CONFORMANCE_LOAD_{pysecrets.token_hex(4).upper()}"
    os.environ[env] = "ppc-" + pysecrets.token_hex(12)
    try:
        secret, secret_wrote = wrong_secret(ctype, raw, hints, env)
        if secret is not None:
            cases.append(("the wrong-secret config", secret, secret_wrote))
        for what, overrides, wrote in cases:
            if wrote:
                problems += _validate(name, ctype, raw, what, overrides, wrote, declared,
                                      hints.address_format, registry)
    finally:
        os.environ.pop(env, None)
    if hints.unknown_target is not None and ctype.target is not None:
        try:
            ctype.target(hints.unknown_target)
        except (ValueError, TypeError) as exc:
            problems.append(("unknown_target", f"channel type {ctype.name} rejects this "
                             f"target: {exc}"))
    return problems


def _validate(
    name: str, ctype: ChannelType[Any, Any], raw: dict[str, Any], what: str,
    overrides: dict[str, Any], wrote: dict[str, str], declared: str, address_format: str,
    registry: Registry,
) -> list[tuple[str, str]]:
    """``(hint, message)`` for each error of ``ctype``'s model on the file's config with
    ``overrides``, laid at the hint that wrote the key (none for keys the declarations
    derived: the check reports those); secret kinds looked up in ``registry``."""
    try:
        ctype.config.model_validate({**raw, **overrides}, context={SECRET_KINDS: registry})
    except ValidationError as exc:
        said: dict[str, list[str]] = {}
        for err in exc.errors(include_input=False, include_url=False):
            hint = _hint_at(err, overrides, wrote)
            if hint is None:
                continue
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "no such key"
            said.setdefault(hint, []).append(
                f"{'.'.join(map(str, err['loc'])) or '(config)'}: {msg}")
        out = []
        for hint, errors in said.items():
            keys = [k for k, h in wrote.items() if h == hint] or sorted(overrides)
            shown = ", ".join(
                f"{k} = {overrides[k]!r}" if hint in ("address_key", "port_key") else k
                for k in keys)
            if hint == "address_key":
                shown += f", written by address_format {address_format!r}"
            text = (f"{what} this hint builds for channel {name} ({shown}) is invalid for "
                    f"channel type {ctype.name}: " + "; ".join(errors))
            if hint in ("address_key", "address_format", "port_key") and declared:
                text += f"; {declared}"
            out.append((hint, text))
        return out
    return []


def hint_problems(
    deployment: Deployment, negative: Mapping[str, NegativeHints],
    registry: Registry | None = None,
) -> list[tuple[tuple[str, str, str], str]]:
    """``(("negative", channel, hint), message)`` for every ``conformance.negative`` hint
    that makes a config the channel type's model rejects (or a target its parser does):
    a mistake in the target file, reported when it is loaded, before any check runs.
    ``registry``: the one the deployment was loaded with (default: the process-wide one)."""
    if registry is None:
        from powerplane.testing import process_registry

        registry = process_registry()
    out: list[tuple[tuple[str, str, str], str]] = []
    for name, hints in negative.items():
        configured = deployment.channels.get(name)
        if configured is None:
            continue  # an unknown channel: reported as such
        raw = raw_channel_config(deployment, name)
        for hint, message in _channel_hint_problems(name, configured.type, configured.config,
                                                    raw, hints, registry):
            out.append((("negative", name, hint), message))
    return out
