"""pyghmi's RMCP+ session as the ``ipmi`` channel uses it: pinned, bounded, watched.

pyghmi's private names, and why. pyghmi's public client (``pyghmi.ipmi.command.Command``)
chooses the cipher suite itself (17, then 3, falling back silently), takes no bound on a
login (its re-login can run on for ever), turns its own event loop, and accepts IPMI 1.5
where a BMC offers only that; this channel can accept none of it. So the session is
``pyghmi.ipmi.private.session.Session``, subclassed per suite and ``allow_insecure``
(:func:`session_class`: ``_open_rmcpplus_request`` pins the suite, ``_got_rakp2`` answers
a RAKP 2 that did not verify with RAKP 3 so the BMC frees the slot, through
``send_payload`` and ``constants.payload_types``, ``_get_session_challenge`` refuses IPMI
1.5, each telling ``onlogon``); its login is turned through ``wait_for_rsp`` with a logon
callback while ``sessioncontext`` tells the step reached; each command is bounded through
its ``timeout``, ``maxtimeout`` and ``logontries`` attributes and abandoned through
``logged`` and ``logout``; the suite used is read from ``currhashlen``; its class-wide table
of logins in progress (``initting_sessions``) is cleaned (:func:`forget_login`); and the
module's ``_io_wait`` is wrapped to wake every :data:`WAKE_SLICE_S` (behind one switch,
:func:`slice_waits`, on by default: process-wide, so every pyghmi session in the process
waits in slices, which changes no outcome, only how soon an answer already queued is seen).
pyghmi is pinned to
``>=1.6.19,<1.7`` (the range tested) in this distribution's ``pyproject.toml``, and
``tests/test_pyghmi_shape.py`` fails on a pyghmi whose names or signatures differ.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from powerplane_ipmi.config import (
    BmcAddress,
)
from powerplane_ipmi.errors import (
    CompletionCodeError,
    Malformed,
    NoAnswer,
    PolicyRefused,
    PortClosed,
)
from powerplane_ipmi.wire import diagnose

log = logging.getLogger("powerplane_ipmi")

# -- pyghmi sessions ------------------------------------------------------------------------------
_SESSION_CLASSES: dict[tuple[int | None, bool], type[Any]] = {}
_CLASS_LOCK = threading.Lock()
CONSTRUCT_LOCK = threading.Lock()


WAKE_SLICE_S = 0.02
"""Longest single wait inside pyghmi's event loop (see :func:`slice_waits`)."""


SLICED_WAITS = True
"""The one switch for the process-wide change this module makes to pyghmi (see
:func:`slice_waits`): on by default; :func:`slice_waits` turns it off or on."""


def slice_waits(enabled: bool) -> None:
    """The one switch: whether pyghmi's module-level ``_io_wait`` waits in slices of at most
    :data:`WAKE_SLICE_S` (on) or as pyghmi wrote it (off), for the whole process.

    Why it exists: pyghmi 1.6 registers a waiter with its I/O thread after it sent a
    request; when the answer is read before the waiter is registered (loopback BMCs answer
    that fast), the waiter sleeps until its retry deadline, 0.5 to 1 s, with the answer
    already queued. Every caller of ``_io_wait`` loops until its answer or deadline, so
    cutting each wait into slices changes no outcome, only how soon a queued answer is seen
    (and how soon an abandoned session's waits end). It is process-wide because ``_io_wait``
    is pyghmi's module function: an application that uses pyghmi beside powerplane and wants
    pyghmi's own waits calls ``slice_waits(False)`` before any session opens; the channel's
    bounds hold either way (its watchdog abandons a session at the bound)."""
    global SLICED_WAITS
    from pyghmi.ipmi.private import session as pyghmi_session

    with _CLASS_LOCK:
        SLICED_WAITS = enabled
        _apply(pyghmi_session)


