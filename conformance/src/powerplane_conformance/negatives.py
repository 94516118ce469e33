"""The negative checks: an unknown target, wrong credentials, a closed port, a silent
server, and no secret in any message.

The network negatives need no hints. What the suite must know it reads from the channel
type's declarations:

* where the address lives, ``ctype.address_for(config)``: a config key
  (:meth:`~powerplane.Address.config_overrides`) or each node's target
  (:meth:`~powerplane.Address.retarget`, as for IPMI);
* the secret fields, ``ctype.secret_fields()``, for the wrong-secret check;
* the :class:`~powerplane.Timeouts` field, ``ctype.timeouts_field()``, set short so a
  silent server ends the probe in seconds.

``conformance.negative.<channel>`` hints, where given, override what is derived
(``address_key``/``address_format``/``port_key``, ``secret_key``, ``timeout_key``,
``transport``). A hint or a derived config the channel's own model rejects is never a
FAIL: the check is NOT TESTED with the model's reason, since it proves nothing about
the device.

The transport decides which fakes the suite starts, a TCP closed port and silent server
or UDP ones (``powerplane.testing.SilentServer(kind="udp")``): the address's
``transport`` (``Address(..., transport="udp")`` for SNMP and IPMI), or the
``transport`` hint, which wins.
"""

from __future__ import annotations

import copy
import os
import secrets as pysecrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from powerplane.capabilities import Verb
from powerplane.channel import Address
from powerplane.config import parse_config
from powerplane.errors import (
    AuthenticationFailed,
    ChannelTimeout,
    ConfigError,
    PowerplaneError,
    Unreachable,
)
from powerplane.testing import SilentServer, free_port
from powerplane_conformance.checks import CheckContext
from powerplane_conformance.checks import check as proves
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.loop import OuterTimeout
from powerplane_conformance.session import DerivedConfigInvalid, Subject, describe_error
from powerplane_conformance.settings import NegativeHints

__all__ = [
    "BOGUS_KEY",
    "HOST",
    "NegativeChecks",
    "Pointer",
    "Untestable",
    "error_texts",
    "set_path",
]

HOST = "127.0.0.1"
"""Where the suite's fakes listen."""
BOGUS_KEY = "powerplane_conformance_bogus"
UNKNOWN_SUFFIX = "-powerplane-conformance-unknown"
Transport = Literal["tcp", "udp"]


def error_texts(exc: BaseException) -> list[str]:
    """Every text an error carries: message, repr, args, and its causes' messages."""
    out: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out += [str(cur), repr(cur), *map(str, cur.args)]
        cur = cur.__cause__ or cur.__context__
    return out


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


@dataclass(frozen=True)
class Pointer:
    """How to point one subject at a loopback port: config overrides and/or a new target."""

    transport: Transport | None
    """The address's transport; ``None`` when nothing declares it."""
    why_no_transport: str
    """Why the transport is unknown (empty when it is known)."""
    source: Literal["config", "target", "hints"]
    address: Address | None
    hints: NegativeHints

    def at(self, raw_target: Any, port: int) -> tuple[dict[str, Any], Any]:
        """``(config overrides, raw target or None)`` pointing at ``HOST:port``."""
        if self.source == "hints":
            hints = self.hints
            assert hints.address_key is not None
            out: dict[str, Any] = {hints.address_key: hints.address_format.format(
                host=HOST, port=port)}
            if hints.port_key:
                out[hints.port_key] = port
            return out, None
        assert self.address is not None
        if self.source == "config":
            return self.address.config_overrides(HOST, port), None
        return {}, self.address.retarget(raw_target, HOST, port)


def _transport_of(address: Address | None, hints: NegativeHints) -> tuple[Transport | None, str]:
    """The transport the fakes speak: the ``transport`` hint, else the address's own
    declaration (``Address.transport``); a hinted address is TCP unless the hint says."""
    if hints.transport is not None:
        return hints.transport, ""
    if address is None:
        return "tcp", ""
    declared = getattr(address, "transport", None)
    if declared in ("tcp", "udp"):
        return declared, ""
    return None, (f"the channel type declares its address as {address.format} but not "
                  "whether it is reached over TCP or UDP (Address.transport), so the suite "
                  "cannot choose its fakes")


