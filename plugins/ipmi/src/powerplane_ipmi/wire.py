"""The sessionless side of IPMI on the wire: IPMI 1.5 framing with authentication type
none, a request and its answer on a connected UDP socket (Get Channel Authentication
Capabilities, Get Channel Cipher Suites), what a silent port does now (:func:`diagnose`),
and the cipher suite chosen from what the BMC offers (:func:`choose_suite`). No session,
no pyghmi: steps 1 and 2 of :mod:`powerplane_ipmi.channel`'s login."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from powerplane_ipmi.config import (
    BmcAddress,
    IpmiConfig,
)
from powerplane_ipmi.errors import (
    CompletionCodeError,
    Malformed,
    NoAnswer,
    PolicyRefused,
    PortClosed,
)

log = logging.getLogger("powerplane_ipmi")


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


