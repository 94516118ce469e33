"""What the negative checks share: where a channel's address lives (:class:`Pointer`),
a probe's outcome kept for the session (:class:`Probed`), a fresh channel with short
timeouts, the unknown subject, the wrong secrets, the closed port and the silent server
(:class:`Probing`, the base of :class:`~powerplane_conformance.negatives.NegativeChecks`);
the checks themselves and their words are in :mod:`powerplane_conformance.negatives`."""

from __future__ import annotations

import os
import secrets as pysecrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from powerplane import (
    Address,
    CapabilitySet,
    Channel,
    ChannelTimeout,
    ConfigError,
    OutcomeUnknown,
    PowerState,
    Reading,
    Verb,
)
from powerplane.channel import verb_method
from powerplane.plugins import Registry
from powerplane_conformance.context import CheckContext
from powerplane_conformance.hints import (
    HOST,
    NegativeHints,
    Transport,
    hinted_address,
    raw_channel_config,
    short_timeouts,
    wrong_secret,
)
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.loop import OuterTimeout
from powerplane_conformance.model import DerivedConfigInvalid, Subject, describe_error
from powerplane_conformance.probes import Probes, closed_port, probes_of, silent_server

__all__ = ["UNKNOWN_SUFFIX", "Pointer", "Probed", "Probing", "Untestable", "error_texts"]

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


def remember(check: CheckContext, key: tuple[str, str], probed: Probed) -> Probed:
    check.session.probed[key] = probed  # the session keeps what its probes produced
    return probed


def recalled(check: CheckContext, key: tuple[str, str]) -> Probed | None:
    """The probe made for ``key``: waited for, when it is under way beside the checks."""
    probes = probes_of(check.session)
    pending = probes.get(key) if probes is not None else None
    if pending is not None:
        pending.done.wait()
    found = check.session.probed.get(key)
    return found if isinstance(found, Probed) else None


def awaited(check: CheckContext, kind: str, key: str) -> Probed | None:
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

    from powerplane import SecretRef
    from powerplane.secrets import SECRET_KINDS

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


class Probing:
    """The negative checks' helpers: each takes the check's context."""

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
        return remember(check, ("unknown-target", check.subject.key), Probed(
            f"UNKNOWN_TARGET_ERROR on {check.subject.key}", error, "the read",
            [("the unknown-target error", t) for t in error_texts(error)] if error else [],
            io.logs, io.argv, reading=reading))

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
            return remember(check, ("wrong-credentials", s.key), Probed(
                by, error, observed, texts, io.logs, io.argv, wrong, reading))
        finally:
            for name in envs:
                if probes is not None:
                    probes.keep_env(name)
                else:
                    os.environ.pop(name, None)

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
        earlier = recalled(check, (kind, key))
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
        return remember(check, ("closed-port", self._probe_key(check, pointer)), Probed(
            f"CLOSED_PORT_UNREACHABLE on {check.subject.key}", exc, observed, texts,
            io.logs, io.argv))

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
        return remember(check, ("silent-server", self._probe_key(check, pointer)), Probed(
            f"SILENT_SERVER_TIMEOUT on {check.subject.key}", exc, observed, texts,
            io.logs, io.argv))