def _apply(module: Any) -> None:
    """Make ``module._io_wait`` what :data:`SLICED_WAITS` says (under ``_CLASS_LOCK``)."""
    original = getattr(module, "_powerplane_original_io_wait", None)
    if not SLICED_WAITS:
        if original is not None:
            module._io_wait = original
            module._powerplane_bounded = False
        return
    if getattr(module, "_powerplane_bounded", False):
        return
    if original is None:
        original = module._io_wait
        module._powerplane_original_io_wait = original

    def sliced(timeout: float, myaddr: Any = None, evq: Any = None) -> None:
        original(min(timeout, WAKE_SLICE_S), myaddr, evq)

    module._io_wait = sliced
    module._powerplane_bounded = True


def session_class(suite: int | None, allow_v15: bool) -> type[Any]:
    """A pyghmi Session subclass pinned to ``suite`` that refuses IPMI 1.5 unless allowed."""
    from pyghmi.ipmi.private import session as pyghmi_session

    key = (suite, allow_v15)
    with _CLASS_LOCK:
        _apply(pyghmi_session)
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

STAGES = {None: 0, "OPENSESSION": 1, "EXPECTINGRAKP2": 2, "EXPECTINGRAKP4": 3,
           "ESTABLISHED": 4}
STAGE_WORDS = (
    ("the sessionless probe", "Get Channel Authentication Capabilities"),
    ("Get Channel Authentication Capabilities", "RMCP+ Open Session"),
    ("RMCP+ Open Session", "RAKP 1 (which names the user; a BMC that does not know a user "
                           "name may stay silent like this)"),
    ("RAKP 1", "RAKP 3 (the password's proof; a wrong password or K_g may look like this)"),
    ("RAKP 3", "Set Session Privilege Level"),
)


def abandon(sess: Any) -> None:
    """End every wait pyghmi has on ``sess`` (its loops run while logged or logging)."""
    try:
        sess.logged = 0
        sess.logout()
    except Exception:  # a half-built session: nothing more to end
        pass


class Watchdog:
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
                abandon(sess)


WATCHDOG = Watchdog()


class Budget:
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
class Privilege:
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
class Live:
    """One open session to one BMC."""

    session: Any
    suite: int
    privilege: Privilege | None = None
    """Read back when capabilities or a verb first need it (a state read does not)."""
    last_used: float = field(default_factory=time.monotonic)


def diagnosed(addr: BmcAddress, told: str) -> str:
    """:func:`diagnose`, its faults prefixed with what went unanswered (``told``)."""
    try:
        return diagnose(addr, DIAGNOSE_S)
    except Malformed as exc:
        raise Malformed(f"{told}; then {exc}") from None
    except PortClosed as exc:
        raise PortClosed(f"{told}; {exc}") from None


def command(sess: Any, addr: BmcAddress, netfn: int, cmd: int, data: bytes, what: str,
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
    handle, fired = WATCHDOG.arm(sess, wait)
    resp: Any = None
    fault: BaseException | None = None
    try:
        resp = sess.raw_command(netfn=netfn, command=cmd, data=list(data))
    except Exception as exc:
        fault = exc
    finally:
        WATCHDOG.disarm(handle)
    silent = fired[0] or not resp or (
        isinstance(resp, dict) and "error" in resp and resp.get("code", 0) in (0, 0xFFFF))
    if fault is not None and not fired[0] and type(fault).__module__.split(".")[0] != "pyghmi":
        raise Malformed(f"{what}: the BMC's answer could not be read (truncated or "
                        "corrupted)") from None
    if fault is not None or silent:
        if getattr(sess, "logged", 0):
            abandon(sess)
        now = diagnosed(addr, f"{what}: no answer within {wait:g} s")
        alive = "still answers" in now
        raise NoAnswer(f"{what}: no answer within {wait:g} s; {now}"
                       + (", but not in this session" if alive else ""), alive=alive) from None
    return dict(resp)


def raw(sess: Any, addr: BmcAddress, netfn: int, cmd: int, bound: float,
         data: bytes = b"", what: str = "") -> bytes:
    """One read command in the session; its data, or raise (completion code, no answer)."""
    what = what or f"netfn {netfn:#x} command {cmd:#x}"
    resp = command(sess, addr, netfn, cmd, data, what, bound)
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


