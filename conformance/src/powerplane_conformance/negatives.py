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
``timeout_s``, ``unknown_target``, ``transport``). A mistake in the target is never the
device's fault:

* when the target is loaded, :func:`~powerplane_conformance.hints.hint_problems` (in the
  loading layer, :mod:`powerplane_conformance.hints`) builds every config a hint shapes
  (the closed-port and silent-server config, the wrong-secret config, the unknown
  target) and validates it against the channel type's own model; a rejection is a
  :class:`~powerplane.errors.ConfigError` (exit 2) at ``conformance.negative.<channel>.
  <hint>``, before any check runs;
* what cannot be checked at load (a config derived from the declarations alone, the
  channel type's factory, a call that finds the derived config invalid) makes the check
  NOT TESTED with the reason, never FAIL: it proves nothing about the device.

A channel that cannot see power off (``sees_power_off`` false, as Talos) reads a closed
port or a silent server as ``unknown``, as it must: a dark machine looks the same. Its
closed-port and silent-server checks then send an advertised verb to the fake (nothing is
behind it) and judge that call's error; they need ``allow_destructive`` for it, and are
NOT TESTED without, with that reason. A model that checks what a secret is (a PEM)
rejects the wrong-secret canary; the wrong-credentials check then replaces each PEM key
or leaf certificate with a fresh one from a CA made for the check (a CA certificate is
public and kept).

The transport decides which fakes the suite starts, a TCP closed port and silent server
or UDP ones (``powerplane.testing.SilentServer(kind="udp")``): the address's
``transport`` (``Address(..., transport="udp")`` for SNMP and IPMI), or the
``transport`` hint, which wins.
"""

from __future__ import annotations

import os
import secrets as pysecrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import Address, Channel, PowerState, Reading, verb_method
from powerplane.config import parse_config
from powerplane.errors import (
    AuthenticationFailed,
    ChannelTimeout,
    ConfigError,
    OutcomeUnknown,
    PowerplaneError,
    Unreachable,
)
from powerplane.plugins import Registry
from powerplane_conformance.checks import CheckSpec, spec_of
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.hints import (
    BOGUS_KEY,
    HOST,
    NegativeHints,
    Transport,
    hint_problems,
    hinted_address,
    raw_channel_config,
    set_path,
    short_timeouts,
    wrong_secret,
)
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.loop import OuterTimeout
from powerplane_conformance.model import DerivedConfigInvalid, Subject, describe_error
from powerplane_conformance.probes import Probes, closed_port, probes_of, silent_server
from powerplane_conformance.session import ConformanceSession

__all__ = [
    "BOGUS_KEY",
    "HOST",
    "NegativeChecks",
    "Pointer",
    "Probed",
    "Untestable",
    "error_texts",
    "hint_problems",
    "set_path",
    "short_timeouts",
    "start_probes",
    "wrong_secret",
]

UNKNOWN_SUFFIX = "-powerplane-conformance-unknown"


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
            try:
                return hinted_address(self.hints, port)[0], None
            except (KeyError, IndexError, ValueError, AttributeError) as exc:
                raise Untestable(f"address_format {self.hints.address_format!r} cannot be "
                                 f"written with host and port: {describe_error(exc)}") from None
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


@dataclass
class Probed:
    """What one negative probe produced, kept for the checks that search it
    (SECRET_NOT_DISCLOSED) and for the nodes that share it (one probe per channel)."""

    by: str
    """The check that made it, and where (``CLOSED_PORT_UNREACHABLE on n1@pdu``)."""
    error: BaseException | None
    observed: str
    """What was called when it ended (``the read``, ``reboot sent to the fake ...``)."""
    texts: list[tuple[str, str]]
    """``(where, text)``: every text of its error."""
    logs: list[str]
    argv: list[str]
    wrong: list[str] = field(default_factory=list)
    """The wrong secret values it presented (searched for like the channel's own)."""
    reading: Reading | None = None


def _remember(check: CheckContext, key: tuple[str, str], probed: Probed) -> Probed:
    check.session.probed[key] = probed  # the session keeps what its probes produced
    return probed


def _recalled(check: CheckContext, key: tuple[str, str]) -> Probed | None:
    """The probe made for ``key``: waited for, when it is under way beside the checks."""
    probes = probes_of(check.session)
    pending = probes.get(key) if probes is not None else None
    if pending is not None:
        pending.done.wait()
    found = check.session.probed.get(key)
    return found if isinstance(found, Probed) else None


def _awaited(check: CheckContext, kind: str, key: str) -> Probed | None:
    """The result of this check's probe made beside the checks (raising what the probe
    raised: :class:`Untestable` with its reason); None when none was made for it."""
    probes = probes_of(check.session)
    pending = probes.get((kind, key)) if probes is not None else None
    if pending is None or pending.owner != check.subject.key:
        return None
    value = pending.result()
    assert isinstance(value, Probed)
    return value


class Untestable(Exception):
    """A negative case the suite cannot build (no declaration, an invalid derived config):
    the check is NOT TESTED with this reason, never FAIL."""


CONFIG_FAULTS: tuple[type[BaseException], ...] = (ConfigError, ValidationError, ValueError,
                                                  TypeError)
"""What a channel type's factory raises for a config it cannot use: the suite's derived
config is at fault, not the device (a factory does no I/O)."""
VERB_PROBES = tuple(f"{v.value} sent to the fake" for v in Verb)
"""How a probe through a verb describes itself (see :meth:`NegativeChecks._probe`)."""
def _pem_kind(raw_ref: Any, registry: Registry) -> str | None:
    """``key``, ``cert`` (a leaf), ``ca`` (a CA certificate) or None: what the secret a
    config references holds, when it is a PEM (or base64 of one), its kind looked up in
    ``registry`` (the session's). Read only to choose a wrong value of the same form; the
    value goes nowhere."""
    import base64
    import binascii

    from powerplane.secrets import SECRET_KINDS, SecretRef

    try:
        ref = SecretRef.model_validate(raw_ref, context={SECRET_KINDS: registry})
        text = ref.reveal().strip()
    except Exception:
        return None
    if "-----BEGIN" not in text:
        try:
            text = base64.b64decode(text, validate=True).decode("ascii")
        except (binascii.Error, ValueError):
            return None
    if "PRIVATE KEY-----" in text:
        return "key"
    if "-----BEGIN CERTIFICATE-----" not in text:
        return None
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(text.encode("ascii"))
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except Exception:
        is_ca = False
    return "ca" if is_ca else "cert"


def _fresh_client_pair() -> tuple[str, str]:
    """``(key PEM, certificate PEM)``: a client certificate from a CA made for this call."""
    import tempfile
    from pathlib import Path

    from powerplane.testing import issue_cert, make_ca

    with tempfile.TemporaryDirectory(prefix="powerplane-conformance-") as tmp:
        where = Path(tmp)
        ca = make_ca(where, "powerplane-conformance-unknown")
        leaf = issue_cert(ca, where, ("powerplane-conformance",), stem="client", client=True)
        return leaf.key_pem().decode("ascii"), leaf.cert_pem().decode("ascii")


class NegativeChecks:
    """Unknown target, wrong credentials, closed port, silent server, no secret disclosed."""

    def _hints(self, check: CheckContext) -> NegativeHints:
        return check.settings.negative.get(check.subject.channel, NegativeHints())

    def _raw_config(self, check: CheckContext) -> dict[str, Any]:
        return raw_channel_config(check.session.deployment, check.subject.channel)

    def _fresh(self, check: CheckContext, overrides: dict[str, Any] | None) -> Channel:
        """A fresh channel with ``overrides``; :class:`Untestable` when the channel's model
        or its type's factory rejects the derived config (the suite's fault, not the
        device's)."""
        s = check.subject
        try:
            return check.session.fresh_channel(s, overrides)
        except DerivedConfigInvalid as exc:
            raise Untestable(str(exc)) from None
        except CONFIG_FAULTS as exc:
            keys = ", ".join(sorted(overrides or {})) or "none"
            raise Untestable(f"channel type {s.type_name}'s factory rejected the config the "
                             f"suite derived for channel {s.channel} (keys set: {keys}): "
                             f"{describe_error(exc)}") from None

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

    def _short_timeouts(
        self, check: CheckContext, scale: float = 1.0
    ) -> tuple[dict[str, Any], float | None]:
        """Overrides that bound one call short (``timeout_s`` times ``scale``), and that
        bound (None: none declared)."""
        ctype = check.session.deployment.channels[check.subject.channel].type
        hints = self._hints(check)
        if scale != 1.0:
            hints = hints.model_copy(update={"timeout_s": hints.timeout_s * scale})
        overrides, bound, _ = short_timeouts(ctype, hints)
        return overrides, bound

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
        bound: float | None = None, verb_if_blind: bool = False,
    ) -> tuple[BaseException | None, str]:
        """Read through a fresh channel built with ``overrides`` (and the target
        ``raw_target``, when given): ``(the error or None, what was observed)``. NOT
        TESTED when the derived config or target is invalid: that proves nothing about
        the device.

        ``verb_if_blind``: a channel that cannot see power off reads an unreachable
        device as ``unknown``, as it must (a dark machine looks the same); the error is
        then sought with an advertised verb sent to the fake (nothing is behind it), if
        the target file allows destructive checks.
        """
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
            channel = self._fresh(check, overrides)
        except Untestable:
            raise
        except Exception as exc:  # the factory met the fake (I/O at construction)
            return exc, "building the channel"
        try:
            try:
                reading = session.call(channel.read_power_state, target, timeout=limit)
            except ConfigError as exc:
                raise Untestable(f"channel {s.channel} found the config the suite derived "
                                 f"invalid when called: {describe_error(exc)}") from None
            except Exception as exc:
                return exc, "the read"
            state = getattr(getattr(reading, "state", None), "value", str(reading))
            if not (verb_if_blind and isinstance(reading, Reading)
                    and reading.state is PowerState.UNKNOWN and self._blind(check)):
                return None, f"the read answered {state}"
            verb = self._verb_for_probe(check, reading)
            fn = verb_method(channel, verb)
            if fn is None:
                raise Untestable(f"channel {s.channel} has no method {verb.method}()")
            try:
                session.call(fn, target, timeout=limit)
            except ConfigError as exc:
                raise Untestable(f"channel {s.channel} found the config the suite derived "
                                 f"invalid when called: {describe_error(exc)}") from None
            except Exception as exc:
                return exc, f"{verb.value} sent to the fake (the read answered unknown)"
            return None, f"{verb.value} sent to the fake was accepted"
        finally:
            session.close_channel(channel)

    def _blind(self, check: CheckContext) -> bool:
        caps = check.session.caps(check.subject)
        return isinstance(caps, CapabilitySet) and not caps.sees_power_off

    def _verb_for_probe(self, check: CheckContext, reading: Reading) -> Verb:
        """The advertised verb that shows a blind channel's network error, or NOT TESTED."""
        name = check.subject.channel
        why = (f"channel {name} cannot see power off and reads the fake as unknown, as it "
               f"must ({reading.detail or 'no detail'}): a read shows no error to check")
        if not check.settings.allow_destructive:
            raise Untestable(f"{why}; the check sends a verb to the fake instead (nothing "
                             "is behind it), which needs allow_destructive: true")
        caps = check.caps
        for verb in (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON):
            if caps.advertises(verb):
                return verb
        raise Untestable(f"{why}, and it advertises no verb to send instead")

    def _point(
        self, check: CheckContext, pointer: Pointer, port: int, scale: float = 1.0
    ) -> tuple[dict[str, Any], Any, float | None]:
        overrides, raw_target = pointer.at(self._raw_target(check), port)
        short, bound = self._short_timeouts(check, scale)
        return {**overrides, **short}, raw_target, bound

    def _unknown_subject(self, check: CheckContext) -> Subject | None:
        """A subject for a target the device does not have (NOT TESTED when the channel
        type's parser rejects the derived spelling: no request would be made)."""
        s = check.subject
        ctype = check.session.deployment.channels[s.channel].type
        raw = self._hints(check).unknown_target
        if raw is None and ctype.unknown_target is not None:
            try:  # the channel type's own derivation (ChannelType.unknown_target)
                raw = ctype.unknown_target(s.target)
            except Exception as exc:
                check.not_tested(
                    f"channel type {s.type_name} could not derive an unknown target from "
                    f"{s.target!r} ({describe_error(exc)}); set "
                    f"conformance.negative.{s.channel}.unknown_target")
        if raw is None:
            if not isinstance(s.target, str):
                check.not_tested(f"no unknown target for channel {s.channel}: set "
                                 f"conformance.negative.{s.channel}.unknown_target")
            raw = s.target + UNKNOWN_SUFFIX
        parser = ctype.target
        target = raw
        if parser is not None:
            try:
                target = parser(raw)
            except (ValueError, TypeError) as exc:
                # the config reader refuses this spelling: no device was asked, so nothing
                # about the device's answer to an unknown target was observed
                check.not_tested(
                    f"channel type {s.type_name} rejects the derived target {raw!r} before "
                    f"any request ({exc}); set conformance.negative.{s.channel}.unknown_target "
                    "to a well-formed target the device does not have")
        return Subject(s.node, s.channel, target, s.type_name)

    def _read_unknown(self, check: CheckContext, unknown: Subject) -> Probed:
        """Read the unknown target; recorded for SECRET_NOT_DISCLOSED (its error's text,
        log lines and argv)."""
        reading: Reading | None = None
        error: BaseException | None = None
        with IOWatch() as io:
            try:
                reading = check.session.read(unknown)
            except Exception as exc:
                error = exc
        return _remember(check, ("unknown-target", check.subject.key), Probed(
            f"UNKNOWN_TARGET_ERROR on {check.subject.key}", error, "the read",
            [("the unknown-target error", t) for t in error_texts(error)] if error else [],
            io.logs, io.argv, reading=reading))

    @proves("UNKNOWN_TARGET_ERROR", common=True)
    def test_unknown_target_error(self, check: CheckContext) -> None:
        unknown = self._unknown_subject(check)
        if unknown is None:
            return
        session = check.session
        read = self._read_unknown(check, unknown)
        exc = read.error
        if exc is None:
            reading = read.reading
            assert reading is not None
            check.fail(f"a clear error for target {unknown.target!r}",
                       f"it read {reading.state.value} {reading.detail}".strip())
        if isinstance(exc, PowerplaneError):
            if not str(exc).strip():
                check.fail("an error that says what is wrong", f"{type(exc).__name__} with no text")
        elif isinstance(exc, OuterTimeout):
            check.fail("a clear error", str(exc))
        else:
            check.fail("a powerplane error", f"an unmapped {describe_error(exc)}")
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
        ctype = check.session.deployment.channels[check.subject.channel].type
        return wrong_secret(ctype, self._raw_config(check), self._hints(check), env)[0]

    def _secret_reason(self, check: CheckContext) -> str:
        name = check.subject.channel
        ctype = check.session.deployment.channels[name].type
        fields = ", ".join(ctype.secret_fields()) or "none"
        return (f"channel {name} is configured with no secret (channel type {ctype.name}'s "
                f"secret fields: {fields}); or name one in "
                f"conformance.negative.{name}.secret_key")

    def _try_wrong_credentials(self, check: CheckContext,
                               probes: Probes | None = None) -> Probed:
        """Build a fresh channel with every secret wrong and read through it: what
        happened, recorded (the error's text, log lines, argv, the wrong values given).
        :class:`Untestable` when the channel has no secret or the case cannot be built.
        Made beside other probes (``probes``), the wrong secrets stay in the environment
        until every probe is done."""
        s, session = check.subject, check.session
        env, canary = self._canary(check)
        envs = [env]
        wrong = [canary]
        by = f"WRONG_CREDENTIALS_REJECTED on {s.key}"
        try:
            overrides = self._wrong_secret(check, env)
            if overrides is None:
                raise Untestable(self._secret_reason(check))
            with IOWatch() as io:
                error: BaseException | None = None
                reading: Reading | None = None
                observed = "building the channel"
                try:
                    try:
                        channel = self._fresh(check, overrides)
                    except Untestable as why:
                        # a model that checks what a secret is (a PEM) rejects the canary:
                        # try secrets of the same form that the device cannot trust
                        shaped = self._shaped_wrong_secrets(check, envs, wrong)
                        if shaped is None:
                            raise
                        try:
                            channel = self._fresh(check, shaped)
                        except Untestable as why2:
                            raise Untestable(f"{why}; and with PEMs of the same form from a "
                                             f"CA the device does not know: {why2}") from None
                except Untestable:
                    raise
                except Exception as exc:  # the factory logged in (and was refused?)
                    error = exc
                else:
                    observed = "the read"
                    try:
                        reading = session.read(s, channel)
                    except Exception as exc:
                        error = exc
                    finally:
                        session.close_channel(channel)
            texts = [("the wrong-credentials error", t) for t in error_texts(error)] \
                if error is not None else []
            return _remember(check, ("wrong-credentials", s.key), Probed(
                by, error, observed, texts, io.logs, io.argv, wrong, reading))
        finally:
            for name in envs:
                if probes is not None:
                    probes.keep_env(name)
                else:
                    os.environ.pop(name, None)

    @proves("WRONG_CREDENTIALS_REJECTED", common=True)
    def test_wrong_credentials_rejected(self, check: CheckContext) -> None:
        s = check.subject
        try:
            probed = _awaited(check, "wrong-credentials", s.key) \
                or self._try_wrong_credentials(check)
        except Untestable as why:
            check.not_tested(str(why))
        exc = probed.error
        if isinstance(exc, AuthenticationFailed):
            return  # refused: at the factory's login or at the read
        if isinstance(exc, ConfigError) and probed.observed == "the read":
            check.not_tested(f"channel {s.channel} found the config the suite derived "
                             f"invalid when called: {describe_error(exc)}")
        if exc is not None:
            check.fail("AuthenticationFailed", describe_error(exc))
        assert probed.reading is not None
        check.fail("AuthenticationFailed",
                   f"it read {probed.reading.state.value} with a wrong secret")

    def _shaped_wrong_secrets(
        self, check: CheckContext, envs: list[str], wrong: list[str]
    ) -> dict[str, Any] | None:
        """Overrides that replace each configured top-level secret holding a PEM private key
        or leaf certificate with a fresh one from a CA nobody knows (a CA certificate is
        public and kept: a wrong one would test TLS verification, not credentials); None
        when no secret holds a PEM, or a ``secret_key`` hint names the secret to replace."""
        if self._hints(check).secret_key is not None:
            return None
        raw = self._raw_config(check)
        ctype = check.session.deployment.channels[check.subject.channel].type
        kinds: dict[str, str] = {}
        for path in ctype.secret_fields():
            if "." in path or path not in raw:
                continue
            kind = _pem_kind(raw[path], check.session.registry)
            if kind in ("key", "cert"):
                kinds[path] = kind
        if not kinds:
            return None
        key_pem, cert_pem = _fresh_client_pair()
        check.remember_secret(key_pem)
        wrong.append(key_pem)
        out: dict[str, Any] = {}
        for path, kind in kinds.items():
            name = f"POWERPLANE_CONFORMANCE_WRONG_{pysecrets.token_hex(4).upper()}"
            os.environ[name] = key_pem if kind == "key" else cert_pem
            envs.append(name)
            out[path] = {"env": name}
        return out

    def _probe_key(self, check: CheckContext, pointer: Pointer) -> str:
        """What a closed-port or silent-server probe depends on: the channel, where its
        address is in the channel's config (every node reaches the same fake the same
        way); the node, where the address is in each node's target, or where a blind
        channel sends the fake a verb the node advertises."""
        s = check.subject
        if pointer.source in ("config", "hints") and not self._blind(check):
            return s.channel
        return s.key

    def _made_for_channel(self, check: CheckContext, kind: str, pointer: Pointer) -> None:
        """SKIP when this probe, one per channel, was made already by another node's check
        (what it observed is on that check's result)."""
        key = self._probe_key(check, pointer)
        if key != check.subject.channel:
            return
        probes = probes_of(check.session)
        pending = probes.get((kind, key)) if probes is not None else None
        if pending is not None:
            if pending.owner == check.subject.key:
                return
            check.skip(f"the {kind} probe reaches the suite's fake, not the node, and is "
                       f"made once per channel: made by {pending.by}, which reports what "
                       "it observed")
        earlier = _recalled(check, (kind, key))
        if earlier is None or earlier.by.endswith(f" on {check.subject.key}"):
            return
        check.skip(f"the {kind} probe reaches the suite's fake, not the node, and is made "
                   f"once per channel: made by {earlier.by}, which reports what it "
                   "observed")

    def _closed_port(self, check: CheckContext, pointer: Pointer,
                     verb_if_blind: bool) -> Probed:
        """Probe a closed port; recorded (the error's text, log lines, argv).

        A TCP closed port refuses at once, so the short bound costs a conformant channel
        nothing; but a channel that starts a process per call (talosctl) can spend it
        starting up and time out instead. A timeout there is probed again with twice the
        bound, and that probe is the one judged (a UDP closed port is silence: no retry)."""
        transport = self._need_transport(check, pointer)
        with closed_port(transport) as port, IOWatch() as io:
            overrides, target, bound = self._point(check, pointer, port)
            exc, observed = self._probe(check, overrides, target, bound,
                                        verb_if_blind=verb_if_blind)
            if transport == "tcp" and bound is not None \
                    and isinstance(exc, ChannelTimeout | OutcomeUnknown | OuterTimeout):
                first = f"{observed}: {describe_error(exc)}"
                overrides, target, bound = self._point(check, pointer, port, scale=2.0)
                exc, observed = self._probe(check, overrides, target, bound,
                                            verb_if_blind=verb_if_blind)
                observed = (f"{observed} (probed again with twice the bound, after a "
                            f"timeout with the short one: {first})")
        texts = [("the closed-port error", t) for t in error_texts(exc)] if exc else []
        return _remember(check, ("closed-port", self._probe_key(check, pointer)), Probed(
            f"CLOSED_PORT_UNREACHABLE on {check.subject.key}", exc, observed, texts,
            io.logs, io.argv))

    @proves("CLOSED_PORT_UNREACHABLE", common=True)
    def test_closed_port_unreachable(self, check: CheckContext) -> None:
        try:
            pointer = self._pointer(check)
            self._made_for_channel(check, "closed-port", pointer)
            probed = _awaited(check, "closed-port", self._probe_key(check, pointer)) \
                or self._closed_port(check, pointer, verb_if_blind=True)
        except Untestable as why:
            check.not_tested(str(why))
        exc, observed = probed.error, probed.observed
        if not isinstance(exc, Unreachable):
            check.fail("Unreachable within the connect timeout",
                       f"{observed}: {describe_error(exc)}" if exc else observed)

    def _silent_server(self, check: CheckContext, pointer: Pointer) -> Probed:
        """Probe a server that never answers; recorded (the error's text, log lines,
        argv). :class:`Untestable` when no bound can be set short."""
        name = check.subject.channel
        transport = self._need_transport(check, pointer)
        with silent_server(transport) as server:
            overrides, target, bound = self._point(check, pointer, server.port)
            if bound is None:
                raise Untestable(f"channel {name}'s config has no Timeouts field to set "
                                 f"short, and the target file names no "
                                 f"conformance.negative.{name}.timeout_key")
            with IOWatch() as io:
                exc, observed = self._probe(check, overrides, target, bound,
                                            verb_if_blind=True)
        texts = [("the silent-server error", t) for t in error_texts(exc)] if exc else []
        return _remember(check, ("silent-server", self._probe_key(check, pointer)), Probed(
            f"SILENT_SERVER_TIMEOUT on {check.subject.key}", exc, observed, texts,
            io.logs, io.argv))

    @proves("SILENT_SERVER_TIMEOUT", common=True)
    def test_silent_server_timeout(self, check: CheckContext) -> None:
        try:
            pointer = self._pointer(check)
            self._made_for_channel(check, "silent-server", pointer)
            probed = _awaited(check, "silent-server", self._probe_key(check, pointer)) \
                or self._silent_server(check, pointer)
        except Untestable as why:
            check.not_tested(str(why))
        exc, observed = probed.error, probed.observed
        if isinstance(exc, ChannelTimeout):
            return
        if isinstance(exc, OutcomeUnknown) and observed.startswith(VERB_PROBES):
            return  # a verb whose request left and met silence: outcome unknown is right
        check.fail("ChannelTimeout within the channel's bound",
                   f"{observed}: {describe_error(exc)}" if exc else observed)

    @proves("SECRET_NOT_DISCLOSED", common=True)
    def test_secret_not_disclosed(self, check: CheckContext) -> None:
        """Searches what the other negative checks of this node (and this channel's
        probes) produced, error texts, log lines and argv, and probes only what they
        did not (under ``-k``, or when this check runs alone)."""
        s, session = check.subject, check.session
        hints = self._hints(check)
        known = session.secrets(s.channel)
        seen: list[Probed] = []
        wrong = _recalled(check, ("wrong-credentials", s.key))
        if wrong is None:
            try:
                wrong = self._try_wrong_credentials(check)
            except Untestable:
                wrong = None
        if wrong is not None:
            seen.append(wrong)
            known += [("a wrong secret", value) for value in wrong.wrong]
        elif not known:
            check.not_tested(self._secret_reason(check))
        unknown = _recalled(check, ("unknown-target", s.key))
        derives = check.session.deployment.channels[s.channel].type.unknown_target is not None
        if unknown is None and (isinstance(s.target, str) or hints.unknown_target is not None
                                or derives):
            subject = self._unknown_subject(check)
            if subject is not None:
                unknown = self._read_unknown(check, subject)
        seen += [unknown] if unknown is not None else []
        try:
            pointer = self._pointer(check)
            closed = _recalled(check, ("closed-port", self._probe_key(check, pointer)))
            if closed is None:
                closed = self._closed_port(check, pointer, verb_if_blind=False)
            seen.append(closed)
            silent = _recalled(check, ("silent-server", self._probe_key(check, pointer)))
            seen += [silent] if silent is not None else []
        except Untestable:
            pass
        texts: list[tuple[str, str]] = []
        with IOWatch() as io:
            raw = dict((session.deployment.raw or {}).get("channels", {}).get(s.channel, {}))
            raw[BOGUS_KEY] = [1]
            try:
                parse_config({"channels": {s.channel: raw}}, registry=session.registry)
            except ConfigError as exc3:
                texts += [("the config error", t) for t in error_texts(exc3)]
        for probed in seen:
            texts += probed.texts
            texts += [("a log line", line) for line in probed.logs]
            texts += [("the argv of a process", argv) for argv in probed.argv]
        texts += [("a log line", line) for line in io.logs]
        texts += [("the argv of a process", argv) for argv in io.argv]
        leaks = sorted({f"{key} in {where}" for where, text in texts for key, value in known
                        if value and value in text})
        if leaks:
            check.fail("no secret in any message, log line or argv",
                       "the secret appeared: " + "; ".join(leaks))


PROBED_CHECKS = {"WRONG_CREDENTIALS_REJECTED": "wrong-credentials",
                 "CLOSED_PORT_UNREACHABLE": "closed-port",
                 "SILENT_SERVER_TIMEOUT": "silent-server"}
"""The checks whose probe is made beside the other checks, and the probe's kind."""


def _selected_negatives(
    item: pytest.Item, session: ConformanceSession
) -> Iterator[tuple[pytest.Item, CheckSpec, Subject]]:
    """(item, spec, subject) of every network negative of this suite class that pytest will
    run and the gate lets run, in the order they run."""
    for other in item.session.items:
        spec = spec_of(getattr(other, "function", None))
        if spec is None or other.parent is not item.parent \
                or spec.template not in PROBED_CHECKS:
            continue
        params = getattr(other, "callspec", None)
        values: dict[str, Any] = dict(params.params) if params is not None else {}
        try:
            subj = session.subject(values.get("subject"))
        except LookupError:
            continue
        if session.gate(spec, None, subj) is None:
            yield other, spec, subj


def start_probes(suite: NegativeChecks, item: pytest.Item, session: ConformanceSession) -> None:
    """At the first network negative of a suite class (wrong credentials, closed port,
    silent server): make the probe of every selected one, each in a thread of its own
    with a channel of its own, at most :data:`~powerplane_conformance.probes.MAX_PROBES`
    at once, and wait for them all. Each check then takes its own probe's result and
    judges it as it always has; a probe made once per channel is made for the first of
    its checks to run.

    This check waits for the probes, rather than letting pytest go on beside them,
    because pytest unsets ``PYTEST_CURRENT_TEST`` after each test, and a client library
    that reads the environment whole while a key goes (botocore building a client,
    ``urllib.request.getproxies``, a subprocess's environment) fails with a KeyError the
    device did not cause."""
    spec = spec_of(getattr(item, "function", None))
    if spec is None or spec.template not in PROBED_CHECKS:
        return
    probes = probes_of(session, create=True)
    if probes is None:
        return  # made already
    for other, spec, subj in _selected_negatives(item, session):
        kind = PROBED_CHECKS[spec.template]
        ctx = CheckContext(other, session, spec, subj, None)
        by = f"{spec.template} on {subj.key}"
        if kind == "wrong-credentials":
            probes.start((kind, subj.key), subj.key, by,
                         partial(suite._try_wrong_credentials, ctx, probes))
            continue
        try:
            pointer = suite._pointer(ctx)
        except Untestable:
            continue  # the check says why when it runs
        make: Callable[[], Probed] = (
            partial(suite._closed_port, ctx, pointer, verb_if_blind=True)
            if kind == "closed-port" else partial(suite._silent_server, ctx, pointer))
        probes.start((kind, suite._probe_key(ctx, pointer)), subj.key, by, make)
    probes.wait(session.call_timeout * 4 + 30)
