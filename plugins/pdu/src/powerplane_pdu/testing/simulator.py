"""A simulated switched PDU on loopback: snmpsim serving data files written from a profile.

For tests, benchmarks and ``powerplane demo``; needs ``snmpsim`` and ``pysmi`` (the
``test`` extra). ``write_snmprec`` writes one simulated PDU (one ``.snmprec`` file; its
name is the v1/v2c community and the v3 context) from a vendor profile; the
``pduoutlet`` variation module (``testing/snmpsim_modules/pduoutlet.py``) makes a write to an
outlet's control object change its status and load objects, as the real PDU would
(snmpsim's own ``writecache`` only remembers the object written). :class:`SnmpSim` starts
``snmpsim-command-responder`` on a free loopback port (:func:`powerplane.testing.free_port`)
as a :class:`powerplane.testing.Subprocess`, waits with :func:`powerplane.testing.wait_ready`
until it answers, and stops it by that handle.
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from powerplane.testing import Subprocess, free_port, wait_ready
from powerplane_pdu.profiles import OutletState, Profile

__all__ = ["MODULES", "ON_LOAD_W", "V3_USER", "SnmpSim", "snmprec_lines", "snmpsim_command",
           "write_snmprec"]


def snmpsim_command() -> str:
    """Path of ``snmpsim-command-responder``; ``RuntimeError`` if it is not installed."""
    beside = Path(sys.executable).with_name("snmpsim-command-responder")
    if beside.exists():
        return str(beside)
    found = shutil.which("snmpsim-command-responder")
    if found is None:
        raise RuntimeError("snmpsim is not installed (pip install 'powerplane-pdu[test]')")
    return found


MODULES = Path(__file__).resolve().parent / "snmpsim_modules"
"""Where the ``pduoutlet`` variation module lives."""
V3_USER = "ppuser"
ON_LOAD_W = 150
"""What a metered outlet that is on draws, in the profile's raw unit."""


def _value_for(profile: Profile, state: OutletState) -> int:
    for value, meaning in profile.state_values.items():
        if meaning is state:
            return value
    raise ValueError(f"{profile.name} has no value for {state}")


def _oid_key(oid: str) -> tuple[int, ...]:
    return tuple(int(p) for p in oid.split("."))


def snmprec_lines(
    profile: Profile,
    outlets: dict[int, str],
    sys_object_id: str | None = None,
    faulty: frozenset[int] = frozenset(),
    already: str | None = None,
) -> list[str]:
    """Records for one PDU whose outlets start ``on`` or ``off``; ``faulty`` ones fail SETs;
    with ``already`` (an SNMP error status: ``genErr``, ``inconsistentValue``,
    ``commitFailed``) a SET that would switch an outlet into the state it is in is answered
    with that error and changes nothing."""
    records: dict[str, str] = {}
    sys_oid = sys_object_id or profile.sys_object_id or "1.3.6.1.4.1.99999.1"
    records["1.3.6.1.2.1.1.2.0"] = f"6|{sys_oid}"
    on_v = _value_for(profile, OutletState.ON)
    off_v = _value_for(profile, OutletState.OFF)
    for n, start in outlets.items():
        state_oid = profile.oid(profile.state_oid, n)
        load_oid = profile.oid(profile.load_oid, n) if profile.load_oid else None
        writes = [
            (profile.oid(profile.on_oid, n), profile.on_value, on_v, ON_LOAD_W),
            (profile.oid(profile.off_oid, n), profile.off_value, off_v, 0),
        ]
        effects: dict[str, list[str]] = {}
        for oid, written, state_value, load in writes:
            items = effects.setdefault(oid, [])
            if oid != state_oid:
                items.append(f"{written}@{state_oid}@{state_value}")
            if load_oid:
                items.append(f"{written}@{load_oid}@{load}")
        start_state = on_v if start == "on" else off_v
        for oid, items in effects.items():
            initial = start_state if oid == state_oid else -1
            eff = f",eff={'/'.join(items)}" if items else ""
            err = ",error=1" if n in faulty and oid != state_oid else ""
            if already:
                err += f",already={already},state={state_oid},now={start_state}"
            records[oid] = f"2:pduoutlet|value={initial}{eff}{err}"
        if state_oid not in records:
            records[state_oid] = f"2:pduoutlet|value={start_state}"
        if load_oid:
            records[load_oid] = f"2:pduoutlet|value={ON_LOAD_W if start == 'on' else 0}"
    return [f"{oid}|{rec}" for oid, rec in sorted(records.items(), key=lambda i: _oid_key(i[0]))]


