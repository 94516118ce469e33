"""The conformance suite: one class of checks, importable and subclassable.

Run it against your channel by subclassing it in a test module of your own::

    from powerplane_conformance import ConformanceSuite

    class TestMyBmc(ConformanceSuite):
        conformance_subjects = ["node-1", "node-2"]     # optional: one test per node

        @pytest.fixture(scope="class")
        def conformance_target(self, my_bmc_peer):      # a path or a mapping
            return {"channels": {...}, "nodes": {...}, "conformance": {...}}

or run the packaged module with ``--powerplane-target FILE`` (what ``powerplane
conformance`` does). Each test proves one assertion (see
:mod:`powerplane_conformance.assertions`) and declares the verb it needs, or that it is
common to every channel.
"""

from __future__ import annotations

import asyncio
import os
import secrets as pysecrets
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from powerplane.capabilities import CapabilitySet, Verb
from powerplane.channel import BatchInvoker, Channel, PowerState, maybe_await, verb_method
from powerplane.config import parse_config
from powerplane.errors import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ConfigError,
    NotSupported,
    PowerplaneError,
    Unreachable,
)
from powerplane.plugins import Registry
from powerplane_conformance.checks import (
    ALL_SUBJECTS,
    CONTEXTS,
    META,
    SECRETS,
    XFAIL,
    CheckContext,
    spec_of,
)
from powerplane_conformance.checks import check as proves
from powerplane_conformance.fakes import HOST, SilentServer, closed_port
from powerplane_conformance.iowatch import IOWatch
from powerplane_conformance.loop import OuterTimeout
from powerplane_conformance.session import (
    END_STATE,
    START_STATE,
    ConformanceSession,
    Subject,
    describe_error,
)
from powerplane_conformance.settings import NegativeHints, load_target

__all__ = ["ConformanceSuite"]

VERBS3 = (Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON)
BOGUS_KEY = "powerplane_conformance_bogus"
UNKNOWN_SUFFIX = "-powerplane-conformance-unknown"


def _texts(exc: BaseException) -> list[str]:
    """Every text an error carries: message, repr, args, and its causes' messages."""
    out: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out += [str(cur), repr(cur), *map(str, cur.args)]
        cur = cur.__cause__ or cur.__context__
    return out


def _want_text(session: ConformanceSession, subject: Subject, want: PowerState) -> str:
    caps = session.caps(subject)
    if want is PowerState.OFF and isinstance(caps, CapabilitySet) and not caps.sees_power_off:
        return "no longer on (the channel declares it cannot see off)"
    return want.value


