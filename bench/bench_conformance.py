"""Benchmark: the full conformance suite's wall time per backend, with DEFAULT settings.

Each backend runs on its real loopback peer, started the way ``powerplane demo`` starts it
(each plugin's ``peer.PEER.start``), and the target's ``conformance:`` section holds only
``allow_destructive: true``, what that peer strictly declares (its ``xfail`` defects and
``negative`` hints), ``attended: true`` for a peer with a power button to press by hand
(``StartedPeer.power_on_by_hand``: the Talos mock, whose channel cannot power on; the
suite reads each machine back after it is pressed), and ``allow_terminate: true`` for
ec2 (moto's instances are throwaway): the default ``settle_timeout_s`` (30), ``repeat``
(3) and every other default.

- ``simulated``: core's simulated channel, two machines (one on, one off).
- ``redfish``: the sushy-tools emulator with its own realistic power delay (the fake driver
  applies a change 1-11 s after the request, not the zero delay the plugin's tests use), as
  the 172 s of today were measured: once with one system (the figure to compare with) and
  once with two (the concurrency checks need two nodes); ``redfish-0`` is the emulator
  with zero delay, as the plugin's tests and ``powerplane demo`` start it (for reference).
- ``pdu``: snmpsim with an APC rPDU2 profile; ``talos``: the Talos mock (gRPC);
  ``ec2``: moto's EC2 server; ``ipmi``: two OpenIPMI ``ipmi_sim`` BMCs (measured, no target).

Printed per backend: seconds, the ratio to its target (below 1.0 meets it) and, for the
emulator, to today's 172 s; the verdict and counts; then the ten slowest checks (from the
run's JUnit file) so the time can be placed. A backend whose plugin or peer is missing is
reported as skipped. ``python bench/bench_conformance.py [BACKEND ...]``; exits 0.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from powerplane_conformance.api import RunSummary, run_suite

TODAY_EMULATOR_S = 172.0
"""The emulator run before the speed work (default settings, repeat 3, one node)."""
MEAN_DELAY_S = 5.5
"""The emulator's mean power-change delay: ``int(time.time()) + randint(1, 11)``, so 1 to
11 s after a second's start, a mean of 6 - 0.5 s after the request."""
MIN_CHANGES = 9
"""The fewest power changes per machine with repeat 3: three rounds each of reboot,
shutdown and power-on, one change per round (the idempotent verbs change nothing)."""
TARGETS_S = {"simulated": 3.0, "redfish": 30.0, "redfish-1": 30.0, "redfish-0": 30.0,
             "pdu": 20.0,
             "talos": 15.0, "ec2": 20.0}
"""The issue's targets, seconds (ipmi has none: measured and reported)."""
PASSWORD_ENV = "PP_BENCH_CONFORMANCE_PASSWORD"


@dataclass
class Started:
    config: dict[str, Any]
    targets: list[Any]
    conformance: dict[str, Any]
    stop: Callable[[], None]
    requests: Callable[[], str] | None = None
    """What the peer received, where it counts it (the emulator: resets sent, reads)."""
    power_on_by_hand: Callable[[Any], None] | None = None
    """The peer's power button (a person at the rack), for channels that cannot power on."""


def _peer(module: str) -> Callable[[Path], Started]:
    def start(where: Path) -> Started:
        peer = importlib.import_module(module).PEER.start(where)
        return Started(peer.config, list(peer.targets), dict(peer.conformance), peer.stop,
                       power_on_by_hand=peer.power_on_by_hand)

    return start


def _simulated(where: Path) -> Started:
    """Two machines; the hint names the secret the channel presents (``expect_password`` is
    the device's side, a secret too)."""
    os.environ[PASSWORD_ENV] = "bench-secret"
    return Started({"type": "simulated", "machines": {"m1": "on", "m2": "off"},
                    "password": {"env": PASSWORD_ENV}, "expect_password": {"env": PASSWORD_ENV}},
                   ["m1", "m2"], {"negative": {"simulated": {"secret_key": "password"}}},
                   lambda: None)


def _emulator(systems: int, zero_delay: bool = False) -> Callable[[Path], Started]:
    def start(where: Path) -> Started:
        from powerplane_redfish.testing.emulator import SushyEmulator

        emu = SushyEmulator(where, systems=systems, zero_delay=zero_delay).start()
        secret = where / "bmc-password"
        secret.write_text(emu.password)
        secret.chmod(0o600)
        config = {"type": "redfish", "endpoint": emu.endpoint, "username": emu.username,
                  "password": {"file": str(secret)}, "verify": str(emu.tls.ca),
                  "auth": "basic"}
        def received() -> str:
            seen = emu.requests()
            resets = [p for m, p in seen if m == "POST" and p.endswith("ComputerSystem.Reset")]
            reads = sum(1 for m, p in seen if m == "GET" and "/Systems/" in p)
            per = ", ".join(str(sum(1 for p in resets if p.startswith(path + "/")))
                            for path in emu.system_paths)
            return (f"{len(resets)} resets (power verbs sent; per system: {per}), "
                    f"{reads} system reads")

        return Started(config, emu.system_paths, {}, emu.stop, received)

    return start


