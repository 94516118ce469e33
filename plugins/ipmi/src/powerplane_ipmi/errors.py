"""pyghmi's exceptions, IPMI completion codes and RMCP+ status codes, mapped into powerplane's tree.

Every failure the channel meets goes through :func:`map_error`, which returns the most
specific class of :mod:`powerplane.errors` (raise it ``from`` the original). The table:

============================================================  ==========================
what happened                                                  powerplane class
============================================================  ==========================
sessionless probe: ICMP port unreachable (nothing on the port)  ``Unreachable``
name resolution or routing failure (``OSError``, gaierror)      ``Unreachable``
sessionless probe: no answer within ``timeouts.connect_s``       ``ChannelTimeout``
RAKP 2 HMAC does not verify ("Incorrect password provided")     ``AuthenticationFailed``
RAKP status 0x0D unauthorized name, 0x0E unauthorized GUID      ``AuthenticationFailed``
RAKP 4 integrity check fails ("wrong Kg?"), RAKP status 0x0F    ``AuthenticationFailed``
RAKP status 0x09 invalid role, 0x0A unauthorized role           ``AuthenticationFailed``
Set Session Privilege Level refused (0x80, 0x81, 0xD4)          ``AuthenticationFailed``
session setup silent after the probe answered (the step named)  ``ChannelTimeout``
RMCP+ status 0x0C invalid user name length                      ``AuthenticationFailed``
RMCP+ status 0x01, 0x0B (no free session slot)                  ``RefusedByDevice``
RMCP+ status 0x04 to 0x07, 0x10, 0x11 (no cipher suite match)   ``ProtocolError``
RMCP+ status 0x02, 0x03, 0x08, 0x12 (session id, payload, ...)  ``ProtocolError``
(every RMCP+ status code: :data:`RMCP_STATUS`)
the port answers ICMP port unreachable during a session         ``Unreachable``
cipher suite 0 or IPMI 1.5 refused by this channel (policy)     ``ProtocolError``
completion code 0xC0 node busy, 0xD2 BMC initialising           ``RefusedByDevice``
completion code 0xC1 invalid command, 0xCC invalid data field   ``RefusedByDevice``
completion code 0xD4 insufficient privilege                     ``RefusedByDevice``
any other non-zero completion code                              ``RefusedByDevice``
completion code 0xC3 (timeout while processing) on a read       ``ChannelTimeout``
a read not answered within its bound                            ``ChannelTimeout``
an answer pyghmi cannot parse (struct.error, IndexError...)      ``ProtocolError``
a chassis control command not answered in time, or answered     ``OutcomeUnknown``
0xC3, after it left
an answer too short or malformed to read, or not IPMI at all     ``ProtocolError``
any other pyghmi exception                                      ``ProtocolError``
============================================================  ==========================

IPMI has no HTTP status, so the tree's 5xx rule does not apply; a completion code is the
BMC answering, hence ``RefusedByDevice`` (the device's words are in the message), except
0xC3 on a chassis command, which says the BMC may have acted. A chassis control command is
never retried after it may have been received: that is the caller's contract with
:class:`~powerplane.errors.OutcomeUnknown`.

Messages never carry the password, the K_g key or the user name: pyghmi puts the user name
into some of its texts, so every pyghmi text is scrubbed with :func:`scrub` first.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    Unreachable,
)

__all__ = [
    "COMPLETION_CODES",
    "RMCP_STATUS",
    "CompletionCodeError",
    "Malformed",
    "NoAnswer",
    "PolicyRefused",
    "PortClosed",
    "map_error",
    "scrub",
]

COMPLETION_CODES: dict[int, str] = {
    0xC0: "node busy",
    0xC1: "invalid command (the BMC does not implement it)",
    0xC2: "invalid command for the given LUN",
    0xC3: "timeout while processing the command",
    0xC4: "out of space",
    0xC5: "reservation cancelled or invalid",
    0xC6: "request data truncated",
    0xC7: "request data length invalid",
    0xC8: "request data field length limit exceeded",
    0xC9: "parameter out of range",
    0xCA: "cannot return the number of requested data bytes",
    0xCB: "requested sensor, data or record not present",
    0xCC: "invalid data field in request (the BMC does not support this option)",
    0xCD: "command illegal for the specified sensor or record type",
    0xCE: "command response could not be provided",
    0xCF: "cannot execute a duplicated request",
    0xD0: "SDR repository in update mode",
    0xD1: "device in firmware update mode",
    0xD2: "BMC initialization in progress",
    0xD3: "destination unavailable",
    0xD4: "insufficient privilege level",
    0xD5: "command not supported in the present state",
    0xD6: "command sub-function disabled or unavailable",
    0xFF: "unspecified error",
}
"""The generic completion codes (IPMI 2.0 table 5-2), in words."""

RMCP_STATUS: dict[int, tuple[str, type[ChannelError]]] = {
    0x01: ("insufficient resources to create a session", RefusedByDevice),
    0x02: ("invalid session ID", ProtocolError),
    0x03: ("invalid payload type", ProtocolError),
    0x04: ("invalid authentication algorithm", ProtocolError),
    0x05: ("invalid integrity algorithm", ProtocolError),
    0x06: ("no matching authentication payload", ProtocolError),
    0x07: ("no matching integrity payload", ProtocolError),
    0x08: ("inactive session ID", ProtocolError),
    0x09: ("invalid role", AuthenticationFailed),
    0x0A: ("unauthorized role or privilege level requested", AuthenticationFailed),
    0x0B: ("insufficient resources to create a session at the requested role",
           RefusedByDevice),
    0x0C: ("invalid name length", AuthenticationFailed),
    0x0D: ("unauthorized name", AuthenticationFailed),
    0x0E: ("unauthorized GUID", AuthenticationFailed),
    0x0F: ("invalid integrity check value", AuthenticationFailed),
    0x10: ("invalid confidentiality algorithm", ProtocolError),
    0x11: ("no cipher suite match with proposed security algorithms", ProtocolError),
    0x12: ("illegal or unrecognized parameter", ProtocolError),
}
"""The RMCP+ and RAKP message status codes (IPMI 2.0 table 13-15): words and class.

pyghmi reports these by its own texts (``pyghmi.ipmi.private.constants.rmcp_codes``, where
0x06 reads like 0x07), sometimes with " in RAKP2" or " reported in RAKP4" appended;
:func:`rmcp_status` finds the code again from such a text."""

_PYGHMI_RMCP_TEXTS: dict[str, int] = {
    "insufficient resources to create new session": 0x01,
    "invalid session id": 0x02,
    "invalid payload type": 0x03,
    "invalid authentication algorithm": 0x04,
    "invalid integrity algorithm": 0x05,
    "no matching authentication payload": 0x06,
    "no matching integrity payload": 0x07,
    "inactive session id": 0x08,
    "invalid role": 0x09,
    "unauthorized role or privilege level requested": 0x0A,
    "insufficient resources to create a session at the requested role": 0x0B,
    "invalid username length": 0x0C,
    "invalid name length": 0x0C,
    "unauthorized name": 0x0D,
    "unauthorized guid": 0x0E,
    "invalid integrity check value": 0x0F,
    "invalid confidentiality algorithm": 0x10,
    "no cipher suite match with proposed security algorithms": 0x11,
    "illegal or unrecognized parameter": 0x12,
}


def rmcp_status(text: str) -> int | None:
    """The RMCP+ status code a pyghmi text reports, or None if it reports none."""
    low = text.lower().strip()
    for suffix in (" reported in rakp4", " in rakp2"):
        if low.endswith(suffix):
            low = low[: -len(suffix)]
    if low.startswith("unrecognized rmcp code "):
        tail = low.rsplit(" ", 1)[-1]
        return int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 4 else None
    # longest first: "... at the requested role" before "... new session"
    for words, code in sorted(_PYGHMI_RMCP_TEXTS.items(), key=lambda kv: -len(kv[0])):
        if low.startswith(words):
            return code
    return None


def _rmcp_error(code: int, kw: dict[str, Any]) -> ChannelError:
    words, cls = RMCP_STATUS.get(code, ("an unassigned status code", ProtocolError))
    told = f"RMCP+ status 0x{code:02X}, {words}"
    if code in (0x09, 0x0A):
        text = (f"the BMC refused the requested privilege ({told}): the account's limit is "
                "below it; use an account with operator privilege or lower `privilege`")
    elif code == 0x0D:
        text = f"the BMC does not know this user ({told})"
    elif code == 0x0F:
        text = f"the BMC rejected the session key ({told}: wrong K_g or password?)"
    elif cls is AuthenticationFailed:
        text = f"the BMC rejected the credentials ({told})"
    elif cls is RefusedByDevice:
        text = (f"the BMC has no free session slot ({told}): close other sessions or wait "
                "for them to time out")
    elif code in (0x04, 0x05, 0x06, 0x07, 0x10, 0x11):
        text = f"no common RMCP+ cipher suite ({told})"
    else:
        text = f"the BMC refused the session setup ({told})"
    return cls(text, **kw)


_AUTH_TEXTS = (
    "incorrect password",
    "unauthorized name",
    "unauthorized guid",
    "wrong kg",
    "rakp4 integrity",
    "invalid integrity check value",
    "invalid role",
    "unauthorized role",
    "requesting privelege",  # pyghmi's spelling
    "requesting privilege",
    "invalid user name",
)
_SLOT_TEXTS = ("insufficient resources",)
_SUITE_TEXTS = ("cipher suite", "authentication algorithm", "integrity algorithm",
                "confidentiality algorithm", "md5 required")
_TIMEOUT_TEXTS = ("timeout", "no longer connected", "session failed to initialize")


class CompletionCodeError(Exception):
    """A command answered with a non-zero completion code (the BMC refused it)."""

    def __init__(self, what: str, code: int) -> None:
        self.what = what
        self.code = code
        words = COMPLETION_CODES.get(code, "unknown completion code")
        super().__init__(f"{what}: the BMC answered completion code 0x{code:02X}, {words}")


class NoAnswer(Exception):
    """Nothing came back within the bound (the sessionless probe or a command)."""

    def __init__(self, text: str, *, alive: bool = False) -> None:
        super().__init__(text)
        self.alive = alive
        """The BMC still answered sessionless requests afterwards (the session died)."""


class Malformed(Exception):
    """An answer came that cannot be read: truncated, corrupted, or not IPMI at all."""


class PortClosed(Exception):
    """The BMC's UDP port answers ICMP port unreachable (found after a silence)."""


class PolicyRefused(Exception):
    """This channel refuses the session the BMC offers (cipher suite 0, IPMI 1.5, no match)."""


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and the user name) replaced by ``<redacted>``."""
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(value, "<redacted>")
        text = text.replace(repr(value.encode("utf-8")), "<redacted>")
    return text


def map_error(
    exc: BaseException,
    *,
    channel: str,
    target: object,
    sent: bool = False,
    stage: str = "command",
    secrets: Iterable[str] = (),
) -> ChannelError:
    """The powerplane error for ``exc``; ``sent`` when a chassis command may have left.

    ``stage`` is ``"probe"`` (sessionless), ``"login"`` (RMCP+ open and RAKP) or
    ``"command"`` (a command inside the session). The message is scrubbed of ``secrets``.
    """
    kw: dict[str, Any] = {"channel": channel, "target": target}
    if isinstance(exc, ChannelError):
        return exc
    if isinstance(exc, PolicyRefused):
        return ProtocolError(scrub(str(exc), secrets), **kw)
    if isinstance(exc, CompletionCodeError):
        if exc.code == 0xC3 and sent:
            return OutcomeUnknown(scrub(str(exc), secrets), **kw)
        if exc.code == 0xC3:
            return ChannelTimeout(scrub(str(exc), secrets), **kw)
        return RefusedByDevice(scrub(str(exc), secrets), **kw)
    if isinstance(exc, Malformed):
        text = scrub(str(exc), secrets)
        if sent:
            return OutcomeUnknown(f"the chassis command left and no readable answer came "
                                  f"({text})", **kw)
        return ProtocolError(text, **kw)
    if isinstance(exc, PortClosed):
        text = scrub(str(exc), secrets)
        return OutcomeUnknown(text, **kw) if sent else Unreachable(text, **kw)
    if isinstance(exc, ConnectionRefusedError):
        return Unreachable("nothing answers on this UDP port (ICMP port unreachable): "
                           "check the BMC address and port", **kw)
    if isinstance(exc, socket.gaierror):
        return Unreachable(f"cannot resolve the BMC's address ({exc.strerror})", **kw)
    if isinstance(exc, NoAnswer):
        text = scrub(str(exc), secrets)
        return OutcomeUnknown(text, **kw) if sent else ChannelTimeout(text, **kw)
    if isinstance(exc, TimeoutError):
        text = "no answer from the BMC in time"
        return OutcomeUnknown(text, **kw) if sent else ChannelTimeout(text, **kw)
    if isinstance(exc, OSError):
        return Unreachable(f"cannot reach the BMC ({exc.strerror or type(exc).__name__})", **kw)
    if not _is_pyghmi(exc):
        # a fault inside pyghmi's parsing of an answer (struct.error, IndexError, ...): the
        # answer was truncated or corrupted; Python's own words say nothing to a user
        what = ("the BMC's answer could not be read (truncated or corrupted: "
                f"{_stage_words(stage)})")
        if sent:
            return OutcomeUnknown(f"the chassis command left and {what}", **kw)
        return ProtocolError(what, **kw)
    text = scrub(str(exc) if exc.args and exc.args[0] is not None else "", secrets)
    low = text.lower()
    if sent:
        return OutcomeUnknown(f"the chassis command left and no usable answer came "
                              f"({text or 'pyghmi gave no reason'})", **kw)
    code = rmcp_status(text)
    if code is not None:
        return _rmcp_error(code, kw)
    if "unable to transmit" in low:
        return Unreachable(f"cannot send to the BMC's address ({text})", **kw)
    if any(t in low for t in _AUTH_TEXTS):
        return AuthenticationFailed(_auth_words(low, text), **kw)
    if any(t in low for t in _SLOT_TEXTS):
        return RefusedByDevice(f"the BMC has no free session slot ({text}): close other "
                               "sessions or wait for them to time out", **kw)
    if any(t in low for t in _SUITE_TEXTS):
        return ProtocolError(f"no common RMCP+ cipher suite ({text})", **kw)
    if any(t in low for t in _TIMEOUT_TEXTS):
        if stage == "login":
            return ChannelTimeout(
                "the BMC answered the sessionless probe but not the session setup (RMCP+ "
                "open session / RAKP) in time; BMCs that drop a wrong user name or K_g "
                "silently look like this", **kw)
        return ChannelTimeout(f"no answer from the BMC in time ({text})", **kw)
    if not text:
        return ProtocolError(f"the IPMI session failed without a reason ({_stage_words(stage)})",
                             **kw)
    return ProtocolError(f"unexpected IPMI failure ({_stage_words(stage)}): {text}", **kw)


def _is_pyghmi(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "pyghmi"


def _stage_words(stage: str) -> str:
    return {"probe": "the sessionless probe", "login": "the session setup"}.get(
        stage, "a command in the session")


def _auth_words(low: str, text: str) -> str:
    if "incorrect password" in low:
        return ("the BMC rejected the credentials (RAKP 2 message authentication code did "
                "not verify: wrong password)")
    if "kg" in low or "rakp4" in low or "integrity check" in low:
        return "the BMC rejected the session key (RAKP 4 did not verify: wrong K_g?)"
    if "name" in low:
        return "the BMC does not know this user (RAKP status: unauthorized name)"
    if "role" in low or "privelege" in low or "privilege" in low:
        return (f"the BMC refused the requested privilege ({text}): the account's limit is "
                "below it; use an account with operator privilege or lower `privilege`")
    return f"the BMC rejected the credentials ({text})"
