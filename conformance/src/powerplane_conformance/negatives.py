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

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    ConfigError,
    OutcomeUnknown,
    PowerplaneError,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane_conformance.checks import CheckSpec, spec_of
from powerplane_conformance.checks import check as proves
from powerplane_conformance.context import CheckContext
from powerplane_conformance.hints import (
    BOGUS_KEY,
)
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.loop import OuterTimeout
from powerplane_conformance.model import Subject, describe_error
from powerplane_conformance.probes import probes_of
from powerplane_conformance.probing import (
    VERB_PROBES,
    Probed,
    Probing,
    Untestable,
    awaited,
    error_texts,
    recalled,
)
from powerplane_conformance.session import ConformanceSession

__all__ = ["NegativeChecks", "start_probes"]


class NegativeChecks(Probing):
    """Unknown target, wrong credentials, closed port, silent server, no secret disclosed."""

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

    @proves("WRONG_CREDENTIALS_REJECTED", common=True)
    def test_wrong_credentials_rejected(self, check: CheckContext) -> None:
        s = check.subject
        try:
            probed = awaited(check, "wrong-credentials", s.key) \
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

    @proves("CLOSED_PORT_UNREACHABLE", common=True)
    def test_closed_port_unreachable(self, check: CheckContext) -> None:
        try:
            pointer = self._pointer(check)
            self._made_for_channel(check, "closed-port", pointer)
            probed = awaited(check, "closed-port", self._probe_key(check, pointer)) \
                or self._closed_port(check, pointer, verb_if_blind=True)
        except Untestable as why:
            check.not_tested(str(why))
        exc, observed = probed.error, probed.observed
        if not isinstance(exc, Unreachable):
            check.fail("Unreachable within the connect timeout",
                       f"{observed}: {describe_error(exc)}" if exc else observed)

    @proves("SILENT_SERVER_TIMEOUT", common=True)
    def test_silent_server_timeout(self, check: CheckContext) -> None:
        try:
            pointer = self._pointer(check)
            self._made_for_channel(check, "silent-server", pointer)
            probed = awaited(check, "silent-server", self._probe_key(check, pointer)) \
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
        wrong = recalled(check, ("wrong-credentials", s.key))
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
        unknown = recalled(check, ("unknown-target", s.key))
        derives = check.session.deployment.channels[s.channel].type.unknown_target is not None
        if unknown is None and (isinstance(s.target, str) or hints.unknown_target is not None
                                or derives):
            subject = self._unknown_subject(check)
            if subject is not None:
                unknown = self._read_unknown(check, subject)
        seen += [unknown] if unknown is not None else []
        try:
            pointer = self._pointer(check)
            closed = recalled(check, ("closed-port", self._probe_key(check, pointer)))
            if closed is None:
                closed = self._closed_port(check, pointer, verb_if_blind=False)
            seen.append(closed)
            silent = recalled(check, ("silent-server", self._probe_key(check, pointer)))
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