BACKENDS: dict[str, tuple[str, Callable[[Path], Started]]] = {
    "simulated": ("core's simulated channel", _simulated),
    "redfish-1": ("sushy-tools emulator, realistic delay, 1 system", _emulator(1)),
    "redfish": ("sushy-tools emulator, realistic delay, 2 systems", _emulator(2)),
    "redfish-0": ("sushy-tools emulator, zero delay (the plugin's tests), 2 systems",
                  _emulator(2, zero_delay=True)),
    "pdu": ("snmpsim, APC rPDU2 (pdu plugin)", _peer("powerplane_pdu.peer")),
    "talos": ("Talos mock, gRPC", _peer("powerplane_talos.peer")),
    "ec2": ("moto EC2 server (cloud plugin)", _peer("powerplane_cloud.peer")),
    "ipmi": ("ipmi_sim, two BMCs", _peer("powerplane_ipmi.peer")),
}


def target_of(name: str, peer: Started) -> dict[str, Any]:
    """Two nodes (one for ``redfish-1``) on the peer's channel; default settings."""
    nodes = {f"n{i}": {"channels": [{"channel": name, "target": t}]}
             for i, t in enumerate(peer.targets[:2])}
    section: dict[str, Any] = {"allow_destructive": True, **peer.conformance}
    if peer.power_on_by_hand is not None:
        section["attended"] = True
    if peer.config.get("type") == "ec2":
        section["allow_terminate"] = True
    return {"channels": {name: peer.config}, "nodes": nodes, "conformance": section}


def durations(junit: Path) -> list[tuple[float, str]]:
    """(seconds, test id) of every check in the JUnit file, slowest first."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        out.append((float(case.get("time", 0)), case.get("name", "?")))
    return sorted(out, reverse=True)


def bench(name: str, work: Path) -> dict[str, Any] | None:
    label, start = BACKENDS[name]
    where = work / name
    where.mkdir()
    try:
        peer = start(where)
    except Exception as exc:  # a plugin or peer that is not installed here
        print(f"{name} ({label}): skipped ({type(exc).__name__}: {exc})")
        return None
    try:
        t0 = time.perf_counter()
        press = peer.power_on_by_hand
        summary: RunSummary = run_suite(
            target_of(name.split("-")[0], peer), report=where / "results.json",
            junit=where / "junit.xml",
            power_on_by_hand=(lambda node, target: press(target)) if press else None)
        seconds = time.perf_counter() - t0
        received = peer.requests() if peer.requests is not None else ""
    finally:
        peer.stop()
    data = summary.data
    c = data["counts"]
    line = (f"{name} ({label}): {seconds:.1f} s, verdict {data.get('verdict')}, exit "
            f"{summary.exit_code}; pass {c['pass']}, fail {c['fail']}, skip {c['skip']}, "
            f"not tested {c['not_tested']}, xfail {c.get('xfail', 0)}")
    target = TARGETS_S.get(name)
    if target is not None:
        line += f"; ratio to the {target:g} s target: {seconds / target:.2f}"
    if name.startswith("redfish"):
        line += f"; ratio to today's {TODAY_EMULATOR_S:g} s: {seconds / TODAY_EMULATOR_S:.2f}"
        if name != "redfish-0":
            bound = MIN_CHANGES * MEAN_DELAY_S
            line += (f"; physical lower bound {MIN_CHANGES} changes x {MEAN_DELAY_S:g} s = "
                     f"{bound:g} s (mean), ratio {seconds / bound:.2f}")
    print(line)
    if received:
        print(f"    the peer received: {received}")
    for r in data["results"]:
        if r["outcome"] == "fail":
            print(f"    FAIL {r['id']} {r.get('node')} {r.get('verb')}: "
                  f"{r['message'].splitlines()[-1] if r['message'] else ''}")
    if data.get("verdict") != "pass":
        print(f"    {data.get('headline')}: {data.get('verdict_reason')}")
    by_hand = sum(r["message"].count("the way back was a person") for r in data["results"])
    if by_hand:
        print(f"    powered on by hand (then read back on): {by_hand} time(s)")
    for secs, test in durations(where / "junit.xml")[:10]:
        print(f"    {secs:7.2f} s  {test}")
    sys.stdout.flush()
    return {"name": name, "seconds": seconds, "target": target}


def main(argv: list[str]) -> int:
    names = argv or list(BACKENDS)
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        print(f"unknown backend(s) {', '.join(unknown)}; known: {', '.join(BACKENDS)}")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-conformance-") as tmp:
        for name in names:
            row = bench(name, Path(tmp))
            if row is not None:
                rows.append(row)
    print("\nbackend      seconds  target  ratio")
    for row in rows:
        target = row["target"]
        ratio = f"{row['seconds'] / target:.2f}" if target else "-"
        print(f"{row['name']:<12} {row['seconds']:7.1f}  {target or '-':>6}  {ratio:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
