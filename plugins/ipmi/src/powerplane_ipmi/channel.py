"""The ``ipmi`` channel: chassis power of a fleet's BMCs over IPMI 2.0 / RMCP+, in process.

Sessions come from pyghmi's RMCP+ client (``pyghmi.ipmi.private.session.Session``); no
``ipmitool`` or other child process is ever started, so the password, the K_g key and the
user name are in no argv, no child's environment and no file.

Opening a session, per BMC (the node's target):

1. Get Channel Authentication Capabilities, sessionless, on a connected UDP socket: an ICMP
   port unreachable is :class:`~powerplane.errors.Unreachable`, silence is
   :class:`~powerplane.errors.ChannelTimeout`, an answer that is not IPMI (or truncated) is
   :class:`~powerplane.errors.ProtocolError`. A BMC without IPMI 2.0 is refused unless
   ``allow_insecure`` (IPMI 1.5 has no confidentiality).
2. Get Channel Cipher Suites, sessionless, every page: the suites the BMC offers. Suite 17
   where offered, else 3; a configured ``cipher_suite`` must be offered; suite 0 is refused,
   naming the offered suites. The choice is pinned in pyghmi (whose own logic tries 17, then
   3, and would fall back silently).
3. RMCP+ open session, RAKP 1-4 with the configured privilege (name-only lookup), then Set
   Session Privilege Level: pyghmi, started with a logon callback and its event loop turned
   by this channel until the callback or the bound (:meth:`IpmiChannel._login`).
4. Privilege is read back, not assumed, the first time capabilities or a verb need it (a
   state read does not): Get Session Info (the session's operating privilege and user id;
   Set Session Privilege Level "no change" where the BMC lacks it) and Get User Access (the
   account's own limit on this channel). ``ipmi_sim`` grants any role a client asks for on a
   name-only lookup, so a ``user`` account gets an operator session there; the account's
   limit tells. Chassis verbs are advertised only when both reach operator.

Bounds: every call (a state read, capabilities, a verb) returns within ``timeouts.connect_s
+ timeouts.read_s``: steps 1 to 3 together within ``connect_s``, each command within
``read_s`` and all of them within what is left (a ``graceful-then-force`` wait adds
``shutdown_wait_s``). pyghmi's own retry schedule (re-login included, which runs on for
ever against a BMC that answers Open Session and ignores RAKP 1) is set to end by the bound,
and a watchdog abandons the session at the bound whatever pyghmi does, so no thread stays
blocked in pyghmi. After a silence one sessionless request (:data:`DIAGNOSE_S`, kept from
the bound) tells what the port does now: ICMP port unreachable (``Unreachable``), answers
that are not IPMI (``ProtocolError``), still answering or silent (``ChannelTimeout``, naming
the step that went unanswered).

A session is reused while alive (used within :data:`IDLE_REUSE_S`), one per BMC; calls to
one BMC are serialised on it; it is closed (Close Session, answered, at most ``min(read_s,
1)`` s) on ``close()`` and after any error. Reads are retried once on a fresh session, within
the same bound, when a reused one turns out dead (the BMC still answers sessionless).

A chassis control command goes out once: it is sent on a session a read has just proven
alive, through :func:`powerplane.about_to_send`, with pyghmi's retransmission and re-login
turned off for that one request. No answer in time is
:class:`~powerplane.errors.OutcomeUnknown`, never retried.

Capabilities: IPMI advertises no per-command list. The channel reads whether the BMC is a
chassis device (Get Device ID, "additional device support" bit 7), whether Get Chassis
Status answers, and the privilege as above; the verbs and how each is carried rest on the
config (``shutdown``, ``reboot``), so the set is ``Source.DECLARED``.

Boot marker: none. IPMI offers no per-boot value: Get System Restart Cause (chassis 07h)
names the cause of the last restart ("chassis control command", "power button"), which is
the same on two consecutive restarts for the same cause, so it cannot tell that a new boot
happened; the POH counter counts hours. This channel does not implement ``boot_marker``.

The sessionless wire protocol is :mod:`powerplane_ipmi.wire`; pyghmi's session, with the
private names it relies on and why, :mod:`powerplane_ipmi.session`.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from powerplane import (
    Acceptance,
    CapabilitySet,
    ChannelError,
    Reading,
    Source,
    Verb,
    about_to_send,
    require,
)
from powerplane_ipmi.config import (
    BmcAddress,
    IpmiConfig,
    RebootMode,
    ShutdownMode,
    parse_target,
)
from powerplane_ipmi.errors import (
    CompletionCodeError,
    Malformed,
    NoAnswer,
    PolicyRefused,
    map_error,
)
from powerplane_ipmi.session import (
    CONSTRUCT_LOCK,
    DIAGNOSE_S,
    STAGE_WORDS,
    STAGES,
    WATCHDOG,
    Budget,
    Live,
    Privilege,
    abandon,
    chassis_power,
    command,
    diagnosed,
    forget_login,
    raw,
    session_class,
)
from powerplane_ipmi.wire import BmcFacts, choose_suite, probe, sessionless

__all__ = [
    "IDLE_REUSE_S",
    "BmcFacts",
    "IpmiChannel",
    "chassis_power",
    "forget_login",
    "sessionless",
]

log = logging.getLogger("powerplane_ipmi")

IDLE_REUSE_S = 20.0
"""A session idle longer than this is closed and a new one opened (BMCs drop idle sessions
after 30 to 60 s; pyghmi's keepalives are off, so the channel does not rely on them)."""

# Chassis Control (netfn chassis 00h, command 02h) data byte, IPMI 2.0 table 28-4
POWER_DOWN = 0x00
POWER_UP = 0x01
HARD_RESET = 0x03
SOFT_OFF = 0x05

_CONTROL_WORDS = {POWER_DOWN: "power down", POWER_UP: "power up", HARD_RESET: "hard reset",
                  SOFT_OFF: "soft-off (ACPI)"}
_PRIV_NAMES = {1: "callback", 2: "user", 3: "operator", 4: "administrator", 5: "OEM"}

T = TypeVar("T")




class IpmiChannel:
    """One ``ipmi`` channel: a set of credentials, and one session per BMC in use."""

    def __init__(self, name: str, config: IpmiConfig) -> None:
        self.name = name
        self.config = config
        self._locks: dict[str, threading.Lock] = {}
        self._live: dict[str, Live] = {}
        self._known: dict[str, CapabilitySet] = {}
        self._guard = threading.Lock()
        self._tls = threading.local()
        self._closed = False
        self.sessions_opened = 0
        """Sessions this channel opened (for tests and benchmarks)."""
        self.sessions_closed = 0
        """Sessions this channel closed."""

    # -- helpers -----------------------------------------------------------------------------
    def _secrets(self) -> list[str]:
        out = [self.config.username]
        for ref in (self.config.password, self.config.kg):
            if ref is not None:
                try:
                    out.append(ref.reveal())
                except Exception:
                    pass
        return out

    def _err(self, exc: BaseException, target: object, *, sent: bool = False,
             stage: str = "command") -> ChannelError:
        return map_error(exc, channel=self.name, target=target, sent=sent, stage=stage,
                         secrets=self._secrets())

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def endpoint(self, target: str) -> str:
        """The BMC a call reaches: its address, so limits are per BMC."""
        return str(parse_target(target))

    # -- sessions ------------------------------------------------------------------------------
    def _budget(self) -> Budget:
        """The bound of the call this thread is in (one is opened by each public method)."""
        budget: Budget | None = getattr(self._tls, "budget", None)
        if budget is None:
            raise AssertionError("a channel call without a budget")
        return budget

    def _bounded(self, fn: Callable[[], T]) -> T:
        """Run one public call within ``timeouts.connect_s + timeouts.read_s`` (nested calls
        share the outer bound)."""
        if getattr(self._tls, "budget", None) is not None:
            return fn()
        self._tls.budget = Budget(self.config.timeouts.total_s)
        try:
            return fn()
        finally:
            self._tls.budget = None

    def _read_bound(self) -> float:
        """Seconds one command may take now: ``read_s``, or what is left of the call."""
        return min(self.config.timeouts.read_s, self._budget().left())

    def _open(self, addr: BmcAddress) -> Live:
        cfg = self.config
        bound = min(cfg.timeouts.connect_s, self._budget().left())
        deadline = time.monotonic() + bound
        try:
            facts = probe(addr, max(bound - DIAGNOSE_S, 0.05))
        except Exception as exc:
            raise self._err(exc, addr, stage="probe") from None
        try:
            suite = choose_suite(cfg, facts)
        except PolicyRefused as exc:
            raise self._err(exc, addr) from None
        if not facts.ipmi20:
            log.warning("channel %r, target %s: IPMI 1.5 session (allow_insecure): no "
                        "confidentiality, MD5 authentication; anyone on the path can read and "
                        "replay it", self.name, addr)
        cls = session_class(suite, cfg.allow_insecure)
        try:
            sess = self._login(cls, addr, deadline)
        except Exception as exc:
            # a failed login stays in pyghmi's table under these credentials and would be
            # handed back, dead, to the next attempt
            table = cls.initting_sessions
            for key in [k for k in list(table) if (k[0], k[1], k[3]) ==
                        (addr.host, cfg.username, addr.port)]:
                table.pop(key, None)
            raise self._err(exc, addr, stage="login") from None
        self.sessions_opened += 1
        forget_login(sess)
        sess.logontries = 0  # reads: never re-login
        used = 17 if getattr(sess, "currhashlen", 0) == 16 else 3
        if suite is not None and used != suite:
            self._close_session(sess)
            raise self._err(PolicyRefused(f"the session uses cipher suite {used}, not the "
                                          f"pinned {suite}"), addr)
        return Live(sess, used)

    def _login(self, cls: type[Any], addr: BmcAddress, deadline: float) -> Any:
        """RMCP+ open session and RAKP 1-4 (pyghmi, asynchronous), ended by ``deadline``.

        pyghmi's login is started with a logon callback and its event loop is turned here,
        slice by slice, until the callback says how it went or the bound passes; the
        watchdog ends any wait pyghmi makes inside a step (Set Session Privilege Level runs
        synchronously inside the loop).
        """
        cfg = self.config
        outcome: dict[str, Any] = {}

        def onlogon(result: Any) -> None:
            outcome.setdefault("result", result)

        password = cfg.password.reveal()
        kg = cfg.kg.reveal() if cfg.kg is not None else None
        try:
            # one construction at a time in the process: pyghmi routes a BMC's answers by
            # (BMC address, local port) and gives a new session a socket no other session
            # to that BMC uses only once that session's first request has gone out, which
            # the constructor does; two built at once could share a socket, and one would
            # lose its answers to the other and log in again (seconds)
            with CONSTRUCT_LOCK:
                sess = cls(addr.host, cfg.username, password, port=addr.port, kg=kg,
                           privlevel=cfg.privilege.level, keepalive=False, onlogon=onlogon)
        finally:
            del password, kg
        wait = deadline - DIAGNOSE_S - time.monotonic()
        handle, fired = WATCHDOG.arm(sess, wait)
        furthest = 0
        fault: BaseException | None = None
        try:
            while "result" not in outcome and not fired[0]:
                furthest = max(furthest, STAGES.get(getattr(sess, "sessioncontext", None), 0))
                left = deadline - DIAGNOSE_S - time.monotonic()
                if left <= 0:
                    break
                try:
                    cls.wait_for_rsp(timeout=min(left, 0.05))
                except Exception as exc:
                    fault = exc
                    break
        finally:
            WATCHDOG.disarm(handle)
        result = outcome.get("result")
        if isinstance(result, dict) and "error" not in result and sess.logged:
            return sess
        if isinstance(result, dict) and "error" in result and not fired[0]:
            from pyghmi.exceptions import IpmiException

            abandon(sess)
            raise IpmiException(str(result["error"] or "the BMC refused the session"))
        abandon(sess)
        if fault is not None and not fired[0] and \
                type(fault).__module__.split(".")[0] != "pyghmi":
            raise Malformed("session setup: the BMC's answer could not be read (truncated or "
                            "corrupted)") from None
        answered, missing = STAGE_WORDS[min(furthest, len(STAGE_WORDS) - 1)]
        told = (f"session setup: the BMC answered {answered} but not {missing} within "
                f"{cfg.timeouts.connect_s:g} s (timeouts.connect_s)")
        raise NoAnswer(f"{told}; {diagnosed(addr, told)}")

    def _privilege(self, live: Live, addr: BmcAddress) -> Privilege:
        """The session's privilege, read back once per session (Get Device ID, Get Session
        Info or Set Session Privilege Level "no change", Get User Access)."""
        if live.privilege is None:
            live.privilege = self._readback_privilege(live.session, addr)
        return live.privilege

    def _readback_privilege(self, sess: Any, addr: BmcAddress) -> Privilege:
        def ask(netfn: int, cmd: int, data: bytes = b"", what: str = "") -> bytes:
            return raw(sess, addr, netfn, cmd, self._read_bound(), data, what)

        try:
            device = ask(0x06, 0x01, what="Get Device ID")
            chassis_device = len(device) > 5 and bool(device[5] & 0x80)
            user_id: int | None = None
            channel = 0x0E
            try:
                info = ask(0x06, 0x3D, b"\x00", what="Get Session Info")
                if len(info) < 5:
                    raise PolicyRefused("Get Session Info answered too little data")
                granted = info[4] & 0x0F
                user_id = info[3] & 0x3F
                if len(info) > 5:
                    channel = info[5] & 0x0F
                via = "Get Session Info"
            except CompletionCodeError as exc:
                if exc.code != 0xC1:
                    raise
                cur = ask(0x06, 0x3B, b"\x00", what="Set Session Privilege Level")
                granted = cur[0] & 0x0F if cur else 0
                via = ("Set Session Privilege Level, no change (the BMC does not implement "
                       "Get Session Info)")
            limit: int | None = None
            if user_id:
                try:
                    acc = ask(0x06, 0x44, bytes([channel, user_id]), what="Get User Access")
                    limit = acc[3] & 0x0F if len(acc) > 3 else None
                    via += "; account limit from Get User Access"
                except CompletionCodeError as exc:
                    if exc.code == 0xD4:
                        limit = 2  # not even allowed to read its own limit: below operator
                    elif exc.code != 0xC1:
                        raise
            return Privilege(granted, limit, via, chassis_device)
        except ChannelError:
            raise
        except Exception as exc:
            raise self._err(exc, addr) from None

    def _close_session(self, sess: Any) -> None:
        """Close Session (answered, so the BMC freed the slot; at most ``min(read_s, 1)`` s),
        then pyghmi's cleanup."""
        try:
            if getattr(sess, "logged", 0) and not getattr(sess, "broken", False):
                sid = struct.unpack("4B", struct.pack("<I", sess.sessionid))
                bound = min(self.config.timeouts.read_s, 1.0) + DIAGNOSE_S
                handle, _ = WATCHDOG.arm(sess, bound)
                try:
                    sess.timeout = bound - DIAGNOSE_S
                    sess.maxtimeout = sess.timeout + 0.5
                    sess.logontries = 0
                    sess.raw_command(netfn=0x06, command=0x3C, data=list(sid))
                finally:
                    WATCHDOG.disarm(handle)
        except Exception:
            pass
        finally:
            abandon(sess)
            self.sessions_closed += 1

    def _drop(self, key: str) -> None:
        live = self._live.pop(key, None)
        if live is not None:
            self._close_session(live.session)

    def _session(self, addr: BmcAddress) -> tuple[Live, bool]:
        """(session, fresh) for ``addr``: the live one if still usable, else a new one."""
        key = str(addr)
        live = self._live.get(key)
        if live is not None:
            sess = live.session
            idle = time.monotonic() - live.last_used
            if getattr(sess, "broken", False) or not getattr(sess, "logged", 0) \
                    or idle > IDLE_REUSE_S:
                self._drop(key)
                live = None
        if live is not None:
            return live, False
        if self._closed:
            raise ChannelError("the channel is closed", channel=self.name, target=addr)
        live = self._open(addr)
        self._live[key] = live
        return live, True

    def _call(self, target: str, fn: Callable[[Live, BmcAddress], T]) -> T:
        """Run ``fn`` on the BMC's session; on failure close it; a dead reused one is replaced
        once, within the call's bound (``fn`` must be a read, or begin with one, for that
        retry to be safe)."""
        addr = parse_target(target)
        key = str(addr)
        with self._lock(key):
            for attempt in (0, 1):
                live, fresh = self._session(addr)
                try:
                    out = fn(live, addr)
                except _DeadSession as dead:
                    self._drop(key)
                    if fresh or attempt:
                        raise self._err(dead.cause, addr) from None
                    continue
                except BaseException:
                    self._drop(key)
                    raise
                live.last_used = time.monotonic()
                return out
        raise AssertionError("unreachable")

    # -- reads -----------------------------------------------------------------------------------
    def _status(self, live: Live, addr: BmcAddress) -> bool:
        """Get Chassis Status on ``live``; a session that died (the BMC still answers
        sessionless requests) raises :class:`_DeadSession`."""
        try:
            return chassis_power(raw(live.session, addr, 0x00, 0x01, self._read_bound(),
                                      what="Get Chassis Status"))
        except NoAnswer as exc:
            if exc.alive:
                raise _DeadSession(exc) from None
            raise self._err(exc, addr) from None
        except ChannelError:
            raise
        except Exception as exc:
            raise self._err(exc, addr) from None

    def capabilities(self, target: str) -> CapabilitySet:
        """What this BMC allows this account: chassis verbs only at operator or above."""

        def read(live: Live, addr: BmcAddress) -> CapabilitySet:
            self._status(live, addr)
            caps = self._caps(live, addr)
            self._known[str(addr)] = caps
            return caps

        return self._bounded(lambda: self._call(target, read))

    def _caps(self, live: Live, addr: BmcAddress) -> CapabilitySet:
        cfg = self.config
        name = _PRIV_NAMES.get
        got = self._privilege(live, addr)
        seen = (f"privilege {name(got.granted, str(got.granted))} granted ({got.via})"
                + (f", account limit {name(got.limit, str(got.limit))}"
                   if got.limit is not None else ", account limit not readable")
                + f"; cipher suite {live.suite}")
        why: str | None = None
        if not got.chassis_device:
            why = ("the BMC does not declare itself a chassis device (Get Device ID, additional "
                   "device support bit 7)")
        elif got.granted < 3:
            why = (f"the session was granted {name(got.granted, str(got.granted))} privilege, "
                   "below operator, which chassis control needs: use an account with operator "
                   "privilege and privilege: operator")
        elif got.limit is not None and got.limit < 3:
            why = (f"the account's privilege limit is {name(got.limit, str(got.limit))} (Get "
                   f"User Access), below operator, although the BMC granted "
                   f"{name(got.granted, str(got.granted))} to the session: chassis control "
                   "is not relied on; use an account with operator privilege")
        if why is not None:
            return CapabilitySet.of(
                source=Source.DISCOVERED, detail=f"{why}; {seen}",
                withheld=dict.fromkeys((Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON), why))
        graceful: list[Verb] = []
        hard: list[Verb] = [Verb.POWER_ON]
        (graceful if cfg.shutdown is not ShutdownMode.FORCE else hard).append(Verb.SHUTDOWN)
        (graceful if cfg.reboot is RebootMode.GRACEFUL_THEN_FORCE else hard).append(Verb.REBOOT)
        detail = (f"chassis control: {seen}; IPMI advertises no per-command list, so how each "
                  f"verb is carried rests on the config (shutdown: {cfg.shutdown.value}, "
                  f"reboot: {cfg.reboot.value})")
        return CapabilitySet.of(graceful, hard, source=Source.DECLARED, detail=detail)

    def read_power_state(self, target: str) -> Reading:
        """Get Chassis Status: on or off; unknown with the reason when the BMC does not answer."""

        def read(live: Live, addr: BmcAddress) -> Reading:
            on = self._status(live, addr)
            return Reading.on("Get Chassis Status") if on else Reading.off("Get Chassis Status")

        # a BMC that does not answer raises (ChannelTimeout, Unreachable): the host reads
        # that as unknown with the reason, and the CLI names the error; never off
        return self._bounded(lambda: self._call(target, read))

    # -- verbs -------------------------------------------------------------------------------------
    def _require(self, target: str, verb: Verb) -> BmcAddress:
        """NotSupported before any I/O, from the set last discovered for this BMC."""
        addr = parse_target(target)
        known = self._known.get(str(addr))
        if known is None:
            known = self.capabilities(addr)
        require(known, verb, self.name)
        return addr

    def _send_control(self, live: Live, addr: BmcAddress, code: int) -> None:
        """Chassis Control ``code``, once: through about_to_send, no retransmission."""
        sess = live.session
        bound = self._read_bound()
        words = _CONTROL_WORDS.get(code, f"{code:#x}")
        if bound - DIAGNOSE_S <= 0.05:
            raise self._err(NoAnswer(f"chassis {words}: not sent, the call's bound "
                                     f"({self._budget().total:g} s) is spent"), addr)
        about_to_send()
        try:
            resp = command(sess, addr, 0x00, 0x02, bytes([code]), f"chassis {words}", bound,
                            once=True)
        except Exception as exc:
            raise self._err(exc, addr, sent=True) from None
        if int(resp.get("code", 0)):
            raise self._err(CompletionCodeError(f"chassis {words}", int(resp["code"])),
                            addr, sent=True)

    def _verb(self, target: str, verb: Verb,
              plan: Callable[[Live, BmcAddress], str]) -> Acceptance:

        def run(live: Live, addr: BmcAddress) -> Acceptance:
            caps = self._caps(live, addr)
            require(caps, verb, self.name)
            self._status(live, addr)  # proves the session alive before anything is sent
            return Acceptance(plan(live, addr))

        def whole() -> Acceptance:
            self._require(target, verb)
            return self._call(target, run)

        return self._bounded(whole)

    def power_on(self, target: str) -> Acceptance:
        """Chassis power up (01h)."""

        def plan(live: Live, addr: BmcAddress) -> str:
            self._send_control(live, addr, POWER_UP)
            return "chassis power up sent"

        result: Acceptance = self._verb(target, Verb.POWER_ON, plan)
        return result

    def shutdown(self, target: str) -> Acceptance:
        """Soft-off (graceful), power down (force), or soft-off then power down if needed."""
        mode = self.config.shutdown

        def plan(live: Live, addr: BmcAddress) -> str:
            if mode is ShutdownMode.FORCE:
                self._send_control(live, addr, POWER_DOWN)
                return "chassis power down sent"
            self._send_control(live, addr, SOFT_OFF)
            if mode is ShutdownMode.GRACEFUL:
                return "soft-off (ACPI) sent; the OS decides when power goes"
            return self._force_if_needed(live, addr)

        result: Acceptance = self._verb(target, Verb.SHUTDOWN, plan)
        return result

    def _force_if_needed(self, live: Live, addr: BmcAddress) -> str:
        cfg = self.config
        self._budget().extend(cfg.shutdown_wait_s)
        deadline = time.monotonic() + cfg.shutdown_wait_s
        while time.monotonic() < deadline:
            time.sleep(min(cfg.poll_interval_s, max(0.0, deadline - time.monotonic())))
            if not self._status_sent(live, addr):
                return "soft-off (ACPI) sent; read off"
        self._send_control(live, addr, POWER_DOWN)
        return (f"soft-off did not read off within {cfg.shutdown_wait_s:g} s; "
                "chassis power down sent")

    def _status_sent(self, live: Live, addr: BmcAddress) -> bool:
        """A status read after a command left: a failure means the outcome is unknown."""
        try:
            return self._status(live, addr)
        except _DeadSession as dead:
            raise self._err(dead.cause, addr, sent=True) from None
        except ChannelError as exc:
            raise self._err(RuntimeError(exc.message), addr, sent=True) from None

    def reboot(self, target: str) -> Acceptance:
        """Hard reset (force), or soft-off, wait, power down if needed, power up."""
        mode = self.config.reboot

        def plan(live: Live, addr: BmcAddress) -> str:
            if mode is RebootMode.FORCE:
                self._send_control(live, addr, HARD_RESET)
                return "chassis hard reset sent"
            was_on = self._status(live, addr)
            note = "the chassis read off; " if not was_on else ""
            if was_on:
                self._send_control(live, addr, SOFT_OFF)
                note = self._force_if_needed(live, addr) + "; "
            self._send_control(live, addr, POWER_UP)
            return note + "chassis power up sent"

        result: Acceptance = self._verb(target, Verb.REBOOT, plan)
        return result

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close every session (Close Session, answered, at most ``min(read_s, 1)`` s each)
        and refuse new ones."""
        self._closed = True
        for key in list(self._live):
            with self._lock(key):
                self._drop(key)

    def open_sessions(self) -> int:
        """How many sessions this channel holds open now."""
        return len(self._live)


class _DeadSession(Exception):
    """A reused session did not answer a read: replace it (reads only)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause

