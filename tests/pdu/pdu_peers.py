"""Real peers for the PDU tests and benchmark: snmpsim with per-profile data, the Redfish PDU.

``write_snmprec`` writes one simulated PDU (one ``.snmprec`` file; its name is the v1/v2c
community and the v3 context) from a vendor profile; the ``pduoutlet`` variation module
(``snmpsim_modules/pduoutlet.py``) makes a write to an outlet's control object change its
status and load objects, as the real PDU would. ``SnmpSim`` and ``RedfishServer`` start a
peer on a free loopback port and stop it by its own process handle.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from powerplane_pdu.profiles import OutletState, Profile

HERE = Path(__file__).resolve().parent
MODULES = HERE / "snmpsim_modules"
V3_USER = "ppuser"
SNMPSIM = Path(sys.executable).with_name("snmpsim-command-responder")
ON_LOAD_W = 150
"""What a metered outlet that is on draws, in the profile's raw unit."""


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
) -> list[str]:
    """Records for one PDU whose outlets start ``on`` or ``off``; ``faulty`` ones fail SETs."""
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
) -> Path:
    """Write ``<name>.snmprec``: community ``name`` reaches this PDU."""
    path = data_dir / f"{name}.snmprec"
    lines = snmprec_lines(profile, outlets, sys_object_id, faulty)
    path.write_text("\n".join(lines) + "\n")
    return path


class SnmpSim:
    """snmpsim-command-responder on 127.0.0.1:<free port>, with one v3 authPriv user."""

    def __init__(self, data_dir: Path, work_dir: Path, auth_key: str, priv_key: str) -> None:
        self.data_dir = data_dir
        self.work_dir = work_dir
        self.port = free_udp_port()
        self.auth_key = auth_key
        self.priv_key = priv_key
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = work_dir / "snmpsim.log"

    def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ, SNMPSIM_ALLOW_ROOT="true")
        argv = [
            str(SNMPSIM),
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
        argv.append(f"--args-from-file={args_file}")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Ready when it answers a v2c GET of sysObjectID on any community file."""
        import asyncio

        from pysnmp.hlapi.v3arch.asyncio import (
            CommunityData,
            ContextData,
            ObjectIdentity,
            ObjectType,
            SnmpEngine,
            UdpTransportTarget,
            get_cmd,
        )

        community = next(self.data_dir.glob("*.snmprec")).stem

        async def probe() -> bool:
            engine = SnmpEngine()
            target = await UdpTransportTarget.create(("127.0.0.1", self.port), 0.5, 0)
            try:
                err, _, _, _ = await get_cmd(
                    engine, CommunityData(community), target, ContextData(),
                    ObjectType(ObjectIdentity("1.3.6.1.2.1.1.2.0")), lookupMib=False,
                )
            finally:
                engine.close_dispatcher()
            return err is None

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"snmpsim exited: {self.log.read_text()[-2000:]}")
            if asyncio.run(probe()):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("snmpsim did not answer in time")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


class RedfishServer:
    """``redfish_pdu_server.py`` on 127.0.0.1:<free port>, serving a copy of the mockup."""

    def __init__(
        self,
        mockup: Path,
        user: str,
        password_file: Path,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.port = free_tcp_port()
        self.mockup = mockup
        self.user = user
        self.password_file = password_file
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        argv = [
            sys.executable, str(HERE / "redfish_pdu_server.py"),
            "--port", str(self.port), "--mockup", str(self.mockup),
            "--user", self.user, "--password-file", str(self.password_file),
        ]
        if self.tls:
            argv += ["--cert", str(self.tls[0]), "--key", str(self.tls[1])]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            if line.startswith("READY"):
                return
            if not line and self.proc.poll() is not None:
                raise RuntimeError("redfish test server exited")
        self.stop()
        raise RuntimeError("redfish test server did not start")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


def outlets_all(n: int, state: str = "on") -> dict[int, str]:
    return dict.fromkeys(range(1, n + 1), state)


def names(items: Iterable[Profile]) -> list[str]:
    return [p.name for p in items]
