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

pyghmi's private names, and why. pyghmi's public client (``pyghmi.ipmi.command.Command``)
chooses the cipher suite itself (17, then 3, falling back silently), takes no bound on a
login (its re-login can run on for ever), turns its own event loop, and accepts IPMI 1.5
where a BMC offers only that; this channel can accept none of it. So the session is
``pyghmi.ipmi.private.session.Session``, subclassed per suite and ``allow_insecure``
(:func:`_session_class`: ``_open_rmcpplus_request`` pins the suite, ``_got_rakp2`` answers
a RAKP 2 that did not verify with RAKP 3 so the BMC frees the slot, through
``send_payload`` and ``constants.payload_types``, ``_get_session_challenge`` refuses IPMI
1.5, each telling ``onlogon``); its login is turned through ``wait_for_rsp`` with a logon
callback while ``sessioncontext`` tells the step reached; each command is bounded through
its ``timeout``, ``maxtimeout`` and ``logontries`` attributes and abandoned through
``logged`` and ``logout``; the suite used is read from ``currhashlen``; its class-wide table
of logins in progress (``initting_sessions``) is cleaned (:func:`forget_login`); and the
module's ``_io_wait`` is wrapped to wake every :data:`WAKE_SLICE_S` (:func:`_bound_waits`:
process-wide, so every pyghmi session in the process waits in slices, which changes no
outcome, only how soon an answer already queued is seen). pyghmi is pinned to
``>=1.6.19,<1.7`` (the range tested) in this distribution's ``pyproject.toml``, and
``tests/test_pyghmi_shape.py`` fails on a pyghmi whose names or signatures differ.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    PortClosed,
    map_error,
)

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


# -- sessionless requests (IPMI 1.5 framing, authentication type none) --------------------------
def _checksum(data: bytes) -> int:
    return (-sum(data)) & 0xFF


def _request(netfn: int, cmd: int, data: bytes, seq: int) -> bytes:
    head = bytes([0x20, netfn << 2])
    body = bytes([0x81, (seq & 0x3F) << 2, cmd]) + data
    msg = head + bytes([_checksum(head)]) + body + bytes([_checksum(body)])
    return b"\x06\x00\xff\x07" + b"\x00" + b"\x00" * 8 + bytes([len(msg)]) + msg


def _response(packet: bytes, cmd: int) -> tuple[int, bytes] | None:
    """(completion code, data) of a sessionless answer to ``cmd``; None if it is not one.

    Raises :class:`Malformed` for a datagram that is not RMCP at all, or RMCP/IPMI framing
    too short for what it says it holds (a truncated answer).
    """
    if len(packet) < 4 or packet[:4] != b"\x06\x00\xff\x07":
        raise Malformed(f"the BMC's port answered {len(packet)} bytes that are not RMCP/IPMI "
                        "(no RMCP header): something other than a BMC answers there, or the "
                        "answers are corrupted")
    if len(packet) > 16 and packet[4] == 0x06:  # RMCP+ framing (pyghmi's simulator answers so)
        length = struct.unpack("<H", packet[14:16])[0]
        msg = packet[16:16 + length]
        short = len(msg) < length
    elif len(packet) > 14:
        msg = packet[14:14 + packet[13]]
        short = len(msg) < packet[13]
    else:
        raise Malformed(f"the BMC answered a truncated IPMI message ({len(packet)} bytes, "
                        "shorter than its own header)")
    if short or len(msg) < 8:
        raise Malformed(f"the BMC answered a truncated IPMI message ({len(packet)} bytes, "
                        "shorter than the length it declares)")
    if msg[5] != cmd:
        return None  # a late answer to another request
    return msg[6], bytes(msg[7:-1])