def write_snmprec(
    data_dir: Path,
    name: str,
    profile: Profile,
    outlets: dict[int, str],
    sys_object_id: str | None = None,
    faulty: frozenset[int] = frozenset(),
    already: str | None = None,
) -> Path:
    """Write ``<name>.snmprec``: community ``name`` reaches this PDU (``faulty`` and
    ``already`` as :func:`snmprec_lines` takes them)."""
    path = data_dir / f"{name}.snmprec"
    lines = snmprec_lines(profile, outlets, sys_object_id, faulty, already)
    path.write_text("\n".join(lines) + "\n")
    return path


class SnmpSim:
    """snmpsim-command-responder on 127.0.0.1:<free port>, with one v3 authPriv user."""

    def __init__(self, data_dir: Path, work_dir: Path, auth_key: str, priv_key: str) -> None:
        self.data_dir = data_dir
        self.work_dir = work_dir
        self.port = free_port("udp")
        self.auth_key = auth_key
        self.priv_key = priv_key
        self.proc: Subprocess | None = None
        self.log = work_dir / "snmpsim.log"

    def start(self, timeout: float = 60.0) -> None:
        """Start it and wait until it answers; :class:`powerplane.testing.PeerNotReady`
        (a ``RuntimeError``) with the tail of its log if it does not."""
        env = dict(os.environ, SNMPSIM_ALLOW_ROOT="true")
        argv = [
            snmpsim_command(),
            f"--data-dir={self.data_dir}",
            f"--cache-dir={self.work_dir / 'cache'}",
            f"--agent-udpv4-endpoint=127.0.0.1:{self.port}",
            f"--variation-modules-dir={MODULES}",
            f"--v3-user={V3_USER}",
            "--v3-auth-proto=SHA",
            "--v3-priv-proto=AES",
            "--log-level=error",
            f"--pid-file={self.work_dir / 'snmpsim.pid'}",
        ]
        # Keys go through a file read by snmpsim (--args-from-file), never on argv.
        args_file = self.work_dir / "v3.args"
        args_file.write_text(f"--v3-auth-key={self.auth_key}\n--v3-priv-key={self.priv_key}\n")
        args_file.chmod(0o600)
        argv.append(f"--args-from-file={args_file}")
        self.proc = Subprocess(argv, env=env, log=self.log)
        wait_ready(self._answers, timeout, f"snmpsim on udp 127.0.0.1:{self.port}", self.proc)

    def _answers(self) -> bool:
        """Whether it answers a v2c GET of sysObjectID on any community file."""
        import asyncio

        from pysnmp.entity.engine import SnmpEngine
        from pysnmp.hlapi.v3arch.asyncio.auth import CommunityData
        from pysnmp.proto.rfc1902 import ObjectName

        from powerplane_pdu.snmp import SYS_OBJECT_ID, configure, send

        community = next(self.data_dir.glob("*.snmprec")).stem

        async def probe() -> bool:
            # the driver's own request path: numeric OIDs, no MIB compiler built per poll
            engine = SnmpEngine()
            try:
                target = await configure(engine, CommunityData(community), "127.0.0.1",
                                         self.port, 0.5, 0)
                err, _, _, _ = await send(engine, target, "", "get",
                                          [(ObjectName(SYS_OBJECT_ID), None)])
            finally:
                engine.close_dispatcher()
            return not err

        # in a thread of its own: the caller may be inside a running event loop
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(lambda: asyncio.run(probe())).result()

    def stop(self) -> None:
        """Stop snmpsim by its own process handle (idempotent)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop()