class Untestable(Exception):
    """A negative case the suite cannot build (no declaration, an invalid derived config):
    the check is NOT TESTED with this reason, never FAIL."""


class NegativeChecks:
    """Unknown target, wrong credentials, closed port, silent server, no secret disclosed."""

    def _hints(self, check: CheckContext) -> NegativeHints:
        return check.settings.negative.get(check.subject.channel, NegativeHints())

    def _raw_config(self, check: CheckContext) -> dict[str, Any]:
        raw = (check.session.deployment.raw or {}).get("channels", {})
        found = raw.get(check.subject.channel, {}) if isinstance(raw, Mapping) else {}
        return {k: v for k, v in dict(found).items() if k != "type"}

    def _pointer(self, check: CheckContext) -> Pointer:
        """How to point this subject elsewhere, or NOT TESTED with why not."""
        s = check.subject
        hints = self._hints(check)
        if hints.address_key is not None:
            transport, why = _transport_of(None, hints)
            return Pointer(transport, why, "hints", None, hints)
        configured = check.session.deployment.channels[s.channel]
        ctype = configured.type
        try:
            address = ctype.address_for(configured.config)
        except Exception as exc:
            raise Untestable(f"channel type {ctype.name}'s address declaration failed on this "
                             f"config: {describe_error(exc)}") from None
        if address is None:
            raise Untestable(f"channel type {ctype.name} declares no network address "
                             f"(ChannelType(address=...)); or name it in "
                             f"conformance.negative.{s.channel}.address_key")
        transport, why = _transport_of(address, hints)
        return Pointer(transport, why, address.source, address, hints)

    def _need_transport(self, check: CheckContext, pointer: Pointer) -> Transport:
        if pointer.transport is None:
            raise Untestable(f"{pointer.why_no_transport}; set "
                             f"conformance.negative.{check.subject.channel}.transport "
                             "(tcp or udp)")
        return pointer.transport

    def _short_timeouts(self, check: CheckContext) -> tuple[dict[str, Any], float | None]:
        """Overrides that bound one call short, and that bound (None: none declared)."""
        hints = self._hints(check)
        if hints.timeout_key is not None:
            keys = [hints.timeout_key] if isinstance(hints.timeout_key, str) \
                else hints.timeout_key
            return {key: hints.timeout_s for key in keys}, hints.timeout_s * 2
        field = check.session.deployment.channels[check.subject.channel].type.timeouts_field()
        if field is None:
            return {}, None
        t = hints.timeout_s
        return {field: {"connect_s": t, "read_s": t}}, t * 2

    def _raw_target(self, check: CheckContext) -> Any:
        s = check.subject
        nodes = (check.session.deployment.raw or {}).get("nodes", {})
        node = nodes.get(s.node, {}) if isinstance(nodes, Mapping) else {}
        for ref in node.get("channels", []) if isinstance(node, Mapping) else []:
            if isinstance(ref, Mapping) and ref.get("channel") == s.channel:
                return ref.get("target")
        return s.target

    def _probe(
        self, check: CheckContext, overrides: dict[str, Any], raw_target: Any = None,
        bound: float | None = None,
    ) -> BaseException | None:
        """Read through a fresh channel built with ``overrides`` (and the target
        ``raw_target``, when given); the error, or None. NOT TESTED when the derived
        config or target is invalid: that proves nothing about the device."""
        s, session = check.subject, check.session
        limit = (bound if bound is not None else session.call_timeout) + 5
        target = s.target
        if raw_target is not None:
            parser = session.deployment.channels[s.channel].type.target
            try:
                target = parser(raw_target) if parser is not None else raw_target
            except (ValueError, TypeError) as exc:
                raise Untestable(f"the derived target {raw_target!r} is invalid for channel "
                                 f"{s.channel}: {exc}") from None
        try:
            channel = session.fresh_channel(s, overrides)
        except DerivedConfigInvalid as exc:
            raise Untestable(str(exc)) from None
        except Exception as exc:
            return exc
        try:
            session.call(channel.read_power_state, target, timeout=limit)
        except Exception as exc:
            return exc
        finally:
            session.close_channel(channel)
        return None

    def _point(
        self, check: CheckContext, pointer: Pointer, port: int
    ) -> tuple[dict[str, Any], Any, float | None]:
        overrides, raw_target = pointer.at(self._raw_target(check), port)
        short, bound = self._short_timeouts(check)
        return {**overrides, **short}, raw_target, bound

    def _unknown_subject(self, check: CheckContext) -> Subject | None:
        """A subject for a target the device does not have; None if the parser rejects it."""
        s = check.subject
        raw = self._hints(check).unknown_target
        if raw is None:
            if not isinstance(s.target, str):
                check.not_tested(f"no unknown target for channel {s.channel}: set "
                                 f"conformance.negative.{s.channel}.unknown_target")
            raw = s.target + UNKNOWN_SUFFIX
        parser = check.session.deployment.channels[s.channel].type.target
        target = raw
        if parser is not None:
            try:
                target = parser(raw)
            except (ValueError, TypeError):
                return None  # rejected when the config is read: a clear error
        return Subject(s.node, s.channel, target, s.type_name)

    @proves("UNKNOWN_TARGET_ERROR", common=True)
    def test_unknown_target_error(self, check: CheckContext) -> None:
        unknown = self._unknown_subject(check)
        if unknown is None:
            return
        session = check.session
        try:
            reading = session.read(unknown)
        except PowerplaneError as exc:
            if not str(exc).strip():
                check.fail("an error that says what is wrong", f"{type(exc).__name__} with no text")
        except OuterTimeout as exc:
            check.fail("a clear error", str(exc))
        except Exception as exc:
            check.fail("a powerplane error", f"an unmapped {describe_error(exc)}")
        else:
            check.fail(f"a clear error for target {unknown.target!r}",
                       f"it read {reading.state.value} {reading.detail}".strip())
        if not check.settings.allow_destructive:
            return
        for verb in (Verb.POWER_ON, Verb.REBOOT, Verb.SHUTDOWN):
            if check.caps.advertises(verb):
                try:
                    result = session.invoke(unknown, verb)
                except PowerplaneError:
                    return
                except Exception as exc:
                    check.fail("a powerplane error", f"{verb.value}: an unmapped "
                               f"{describe_error(exc)}")
                check.fail(f"a clear error from {verb.value} for target {unknown.target!r}",
                           f"the verb was accepted ({result!r}): an error swallowed")

    def _canary(self, check: CheckContext) -> tuple[str, str]:
        value = "ppc-" + pysecrets.token_hex(12)
        check.remember_secret(value)
        env = f"POWERPLANE_CONFORMANCE_CANARY_{pysecrets.token_hex(4).upper()}"
        os.environ[env] = value
        return env, value

    def _wrong_secret(self, check: CheckContext, env: str) -> dict[str, Any] | None:
        """Overrides that replace every configured secret with ``{env: ...}``; None: none."""
        key = self._hints(check).secret_key
        ref = {"env": env}
        if key is not None:
            return {key: ref}
        raw = self._raw_config(check)
        ctype = check.session.deployment.channels[check.subject.channel].type
        out: dict[str, Any] = {}
        for path in ctype.secret_fields():
            for top, value in set_path({**raw, **out}, path, ref).items():
                out[top] = value
        return out or None

    def _secret_reason(self, check: CheckContext) -> str:
        name = check.subject.channel
        ctype = check.session.deployment.channels[name].type
        fields = ", ".join(ctype.secret_fields()) or "none"
        return (f"channel {name} is configured with no secret (channel type {ctype.name}'s "
                f"secret fields: {fields}); or name one in "
                f"conformance.negative.{name}.secret_key")

    @proves("WRONG_CREDENTIALS_REJECTED", common=True)
    def test_wrong_credentials_rejected(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        env, _ = self._canary(check)
        try:
            overrides = self._wrong_secret(check, env)
            if overrides is None:
                check.not_tested(self._secret_reason(check))
            try:
                channel = session.fresh_channel(s, overrides)
            except DerivedConfigInvalid as exc:
                check.not_tested(str(exc))
            try:
                reading = session.read(s, channel)
            except AuthenticationFailed:
                return
            except Exception as exc:
                check.fail("AuthenticationFailed", describe_error(exc))
            finally:
                session.close_channel(channel)
            check.fail("AuthenticationFailed", f"it read {reading.state.value} with a wrong secret")
        finally:
            os.environ.pop(env, None)

    @proves("CLOSED_PORT_UNREACHABLE", common=True)
    def test_closed_port_unreachable(self, check: CheckContext) -> None:
        try:
            pointer = self._pointer(check)
            transport = self._need_transport(check, pointer)
            overrides, target, bound = self._point(check, pointer, free_port(transport, HOST))
            exc = self._probe(check, overrides, target, bound)
        except Untestable as why:
            check.not_tested(str(why))
        if not isinstance(exc, Unreachable):
            check.fail("Unreachable within the connect timeout",
                       describe_error(exc) if exc else "the read succeeded")

    @proves("SILENT_SERVER_TIMEOUT", common=True)
    def test_silent_server_timeout(self, check: CheckContext) -> None:
        name = check.subject.channel
        try:
            pointer = self._pointer(check)
            transport = self._need_transport(check, pointer)
            with SilentServer(HOST, kind=transport) as server:
                overrides, target, bound = self._point(check, pointer, server.port)
                if bound is None:
                    raise Untestable(f"channel {name}'s config has no Timeouts field to set "
                                     f"short, and the target file names no "
                                     f"conformance.negative.{name}.timeout_key")
                exc = self._probe(check, overrides, target, bound)
        except Untestable as why:
            check.not_tested(str(why))
        if not isinstance(exc, ChannelTimeout):
            check.fail("ChannelTimeout within the channel's bound",
                       describe_error(exc) if exc else "the read succeeded")

    @proves("SECRET_NOT_DISCLOSED", common=True)
    def test_secret_not_disclosed(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        hints = self._hints(check)
        known = session.secrets(s.channel)
        texts: list[tuple[str, str]] = []
        env = ""
        with IOWatch() as io:
            try:
                env, canary = self._canary(check)
                wrong = self._wrong_secret(check, env)
                if not known and wrong is None:
                    check.not_tested(self._secret_reason(check))
                if wrong is not None:
                    known.append(("a wrong secret", canary))
                    exc = self._probe_quietly(check, wrong)
                    texts += [("the wrong-credentials error", t)
                              for t in error_texts(exc or Exception())]
                unknown = self._unknown_subject(check) if isinstance(s.target, str) or \
                    hints.unknown_target is not None else None
                if unknown is not None:
                    try:
                        session.read(unknown)
                    except Exception as exc2:
                        texts += [("the unknown-target error", t) for t in error_texts(exc2)]
                closed = self._closed_port_quietly(check)
                texts += [("the closed-port error", t) for t in error_texts(closed or Exception())]
                raw = dict((session.deployment.raw or {}).get("channels", {}).get(s.channel, {}))
                raw[BOGUS_KEY] = [1]
                try:
                    parse_config({"channels": {s.channel: raw}}, registry=session.registry)
                except ConfigError as exc3:
                    texts += [("the config error", t) for t in error_texts(exc3)]
            finally:
                if env:
                    os.environ.pop(env, None)
        texts += [("a log line", line) for line in io.logs]
        texts += [("the argv of a process", argv) for argv in io.argv]
        leaks = sorted({f"{key} in {where}" for where, text in texts for key, value in known
                        if value and value in text})
        if leaks:
            check.fail("no secret in any message, log line or argv",
                       "the secret appeared: " + "; ".join(leaks))

    def _probe_quietly(
        self, check: CheckContext, overrides: dict[str, Any], raw_target: Any = None,
        bound: float | None = None,
    ) -> BaseException | None:
        """:meth:`_probe`, where a case the suite cannot build yields nothing to search."""
        try:
            return self._probe(check, overrides, raw_target, bound)
        except Untestable:
            return None

    def _closed_port_quietly(self, check: CheckContext) -> BaseException | None:
        try:
            pointer = self._pointer(check)
            transport = self._need_transport(check, pointer)
        except Untestable:
            return None
        overrides, target, bound = self._point(check, pointer, free_port(transport, HOST))
        return self._probe_quietly(check, overrides, target, bound)