def sessionless(addr: BmcAddress, netfn: int, cmd: int, data: bytes, timeout: float,
                tries: int = 2) -> tuple[int, bytes]:
    """Send one sessionless request and return (completion code, data).

    On a connected UDP socket, so an ICMP port unreachable raises ``ConnectionRefusedError``;
    raises :class:`Malformed` when what came back is not a readable IPMI answer, and
    :class:`NoAnswer` when nothing came within ``timeout`` over ``tries`` sends (the request
    is a read, safe to repeat).
    """
    family = socket.AF_INET6 if ":" in addr.host else socket.AF_INET
    info = socket.getaddrinfo(addr.host, addr.port, family, socket.SOCK_DGRAM)
    with socket.socket(info[0][0], socket.SOCK_DGRAM) as sock:
        sock.connect(info[0][4])
        deadline = time.monotonic() + timeout
        for attempt in range(tries):
            sock.send(_request(netfn, cmd, data, seq=attempt + 1))
            slot_end = time.monotonic() + timeout / tries
            while True:
                left = min(slot_end, deadline) - time.monotonic()
                if left <= 0:
                    break
                sock.settimeout(left)
                try:
                    packet = sock.recv(1024)
                except TimeoutError:
                    break
                got = _response(packet, cmd)
                if got is not None:
                    return got
    raise NoAnswer(f"no answer from the BMC within {timeout:g} s (timeouts.connect_s): "
                   "the UDP port is silent")


def diagnose(addr: BmcAddress, seconds: float) -> str:
    """After a silence inside a session: what the BMC's port does now, in words.

    One sessionless Get Channel Authentication Capabilities within ``seconds``. Raises
    :class:`PortClosed` (ICMP port unreachable) or :class:`Malformed` (the answer is not
    IPMI); returns words for an answer or a silence.
    """
    try:
        sessionless(addr, 0x06, 0x38, bytes([0x8E, 0x04]), max(seconds, 0.01), tries=1)
    except ConnectionRefusedError:
        raise PortClosed("the BMC's UDP port now answers ICMP port unreachable (nothing "
                         "listens there any more)") from None
    except NoAnswer:
        return "the BMC's UDP port is silent now, to sessionless requests too"
    except Malformed:
        raise
    except OSError as exc:
        raise PortClosed(f"the BMC cannot be reached now ({exc.strerror or 'network error'})"
                         ) from None
    return "the BMC still answers sessionless requests"


@dataclass(frozen=True)
class BmcFacts:
    """What the sessionless probe learnt about one BMC."""

    ipmi20: bool
    """Whether the BMC speaks IPMI 2.0 / RMCP+ (Get Channel Authentication Capabilities)."""
    suites: tuple[int, ...] | None
    """The cipher suites it offers (Get Channel Cipher Suites); None when it does not say."""


