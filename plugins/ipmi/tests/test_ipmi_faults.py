"""IPMI's own timeouts are the bound: every cut of a state read and a power cycle.

A :class:`~powerplane_ipmi.testing.UdpProxy` in front of a fresh ``ipmi_sim`` delivers the
first K answers and then cuts every answer (dropped, random bytes, truncated, or the port
closed so ICMP port unreachable comes back), for every K from 0 to past the last answer of
the call. Each call must return within ``connect_s + read_s`` plus a grace (the plugin's
contract: one call, one session opened within ``connect_s``, its commands within
``read_s``), with the class the cut deserves and words that name it, never Python's
internals; a chassis command that reached the BMC is never reported as anything but done
or ``OutcomeUnknown``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ipmi_support import channel, need_ipmi_sim

from powerplane import ChannelError, ChannelTimeout, OutcomeUnknown, ProtocolError, Unreachable
from powerplane_ipmi.channel import IpmiChannel
from powerplane_ipmi.peer import IpmiSim
from powerplane_ipmi.testing import FAULTS, Fault, UdpProxy

CONNECT_S = 1.5
READ_S = 1.5
GRACE_S = 1.5
"""Generous: scheduling on a loaded machine, not a tolerance of the channel's own waits."""
CLOSE_S = min(READ_S, 1.0) + 0.25
LIMIT_S = 30.0
"""The explicit bound on each call of the test: past it the call counts as hung."""
"""close(): one Close Session per session, at most min(read_s, 1) s and the diagnosis."""

WANT: dict[Fault, tuple[type[ChannelError], tuple[str, ...]]] = {
    "drop": (ChannelTimeout, ("no answer", "but not")),
    "random": (ProtocolError, ("not RMCP/IPMI", "could not be read")),
    "truncate": (ProtocolError, ("truncated",)),
    "close": (Unreachable, ("ICMP port unreachable",)),
}
INTERNALS = ("unpack", "bytearray", "out of range", "IpmiException", "NoneType", "Traceback",
             "struct.error", "KeyError", "IndexError", "TypeError", "buffer of")

Op = Callable[[IpmiChannel, str], object]
OPS: dict[str, Op] = {
    "state": lambda ch, target: ch.read_power_state(target),
    "power cycle": lambda ch, target: ch.reboot(target),
}


def _within(fn: Callable[[], object], timeout: float) -> tuple[BaseException | None, bool]:
    """Run ``fn`` with an explicit bound: (what it raised, whether it is still running)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    return (raised[0] if raised else None), worker.is_alive()


def _answers(tmp: Path, op: Op) -> int:
    """How many answers one clean call and the channel's close() take."""
    with IpmiSim(tmp) as sim, UdpProxy(sim.host, sim.port) as proxy:
        ch = channel(sim, timeouts={"connect_s": CONNECT_S, "read_s": READ_S})
        op(ch, proxy.address)
        ch.close()
        time.sleep(0.05)
        return proxy.delivered


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("op_name", sorted(OPS))
def test_every_cut_has_its_class_and_words_within_the_timeouts(
        op_name: str, fault: Fault, tmp_path: Path) -> None:
    need_ipmi_sim()
    op = OPS[op_name]
    total = _answers(tmp_path / "clean", op)
    assert total >= 10, total
    seen: dict[str, int] = {}
    problems: list[str] = []
    for k in range(total + 1):
        with IpmiSim(tmp_path / f"k{k}") as sim, UdpProxy(sim.host, sim.port) as proxy:
            ch = channel(sim, timeouts={"connect_s": CONNECT_S, "read_s": READ_S})
            proxy.cut_after(k, fault)
            t0 = time.monotonic()
            raised, hung = _within(functools.partial(op, ch, proxy.address), LIMIT_S)
            took = time.monotonic() - t0
            t1 = time.monotonic()
            _, close_hung = _within(ch.close, LIMIT_S)
            closing = time.monotonic() - t1
            reset_reached = any(line.startswith("reset") for line in sim.chassis_log())
        where = f"K={k} ({fault}, {op_name})"
        if hung or close_hung:
            problems.append(f"{where}: still running after {LIMIT_S:g} s")
            continue
        if raised is not None and not isinstance(raised, ChannelError):
            problems.append(f"{where}: not a channel error: {raised!r}")
            continue
        err = raised
        if took > CONNECT_S + READ_S + GRACE_S:
            problems.append(f"{where}: took {took:.2f} s")
        if closing > CLOSE_S + GRACE_S:
            problems.append(f"{where}: close() took {closing:.2f} s")
        if err is None:
            seen["done"] = seen.get("done", 0) + 1
            continue
        text = str(err)
        seen[type(err).__name__] = seen.get(type(err).__name__, 0) + 1
        if any(word in text for word in INTERNALS):
            problems.append(f"{where}: Python internals in {text!r}")
        if isinstance(err, OutcomeUnknown):
            if op_name == "state":
                problems.append(f"{where}: a read is never OutcomeUnknown: {text!r}")
            continue
        if reset_reached:
            problems.append(f"{where}: the hard reset reached the BMC, reported {err!r}")
        cls, words = WANT[fault]
        if type(err) is not cls or not any(w in text for w in words):
            problems.append(f"{where}: expected {cls.__name__} naming {words}, got "
                            f"{type(err).__name__}: {text}")
    assert problems == [], "\n".join(problems)
    # not vacuous: the cut's own class at the first cuts, and the call done after the last
    assert seen.get(WANT[fault][0].__name__, 0) >= 5, seen
    assert seen.get("done", 0) >= 1, seen
    if op_name == "power cycle":
        assert seen.get("OutcomeUnknown", 0) >= 1, seen