class ConformanceSuite:
    """Every conformance check. Subclass it as ``Test...`` to run it (see the module doc)."""

    conformance_subjects: ClassVar[Sequence[str] | None] = None
    """Subjects to parametrize over (``node`` or ``node@channel``); default: from the target
    file given with ``--powerplane-target``, else the target's first node."""

    # -- fixtures a subclass may override -----------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls, request: pytest.FixtureRequest) -> str | Path | Mapping[str, Any]:
        """The target: a target file path or target data (a mapping). Override to build one."""
        path = request.config.getoption("powerplane_target", None)
        if not path:
            pytest.skip("no conformance target: pass --powerplane-target FILE, or override "
                        "the conformance_target fixture")
        return str(path)

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_channel(cls, request: pytest.FixtureRequest) -> str | None:
        """Test only this channel (default: every channel of the target's nodes)."""
        value = request.config.getoption("powerplane_channel", None)
        return str(value) if value else None

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_registry(cls) -> Registry | None:
        """The plugin registry to resolve channel types with (None: the installed plugins)."""
        return None

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_session(
        cls,
        request: pytest.FixtureRequest,
        conformance_target: str | Path | Mapping[str, Any],
        conformance_channel: str | None,
        conformance_registry: Registry | None,
    ) -> Iterator[ConformanceSession]:
        """A started session: channels created, capabilities discovered, states recorded."""
        target = load_target(conformance_target, registry=conformance_registry)
        session = ConformanceSession(target, conformance_channel, conformance_registry)
        known = request.config.stash.setdefault(SECRETS, set())
        for name in target.deployment.channels:
            known.update(v for _, v in session.secrets(name))
        try:
            session.start()
        except BaseException:
            session.close()
            raise
        request.config.stash.setdefault(CONTEXTS, []).append(session)
        yield session
        session.close()

    @pytest.fixture
    def subject(self) -> str | None:
        """The subject id (``node@channel``); the plugin parametrizes it."""
        return None

    @pytest.fixture
    def check(
        self,
        request: pytest.FixtureRequest,
        conformance_session: ConformanceSession,
        subject: str | None,
    ) -> Iterator[CheckContext]:
        """The running check: gates it on the channel's claims and the target file."""
        spec = spec_of(request.function)
        if spec is None:
            raise TypeError(f"{request.function.__name__} is not declared with @check")
        session = conformance_session
        params = getattr(request.node, "callspec", None)
        verb: Verb | None = params.params.get("verb") if params is not None else None
        verb = verb or spec.verb
        subj = None if spec.per_channel or subject == ALL_SUBJECTS else session.subject(subject)
        item = request.node
        assert isinstance(item, pytest.Item)
        ctx = CheckContext(item, session, spec, subj, verb)
        channels = sorted(session.channels()) if subj is None else [subj.channel]
        meta = {
            "id": ctx.assertion.id,
            "text": ctx.assertion.text,
            "channel": ",".join(channels),
            "node": subj.node if subj else None,
            "verb": verb.value if verb else None,
        }
        item.stash[META] = meta
        item.user_properties += [("assertion", meta["id"]), ("verb", meta["verb"] or "common"),
                                 ("channel", meta["channel"]), ("node", meta["node"] or "*")]
        reason = session.settings.xfail.get(ctx.assertion.id)
        if reason is not None:
            item.stash[XFAIL] = reason
        if subj is not None:
            caps = session.caps(subj)
            if not isinstance(caps, CapabilitySet):
                if ctx.assertion.id != "CAPABILITIES_DISCOVERED":
                    ctx.not_tested(f"discovery failed on channel {subj.channel!r}: {caps}")
            elif spec.absent and verb is not None:
                if caps.advertises(verb):
                    ctx.skip(f"channel {subj.channel} advertises {verb.value}; this check "
                             "applies only to verbs it does not advertise")
            elif verb is not None and not caps.advertises(verb):
                ctx.skip(f"channel {subj.channel} does not advertise {verb.value}")
            if subj.key in session.terminated:
                ctx.not_tested(f"{subj.node} was terminated by an earlier check")
        if spec.destructive and not session.settings.allow_destructive:
            ctx.not_tested("allow_destructive is off in the target file")
        if verb is Verb.TERMINATE and not spec.absent and not session.settings.allow_terminate:
            ctx.not_tested("allow_terminate is off in the target file (terminate is never undone)")
        yield ctx
        if spec.destructive and subj is not None:
            try:
                session.restore(subj)
            except Exception:
                pass

    # -- discovery and config ------------------------------------------------------------------
    @proves("CAPABILITIES_DISCOVERED", common=True)
    def test_capabilities_discovered(self, check: CheckContext) -> None:
        caps = check.session.caps(check.subject)
        if not isinstance(caps, CapabilitySet):
            check.fail("a capability set", f"discovery failed: {caps}")

    @proves("CAPABILITIES_EXPECTED", common=True)
    def test_capabilities_expected(self, check: CheckContext) -> None:
        name = check.subject.channel
        expected = check.settings.expected_capabilities.get(name)
        if expected is None:
            check.not_tested(f"the target file gives no expected_capabilities for {name}")
        caps = check.caps
        if isinstance(expected, dict):
            want = [f"{v.value} ({expected[v]})" for v in Verb if v in expected]
            got = [f"{v.value} ({'graceful' if caps.is_graceful(v) else 'hard'})" for v in caps]
        else:
            want = [v.value for v in Verb if v in expected]
            got = [v.value for v in caps]
        if want != got:
            check.fail(", ".join(want) or "no verb", ", ".join(got) or "no verb")

    @proves("CONFIG_REJECTS_MALFORMED", common=True)
    def test_config_rejects_malformed(self, check: CheckContext) -> None:
        name = check.subject.channel
        raw = dict((check.session.deployment.raw or {}).get("channels", {}).get(name, {}))
        raw[BOGUS_KEY] = [1]
        doc = {"channels": {name: raw}}
        where = f"channels.{name}.{BOGUS_KEY}"
        try:
            parse_config(doc, registry=check.session.registry)
        except ConfigError as exc:
            paths = [p.path for p in exc.problems]
            if where not in paths:
                check.fail(f"a problem naming {where}", f"problems at {paths or 'no path'}")
            return
        check.fail(f"a ConfigError naming {where}", "the config was accepted")

    # -- readback --------------------------------------------------------------------------------
    @proves("READBACK_ANSWERS", common=True)
    def test_readback_answers(self, check: CheckContext) -> None:
        try:
            check.session.read(check.subject)
        except Exception as exc:
            check.fail("a reading (on, off or unknown)", describe_error(exc))

    @proves("BLIND_NEVER_OFF", common=True)
    def test_blind_never_off(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        if check.caps.sees_power_off:
            check.skip(f"channel {s.channel} declares it can see power off; this check applies "
                       "to channels that cannot")
        reading = session.read(s)
        if reading.state is PowerState.OFF:
            check.fail("never off", f"it read off ({reading.detail})")
        caps = check.caps
        if not (check.settings.allow_destructive and caps.advertises(Verb.SHUTDOWN)
                and caps.advertises(Verb.POWER_ON)):
            return  # no shutdown here: without power-on the suite could not undo it
        if session.ensure(s, PowerState.ON) is not None:
            return
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except Exception:
            return
        try:
            obs = session.wait_for(s, PowerState.OFF, full_window=True)
            if "off" in obs.states:
                check.fail("never off, even after shutdown", f"it read {obs.describe()}")
        finally:
            session.restore(s)

    # -- negative cases ---------------------------------------------------------------------------
    def _hints(self, check: CheckContext) -> NegativeHints:
        return check.settings.negative.get(check.subject.channel, NegativeHints())

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

    @proves("WRONG_CREDENTIALS_REJECTED", common=True)
    def test_wrong_credentials_rejected(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        key = self._hints(check).secret_key
        if key is None:
            check.not_tested(f"the target file does not name channel {s.channel}'s secret key "
                             f"(conformance.negative.{s.channel}.secret_key)")
        env, _ = self._canary(check)
        try:
            channel = session.fresh_channel(s, {key: {"env": env}})
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

    def _address(self, check: CheckContext, port: int) -> dict[str, Any]:
        hints = self._hints(check)
        assert hints.address_key is not None
        out: dict[str, Any] = {hints.address_key: hints.address_format.format(host=HOST, port=port)}
        if hints.port_key:
            out[hints.port_key] = port
        keys = [hints.timeout_key] if isinstance(hints.timeout_key, str) else hints.timeout_key
        for key in keys or []:
            out[key] = hints.timeout_s
        return out

    def _probe(self, check: CheckContext, overrides: dict[str, Any]) -> BaseException | None:
        """Read through a fresh channel built with ``overrides``; the error, or None."""
        s, session = check.subject, check.session
        bound = self._hints(check).timeout_s * 3 + 5
        try:
            channel = session.fresh_channel(s, overrides)
        except Exception as exc:
            return exc
        try:
            session.call(channel.read_power_state, s.target, timeout=bound)
        except Exception as exc:
            return exc
        finally:
            session.close_channel(channel)
        return None

    def _need_address(self, check: CheckContext) -> None:
        if self._hints(check).address_key is None:
            name = check.subject.channel
            check.not_tested(f"the target file does not name channel {name}'s address key "
                             f"(conformance.negative.{name}.address_key)")

    @proves("CLOSED_PORT_UNREACHABLE", common=True)
    def test_closed_port_unreachable(self, check: CheckContext) -> None:
        self._need_address(check)
        exc = self._probe(check, self._address(check, closed_port()))
        if not isinstance(exc, Unreachable):
            check.fail("Unreachable within the connect timeout",
                       describe_error(exc) if exc else "the read succeeded")

    @proves("SILENT_SERVER_TIMEOUT", common=True)
    def test_silent_server_timeout(self, check: CheckContext) -> None:
        self._need_address(check)
        with SilentServer() as server:
            exc = self._probe(check, self._address(check, server.port))
        if not isinstance(exc, ChannelTimeout):
            check.fail("ChannelTimeout within the channel's bound",
                       describe_error(exc) if exc else "the read succeeded")

    @proves("SECRET_NOT_DISCLOSED", common=True)
    def test_secret_not_disclosed(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        hints = self._hints(check)
        known = session.secrets(s.channel)
        if not known and hints.secret_key is None:
            check.not_tested(f"channel {s.channel} is configured with no secret, and the target "
                             f"file names no secret key (conformance.negative.{s.channel})")
        texts: list[tuple[str, str]] = []
        env = ""
        with IOWatch() as io:
            try:
                if hints.secret_key is not None:
                    env, canary = self._canary(check)
                    known.append(("a wrong secret", canary))
                    exc = self._probe(check, {hints.secret_key: {"env": env}})
                    texts += [("the wrong-credentials error", t)
                              for t in _texts(exc or Exception())]
                unknown = self._unknown_subject(check) if isinstance(s.target, str) or \
                    hints.unknown_target is not None else None
                if unknown is not None:
                    try:
                        session.read(unknown)
                    except Exception as exc2:
                        texts += [("the unknown-target error", t) for t in _texts(exc2)]
                if hints.address_key is not None:
                    exc = self._probe(check, self._address(check, closed_port()))
                    texts += [("the closed-port error", t) for t in _texts(exc or Exception())]
                name = s.channel
                raw = dict((session.deployment.raw or {}).get("channels", {}).get(name, {}))
                raw[BOGUS_KEY] = [1]
                try:
                    parse_config({"channels": {name: raw}}, registry=session.registry)
                except ConfigError as exc3:
                    texts += [("the config error", t) for t in _texts(exc3)]
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

    # -- verbs ------------------------------------------------------------------------------
    def _accepted(self, check: CheckContext, subject: Subject, verb: Verb, what: str = "") -> None:
        try:
            check.session.invoke(subject, verb)
        except Exception as exc:
            check.fail(f"{verb.value} accepted{what}", describe_error(exc))

    @proves("{VERB}_READBACK", verbs=VERBS3, destructive=True)
    def test_verb_readback(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        check.precondition(s, START_STATE[verb])
        start = time.monotonic()
        self._accepted(check, s, verb)
        want = END_STATE[verb]
        obs = session.wait_for(s, want)
        check.latency(time.monotonic() - start)
        if not obs.ok:
            check.fail(f"reads {_want_text(session, s, want)} within "
                       f"{check.settings.settle_timeout_s:g} s after {verb.value}",
                       obs.describe())

    @proves("POWER_ON_IDEMPOTENT", verb=Verb.POWER_ON, destructive=True)
    def test_power_on_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.ON)
        self._accepted(check, s, Verb.POWER_ON, " while on")
        obs = session.wait_for(s, PowerState.ON)
        if not obs.ok or "off" in obs.states:
            check.fail("still reads on", obs.describe())

    @proves("SHUTDOWN_IDEMPOTENT", verb=Verb.SHUTDOWN, destructive=True)
    def test_shutdown_idempotent(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.OFF)
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except (Unreachable, ChannelTimeout) as exc:
            if check.caps.sees_power_off:
                check.fail("shutdown accepted while off", describe_error(exc))
            # a channel that cannot see off cannot reach an off machine either: harmless
        except Exception as exc:
            check.fail("shutdown accepted while off", describe_error(exc))
        obs = session.wait_for(s, PowerState.OFF)
        if not obs.ok or "on" in obs.states:
            check.fail(f"still reads {_want_text(session, s, PowerState.OFF)}", obs.describe())

    @proves("READBACK_NOT_STALE", verb=Verb.SHUTDOWN, destructive=True)
    def test_readback_not_stale(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.ON)
        try:
            session.invoke(s, Verb.SHUTDOWN)
        except Exception as exc:
            check.not_tested(f"shutdown was not accepted (see SHUTDOWN_READBACK): "
                             f"{describe_error(exc)}")
        obs = session.wait_for(s, PowerState.OFF)
        if obs.ok:
            return
        fresh: Channel = session.fresh_channel(s)
        try:
            reading = session.read(s, fresh)
        except Exception as exc:
            check.not_tested(f"inconclusive: a fresh session could not read: {describe_error(exc)}")
        finally:
            session.close_channel(fresh)
        if session.accepts(s, PowerState.OFF)(reading):
            check.fail(f"reads {_want_text(session, s, PowerState.OFF)} after shutdown, as a "
                       f"fresh session to the device does (it reads {reading.state.value})",
                       f"this session still reads {obs.describe()}")
        check.not_tested("inconclusive: no session read the machine off after shutdown "
                         "(see SHUTDOWN_READBACK)")

    @proves("{VERB}_REPEATED", verbs=VERBS3, destructive=True)
    def test_verb_repeated(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        n = check.settings.repeat
        want = END_STATE[verb]
        for i in range(1, n + 1):
            check.precondition(s, START_STATE[verb])
            self._accepted(check, s, verb, f" in round {i} of {n}")
            obs = session.wait_for(s, want)
            if not obs.ok:
                check.fail(f"reads {_want_text(session, s, want)} after {verb.value} in every "
                           f"one of {n} rounds", f"round {i}: {obs.describe()}")

    @proves("{VERB}_CONCURRENT", verbs=VERBS3, destructive=True, per_channel=True)
    def test_verb_concurrent(self, check: CheckContext, verb: Verb) -> None:
        session = check.session
        groups: list[list[Subject]] = []
        advertised = False
        for subs in session.channels().values():
            able = [x for x in subs if isinstance(c := session.caps(x), CapabilitySet)
                    and c.advertises(verb)]
            advertised = advertised or bool(able)
            if len(able) >= 2:
                groups.append(able)
        if not advertised:
            check.skip(f"no channel of the target advertises {verb.value}")
        if not groups:
            check.not_tested(f"the target names fewer than two nodes on one channel that "
                             f"advertises {verb.value} (list more in conformance.nodes)")
        try:
            for subs in groups:
                for x in subs:
                    check.precondition(x, START_STATE[verb])
                self._concurrently(check, subs, verb)
        finally:
            for subs in groups:
                for x in subs:
                    session.restore(x)

    def _concurrently(self, check: CheckContext, subs: list[Subject], verb: Verb) -> None:
        session = check.session

        channel = session.channel_of(subs[0])
        method = verb_method(channel, verb)

        async def all_at_once() -> list[Any]:
            if isinstance(channel, BatchInvoker):  # what PowerHost.invoke_many uses then
                try:
                    return list(await maybe_await(channel.invoke_batch, verb,
                                                  [x.target for x in subs]))
                except Exception as exc:
                    return [exc] * len(subs)
            if method is None:
                return [ChannelError(f"the channel has no method {verb.method}()",
                                     channel=subs[0].channel)] * len(subs)
            calls = [maybe_await(method, x.target) for x in subs]
            return await asyncio.gather(*calls, return_exceptions=True)

        results = session.loop.run(all_at_once(), session.call_timeout)
        keys = ", ".join(x.key for x in subs)
        if len(results) != len(subs):
            check.fail(f"invoke_batch answers one outcome per target ({len(subs)})",
                       f"{len(results)} outcomes")
        errors = [f"{x.key}: {describe_error(r)}" for x, r in zip(subs, results, strict=True)
                  if isinstance(r, BaseException)]
        if errors:
            check.fail(f"{verb.value} accepted for each of {keys}", "; ".join(errors))
        want = END_STATE[verb]
        bad = []
        for x in subs:
            obs = session.wait_for(x, want)
            if not obs.ok:
                bad.append(f"{x.key}: {obs.describe()}")
        if bad:
            check.fail(f"each of {keys} reads {want.value}", "; ".join(bad))

    @proves("UNADVERTISED_REFUSED", verbs=tuple(Verb), absent=True, destructive=True)
    def test_unadvertised_refused(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        channel = session.channel_of(s)
        if verb_method(channel, verb) is None:
            return  # no method at all: nothing can be sent
        try:
            before = session.read(s).state
        except Exception:
            before = None
        with IOWatch() as io:
            try:
                result = session.invoke(s, verb)
            except NotSupported:
                result = NotSupported
            except Exception as exc:
                result = exc
        if result is not NotSupported:
            if isinstance(result, BaseException):
                check.fail("NotSupported, raised before any I/O", describe_error(result))
            check.fail("NotSupported, raised before any I/O",
                       f"the call was accepted ({result!r}): a no-op, or worse, for a verb "
                       "it does not advertise")
        if io.connects or io.argv:
            check.fail("NotSupported, raised before any I/O",
                       f"{len(io.connects)} connection(s) and {len(io.argv)} process(es) "
                       "before refusing")
        try:
            after = session.read(s).state
        except Exception:
            after = None
        if before is not None and after is not None and before is not after:
            check.fail("the machine untouched",
                       f"it read {before.value} before and {after.value} after")

    # -- the end --------------------------------------------------------------------------------
    @proves("STATE_RESTORED", common=True)
    def test_state_restored(self, check: CheckContext) -> None:
        s, session = check.subject, check.session
        original = session.original.get(s.key)
        if original is None or original is PowerState.UNKNOWN:
            check.not_tested(f"the power state of {s.node} at the start was unknown")
        if session.accepts(s, original)(session.read(s)):
            return
        verb = Verb.POWER_ON if original is PowerState.ON else Verb.SHUTDOWN
        if not check.caps.advertises(verb):
            check.not_tested(f"{s.node} is no longer {original.value} and channel {s.channel} "
                             f"cannot {verb.value}: a person must restore it")
        why = session.restore(s)
        if why is not None:
            check.fail(f"reads {original.value}, as at the start", why)

    @proves("{VERB}_READBACK", verbs=(Verb.TERMINATE,), destructive=True)
    def test_terminate_readback(self, check: CheckContext, verb: Verb) -> None:
        s, session = check.subject, check.session
        check.precondition(s, PowerState.ON)
        session.terminated.add(s.key)
        self._accepted(check, s, verb)
        obs = session.wait_for(s, PowerState.OFF)
        if not obs.ok:
            check.fail(f"reads {_want_text(session, s, PowerState.OFF)} after terminate",
                       obs.describe())