def probe(addr: BmcAddress, timeout: float) -> BmcFacts:
    """Get Channel Authentication Capabilities and Get Channel Cipher Suites, sessionless.

    Every request of the probe together within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout

    def left() -> float:
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise NoAnswer(f"the sessionless probe did not finish within {timeout:g} s "
                           "(timeouts.connect_s)")
        return rest

    # 0x8E: request IPMI 2.0 extended data, channel E (this one); privilege: administrator
    code, data = sessionless(addr, 0x06, 0x38, bytes([0x8E, 0x04]), left())
    if code == 0xCC:  # a 1.5-only BMC may reject the 2.0 bit
        code, data = sessionless(addr, 0x06, 0x38, bytes([0x0E, 0x04]), left())
    if code != 0 or len(data) < 4:
        raise CompletionCodeError("Get Channel Authentication Capabilities", code or 0xFF)
    ipmi20 = bool(data[1] & 0x80) and bool(data[3] & 0x02)
    return BmcFacts(ipmi20, _cipher_suites(addr, left) if ipmi20 else None)


def _cipher_suites(addr: BmcAddress, left: Callable[[], float]) -> tuple[int, ...] | None:
    """Every page of Get Channel Cipher Suites (App 54h), records parsed (table 22-19)."""
    raw = b""
    for index in range(64):
        # channel E (this one), payload type 0 (IPMI), list by cipher suite + page index
        code, data = sessionless(addr, 0x06, 0x54, bytes([0x0E, 0x00, 0x80 | index]), left())
        if code != 0 or not data:
            return None if index == 0 else _records(raw)
        raw += data[1:]
        if len(data) - 1 < 16:
            break
    return _records(raw)


def _records(raw: bytes) -> tuple[int, ...]:
    out: list[int] = []
    i = 0
    while i < len(raw):
        if raw[i] == 0xC0 and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        elif raw[i] == 0xC1 and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 5
        else:
            i += 1  # algorithm bytes of the record before
    return tuple(sorted(set(out)))


def _suites_words(suites: tuple[int, ...] | None) -> str:
    if suites is None:
        return "the BMC does not answer Get Channel Cipher Suites"
    if not suites:
        return "the BMC offers no cipher suite"
    return "the BMC offers cipher suites " + ", ".join(str(s) for s in suites)


def choose_suite(cfg: IpmiConfig, facts: BmcFacts) -> int | None:
    """The suite to pin (17 or 3), or None to let pyghmi try 17 then 3 (BMC does not say).

    Raises :class:`PolicyRefused` for suite 0, a suite the BMC does not offer, or IPMI 1.5
    without ``allow_insecure``.
    """
    if not facts.ipmi20:
        if not cfg.allow_insecure:
            raise PolicyRefused(
                "the BMC offers IPMI 1.5 sessions only (no RMCP+): refused, since IPMI 1.5 "
                "has no confidentiality and weak authentication; set allow_insecure: true to "
                "accept the risk, or enable IPMI 2.0 on the BMC")
        return None
    offered = facts.suites
    if cfg.cipher_suite == 0:
        raise PolicyRefused(
            f"cipher suite 0 (no authentication, no integrity, no confidentiality) is refused; "
            f"{_suites_words(offered)}; set cipher_suite: 17 or 3, or leave it unset (17 "
            "where offered, then 3)")
    if cfg.cipher_suite is not None:
        if offered is not None and cfg.cipher_suite not in offered:
            raise PolicyRefused(f"cipher_suite {cfg.cipher_suite} is not offered; "
                                f"{_suites_words(offered)}")
        return cfg.cipher_suite
    if offered is None:
        return None
    for suite in (17, 3):
        if suite in offered:
            return suite
    raise PolicyRefused(f"no cipher suite this channel accepts (17 or 3); "
                        f"{_suites_words(offered)}: suite 0 has no authentication, and pyghmi "
                        "implements 3 and 17 only")


# -- pyghmi sessions ------------------------------------------------------------------------------
_SESSION_CLASSES: dict[tuple[int | None, bool], type[Any]] = {}
_CLASS_LOCK = threading.Lock()
_CONSTRUCT_LOCK = threading.Lock()


WAKE_SLICE_S = 0.02
"""Longest single wait inside pyghmi's event loop (see :func:`_bound_waits`)."""


def _bound_waits(module: Any) -> None:
    """Bound each of pyghmi's waits to :data:`WAKE_SLICE_S`.

    pyghmi 1.6 registers a waiter with its I/O thread after it sent a request; when the
    answer is read before the waiter is registered (loopback BMCs answer that fast), the
    waiter sleeps until its retry deadline, 0.5 to 1 s, with the answer already queued.
    Every caller of ``_io_wait`` loops until its answer or deadline, so cutting each wait
    into slices changes no outcome, only how soon a queued answer is seen.
    """
    if getattr(module, "_powerplane_bounded", False):
        return
    original = module._io_wait

    def sliced(timeout: float, myaddr: Any = None, evq: Any = None) -> None:
        original(min(timeout, WAKE_SLICE_S), myaddr, evq)

    module._io_wait = sliced
    module._powerplane_bounded = True


def _session_class(suite: int | None, allow_v15: bool) -> type[Any]:
    """A pyghmi Session subclass pinned to ``suite`` that refuses IPMI 1.5 unless allowed."""
    from pyghmi.ipmi.private import session as pyghmi_session

    key = (suite, allow_v15)
    with _CLASS_LOCK:
        _bound_waits(pyghmi_session)
        if key in _SESSION_CLASSES:
            return _SESSION_CLASSES[key]

        class PinnedSession(pyghmi_session.Session):  # type: ignore[misc]
            """pyghmi's RMCP+ session with the cipher suite pinned and IPMI 1.5 gated."""

            def _open_rmcpplus_request(self) -> Any:
                if suite is not None:
                    want = 256 if suite == 17 else 1
                    if suite == 17 and getattr(self, "attemptedhash", 256) == 1:
                        # pyghmi's silent fallback to suite 3 after the BMC refused 17
                        self.onlogon({"error": "cipher suite 17 was refused by the BMC in "
                                               "the RMCP+ open session response"})
                        return None
                    self.attemptedhash = want
                return super()._open_rmcpplus_request()

            def _got_rakp2(self, data: Any) -> Any:
                out = super()._got_rakp2(data)
                if getattr(self, "sessioncontext", "") == "FAILED":
                    # RAKP 2 did not verify (wrong password): tell the BMC in RAKP 3 (status
                    # 0Fh, invalid integrity check value) so it frees the session slot it
                    # allocated at Open Session; pyghmi just walks away
                    self.rmcptag += 1
                    self.send_payload(
                        payload=bytearray([self.rmcptag, 0x0F, 0, 0])
                        + struct.pack("<I", self.pendingsessionid),
                        payload_type=pyghmi_session.constants.payload_types["rakp3"],
                        retry=False)
                return out

            def _get_session_challenge(self) -> Any:
                if not allow_v15:
                    self.onlogon({"error": "the BMC offers IPMI 1.5 only: refused (set "
                                           "allow_insecure: true to accept the risk)"})
                    return None
                return super()._get_session_challenge()

        _SESSION_CLASSES[key] = PinnedSession
        return PinnedSession


DIAGNOSE_S = 0.25
"""Kept from each bound for one sessionless request after a silence (:func:`diagnose`)."""

_STAGES = {None: 0, "OPENSESSION": 1, "EXPECTINGRAKP2": 2, "EXPECTINGRAKP4": 3,
           "ESTABLISHED": 4}
_STAGE_WORDS = (
    ("the sessionless probe", "Get Channel Authentication Capabilities"),
    ("Get Channel Authentication Capabilities", "RMCP+ Open Session"),
    ("RMCP+ Open Session", "RAKP 1 (which names the user; a BMC that does not know a user "
                           "name may stay silent like this)"),
    ("RAKP 1", "RAKP 3 (the password's proof; a wrong password or K_g may look like this)"),
    ("RAKP 3", "Set Session Privilege Level"),
)


def _abandon(sess: Any) -> None:
    """End every wait pyghmi has on ``sess`` (its loops run while logged or logging)."""
    try:
        sess.logged = 0
        sess.logout()
    except Exception:  # a half-built session: nothing more to end
        pass


class _Watchdog:
    """One daemon thread that abandons pyghmi sessions whose bound passed.

    pyghmi's synchronous calls wait on their own retry schedule (re-login included, which
    can run on for ever against a BMC that answers the first steps of a login only); an
    abandoned session ends them within one wait slice (:data:`WAKE_SLICE_S`). The thread is
    a daemon: it never holds the process at exit.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, Any, list[bool]]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def arm(self, sess: Any, seconds: float) -> tuple[int, list[bool]]:
        """Abandon ``sess`` in ``seconds`` unless disarmed; (handle, [fired])."""
        fired = [False]
        with self._cond:
            self._next += 1
            handle = self._next
            self._armed[handle] = (time.monotonic() + max(seconds, 0.0), sess, fired)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ipmi-watchdog",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
        return handle, fired

    def disarm(self, handle: int) -> None:
        with self._cond:
            self._armed.pop(handle, None)

    def _run(self) -> None:
        while True:
            due: list[tuple[Any, list[bool]]] = []
            with self._cond:
                now = time.monotonic()
                for handle, (at, sess, fired) in list(self._armed.items()):
                    if at <= now:
                        del self._armed[handle]
                        fired[0] = True
                        due.append((sess, fired))
                if not due:
                    soonest = min((at for at, _, _ in self._armed.values()), default=now + 60)
                    self._cond.wait(max(soonest - now, 0.001))
                    continue
            for sess, _ in due:
                _abandon(sess)


_WATCHDOG = _Watchdog()


class _Budget:
    """One call's bound: ``connect_s`` to open a session, all of it ``connect_s + read_s``."""

    def __init__(self, total: float) -> None:
        self.total = total
        self.end = time.monotonic() + total

    def left(self) -> float:
        return self.end - time.monotonic()

    def extend(self, seconds: float) -> None:
        """Room for a configured wait (graceful-then-force)."""
        self.end += seconds
        self.total += seconds


@dataclass(frozen=True)
class _Privilege:
    """What the session may do, read back (not assumed) the first time it is needed."""

    granted: int
    """The session's operating privilege as read back."""
    limit: int | None
    """The account's privilege limit on this channel (Get User Access); None if unknown."""
    via: str
    """How the privilege was read back, in words."""
    chassis_device: bool
    """Get Device ID: the BMC declares itself a chassis device."""


@dataclass
class _Live:
    """One open session to one BMC."""

    session: Any
    suite: int
    privilege: _Privilege | None = None
    """Read back when capabilities or a verb first need it (a state read does not)."""
    last_used: float = field(default_factory=time.monotonic)


def _diagnosed(addr: BmcAddress, told: str) -> str:
    """:func:`diagnose`, its faults prefixed with what went unanswered (``told``)."""
    try:
        return diagnose(addr, DIAGNOSE_S)
    except Malformed as exc:
        raise Malformed(f"{told}; then {exc}") from None
    except PortClosed as exc:
        raise PortClosed(f"{told}; {exc}") from None


def _command(sess: Any, addr: BmcAddress, netfn: int, cmd: int, data: bytes, what: str,
             bound: float, *, once: bool = False) -> dict[str, Any]:
    """One command in the session, answered within ``bound`` seconds, or raise.

    pyghmi's retransmission is set so its own schedule ends by ``bound`` (a read is sent
    twice, ``once`` sends once), and the watchdog abandons the session at ``bound`` whatever
    pyghmi does. A silence is diagnosed (:func:`diagnose`) before :class:`NoAnswer` (or
    :class:`PortClosed`, :class:`Malformed`) is raised; an answer pyghmi cannot parse is
    :class:`Malformed`.
    """
    wait = bound - DIAGNOSE_S
    if wait <= 0.05:
        raise NoAnswer(f"{what}: not sent, the call's bound is spent")
    first = (wait - 1.0) / 2 if wait >= 2.0 and not once else wait
    sess.timeout = first
    sess.maxtimeout = first + (1.0 if first != wait else 0.5)
    sess.logontries = 0
    handle, fired = _WATCHDOG.arm(sess, wait)
    resp: Any = None
    fault: BaseException | None = None
    try:
        resp = sess.raw_command(netfn=netfn, command=cmd, data=list(data))
    except Exception as exc:
        fault = exc
    finally:
        _WATCHDOG.disarm(handle)
    silent = fired[0] or not resp or (
        isinstance(resp, dict) and "error" in resp and resp.get("code", 0) in (0, 0xFFFF))
    if fault is not None and not fired[0] and type(fault).__module__.split(".")[0] != "pyghmi":
        raise Malformed(f"{what}: the BMC's answer could not be read (truncated or "
                        "corrupted)") from None
    if fault is not None or silent:
        if getattr(sess, "logged", 0):
            _abandon(sess)
        now = _diagnosed(addr, f"{what}: no answer within {wait:g} s")
        alive = "still answers" in now
        raise NoAnswer(f"{what}: no answer within {wait:g} s; {now}"
                       + (", but not in this session" if alive else ""), alive=alive) from None
    return dict(resp)


def _raw(sess: Any, addr: BmcAddress, netfn: int, cmd: int, bound: float,
         data: bytes = b"", what: str = "") -> bytes:
    """One read command in the session; its data, or raise (completion code, no answer)."""
    what = what or f"netfn {netfn:#x} command {cmd:#x}"
    resp = _command(sess, addr, netfn, cmd, data, what, bound)
    code = int(resp.get("code", 0))
    if code:
        raise CompletionCodeError(what, code)
    return bytes(resp.get("data", b""))


def forget_login(sess: Any) -> None:
    """Drop ``sess`` from pyghmi's table of logins in progress.

    pyghmi files a login under ``(bmc, user, password, port, kg)`` with the user as given and
    removes it under the user encoded as bytes, so the entry stays: the next session with the
    same credentials would get this (by then closed) object back. Removing it by identity
    makes every open a real one.
    """
    table = type(sess).initting_sessions
    for key in [k for k, v in list(table.items()) if v is sess]:
        table.pop(key, None)


def chassis_power(data: bytes) -> bool:
    """Get Chassis Status: bit 0 of the current power state byte (table 28-3)."""
    if not data:
        raise PolicyRefused("Get Chassis Status answered no data")
    return bool(data[0] & 0x01)


class IpmiChannel:
    """One ``ipmi`` channel: a set of credentials, and one session per BMC in use."""

    def __init__(self, name: str, config: IpmiConfig) -> None:
        self.name = name
        self.config = config
        self._locks: dict[str, threading.Lock] = {}
        self._live: dict[str, _Live] = {}
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
    def _budget(self) -> _Budget:
        """The bound of the call this thread is in (one is opened by each public method)."""
        budget: _Budget | None = getattr(self._tls, "budget", None)
        if budget is None:
            raise AssertionError("a channel call without a budget")
        return budget

    def _bounded(self, fn: Callable[[], T]) -> T:
        """Run one public call within ``timeouts.connect_s + timeouts.read_s`` (nested calls
        share the outer bound)."""
        if getattr(self._tls, "budget", None) is not None:
            return fn()
        self._tls.budget = _Budget(self.config.timeouts.total_s)
        try:
            return fn()
        finally:
            self._tls.budget = None

    def _read_bound(self) -> float:
        """Seconds one command may take now: ``read_s``, or what is left of the call."""
        return min(self.config.timeouts.read_s, self._budget().left())

    def _open(self, addr: BmcAddress) -> _Live:
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
        cls = _session_class(suite, cfg.allow_insecure)
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
        return _Live(sess, used)

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
            with _CONSTRUCT_LOCK:
                sess = cls(addr.host, cfg.username, password, port=addr.port, kg=kg,
                           privlevel=cfg.privilege.level, keepalive=False, onlogon=onlogon)
        finally:
            del password, kg
        wait = deadline - DIAGNOSE_S - time.monotonic()
        handle, fired = _WATCHDOG.arm(sess, wait)
        furthest = 0
        fault: BaseException | None = None
        try:
            while "result" not in outcome and not fired[0]:
                furthest = max(furthest, _STAGES.get(getattr(sess, "sessioncontext", None), 0))
                left = deadline - DIAGNOSE_S - time.monotonic()
                if left <= 0:
                    break
                try:
                    cls.wait_for_rsp(timeout=min(left, 0.05))
                except Exception as exc:
                    fault = exc
                    break
        finally:
            _WATCHDOG.disarm(handle)
        result = outcome.get("result")
        if isinstance(result, dict) and "error" not in result and sess.logged:
            return sess
        if isinstance(result, dict) and "error" in result and not fired[0]:
            from pyghmi.exceptions import IpmiException

            _abandon(sess)
            raise IpmiException(str(result["error"] or "the BMC refused the session"))
        _abandon(sess)
        if fault is not None and not fired[0] and \
                type(fault).__module__.split(".")[0] != "pyghmi":
            raise Malformed("session setup: the BMC's answer could not be read (truncated or "
                            "corrupted)") from None
        answered, missing = _STAGE_WORDS[min(furthest, len(_STAGE_WORDS) - 1)]
        told = (f"session setup: the BMC answered {answered} but not {missing} within "
                f"{cfg.timeouts.connect_s:g} s (timeouts.connect_s)")
        raise NoAnswer(f"{told}; {_diagnosed(addr, told)}")

    def _privilege(self, live: _Live, addr: BmcAddress) -> _Privilege:
        """The session's privilege, read back once per session (Get Device ID, Get Session
        Info or Set Session Privilege Level "no change", Get User Access)."""
        if live.privilege is None:
            live.privilege = self._readback_privilege(live.session, addr)
        return live.privilege

    def _readback_privilege(self, sess: Any, addr: BmcAddress) -> _Privilege:
        def raw(netfn: int, cmd: int, data: bytes = b"", what: str = "") -> bytes:
            return _raw(sess, addr, netfn, cmd, self._read_bound(), data, what)

        try:
            device = raw(0x06, 0x01, what="Get Device ID")
            chassis_device = len(device) > 5 and bool(device[5] & 0x80)
            user_id: int | None = None
            channel = 0x0E
            try:
                info = raw(0x06, 0x3D, b"\x00", what="Get Session Info")
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
                cur = raw(0x06, 0x3B, b"\x00", what="Set Session Privilege Level")
                granted = cur[0] & 0x0F if cur else 0
                via = ("Set Session Privilege Level, no change (the BMC does not implement "
                       "Get Session Info)")
            limit: int | None = None
            if user_id:
                try:
                    acc = raw(0x06, 0x44, bytes([channel, user_id]), what="Get User Access")
                    limit = acc[3] & 0x0F if len(acc) > 3 else None
                    via += "; account limit from Get User Access"
                except CompletionCodeError as exc:
                    if exc.code == 0xD4:
                        limit = 2  # not even allowed to read its own limit: below operator
                    elif exc.code != 0xC1:
                        raise
            return _Privilege(granted, limit, via, chassis_device)
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
                handle, _ = _WATCHDOG.arm(sess, bound)
                try:
                    sess.timeout = bound - DIAGNOSE_S
                    sess.maxtimeout = sess.timeout + 0.5
                    sess.logontries = 0
                    sess.raw_command(netfn=0x06, command=0x3C, data=list(sid))
                finally:
                    _WATCHDOG.disarm(handle)
        except Exception:
            pass
        finally:
            _abandon(sess)
            self.sessions_closed += 1

    def _drop(self, key: str) -> None:
        live = self._live.pop(key, None)
        if live is not None:
            self._close_session(live.session)

    def _session(self, addr: BmcAddress) -> tuple[_Live, bool]:
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

    def _call(self, target: str, fn: Callable[[_Live, BmcAddress], T]) -> T:
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
    def _status(self, live: _Live, addr: BmcAddress) -> bool:
        """Get Chassis Status on ``live``; a session that died (the BMC still answers
        sessionless requests) raises :class:`_DeadSession`."""
        try:
            return chassis_power(_raw(live.session, addr, 0x00, 0x01, self._read_bound(),
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

        def read(live: _Live, addr: BmcAddress) -> CapabilitySet:
            self._status(live, addr)
            caps = self._caps(live, addr)
            self._known[str(addr)] = caps
            return caps

        return self._bounded(lambda: self._call(target, read))

    def _caps(self, live: _Live, addr: BmcAddress) -> CapabilitySet:
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

        def read(live: _Live, addr: BmcAddress) -> Reading:
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

    def _send_control(self, live: _Live, addr: BmcAddress, code: int) -> None:
        """Chassis Control ``code``, once: through about_to_send, no retransmission."""
        sess = live.session
        bound = self._read_bound()
        words = _CONTROL_WORDS.get(code, f"{code:#x}")
        if bound - DIAGNOSE_S <= 0.05:
            raise self._err(NoAnswer(f"chassis {words}: not sent, the call's bound "
                                     f"({self._budget().total:g} s) is spent"), addr)
        about_to_send()
        try:
            resp = _command(sess, addr, 0x00, 0x02, bytes([code]), f"chassis {words}", bound,
                            once=True)
        except Exception as exc:
            raise self._err(exc, addr, sent=True) from None
        if int(resp.get("code", 0)):
            raise self._err(CompletionCodeError(f"chassis {words}", int(resp["code"])),
                            addr, sent=True)

    def _verb(self, target: str, verb: Verb,
              plan: Callable[[_Live, BmcAddress], str]) -> Acceptance:

        def run(live: _Live, addr: BmcAddress) -> Acceptance:
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

        def plan(live: _Live, addr: BmcAddress) -> str:
            self._send_control(live, addr, POWER_UP)
            return "chassis power up sent"

        result: Acceptance = self._verb(target, Verb.POWER_ON, plan)
        return result

    def shutdown(self, target: str) -> Acceptance:
        """Soft-off (graceful), power down (force), or soft-off then power down if needed."""
        mode = self.config.shutdown

        def plan(live: _Live, addr: BmcAddress) -> str:
            if mode is ShutdownMode.FORCE:
                self._send_control(live, addr, POWER_DOWN)
                return "chassis power down sent"
            self._send_control(live, addr, SOFT_OFF)
            if mode is ShutdownMode.GRACEFUL:
                return "soft-off (ACPI) sent; the OS decides when power goes"
            return self._force_if_needed(live, addr)

        result: Acceptance = self._verb(target, Verb.SHUTDOWN, plan)
        return result

    def _force_if_needed(self, live: _Live, addr: BmcAddress) -> str:
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

    def _status_sent(self, live: _Live, addr: BmcAddress) -> bool:
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

        def plan(live: _Live, addr: BmcAddress) -> str:
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
