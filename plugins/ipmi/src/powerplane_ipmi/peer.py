"""The loopback peer of the ``ipmi`` plugin: OpenIPMI's ``ipmi_sim``, for its tests and the demo.

:class:`IpmiSim` writes a lan configuration (one LAN channel on ``127.0.0.1`` and a free
UDP port, users at operator, user and administrator privilege, MD5 for IPMI 1.5 and the
RMCP+ suites ``ipmi_sim`` implements, 0 to 14), an emulator command file (one BMC at 20h,
a chassis device) and a chassis control script that really changes the simulated
machine's state: ``set power 0|1`` writes it, ``set reset 1`` counts a boot, ``set
shutdown 1`` (soft-off) turns it off after ``soft_off_delay_s``, ``get power`` reads it.
Every chassis action is appended to ``chassis.log``. It starts ``ipmi_sim`` (Debian package
``openipmi``) as its own process and stops it by that handle.

``ipmi_sim``'s cipher suites are fixed in its code (0 to 14, no 17): the "chosen set" a
test needs beyond that comes from the second peer, :mod:`powerplane_ipmi.testing`.
Measured: on a name-only RAKP lookup ``ipmi_sim`` grants the role the client asks for, so
the ``user`` account gets an operator session; its Get User Access still says ``user``.
"""

from __future__ import annotations

import secrets
import shutil
import struct
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from powerplane.testing import Peer, PeerNotReady, StartedPeer, Subprocess, free_port, wait_ready

__all__ = ["IPMI_SIM", "PEER", "USERS", "IpmiSim", "IpmiSimMissing"]

IPMI_SIM = "ipmi_sim"
"""The simulator's executable (Debian package ``openipmi``)."""

USERS = {"oper": "operator", "usr": "user", "admin": "admin"}
"""The accounts the peer defines: name -> privilege limit (ipmi_sim's words)."""

_SCRIPT = r"""#!/bin/sh
# ipmi_sim chassis control for one simulated machine; state lives next to this script.
#   <script> <mc> get power|boot ...     prints parm:value
#   <script> <mc> set power 0|1 | reset 1 | shutdown 1 | boot X ...
d=$(dirname "$0")
now() { date +%s%N; }
settle() {
  if [ -f "$d/off_at" ] && [ "$(now)" -ge "$(cat "$d/off_at")" ]; then
    echo 0 > "$d/power"; rm -f "$d/off_at"; echo "soft-off reached off" >> "$d/chassis.log"
  fi
}
boot() { echo $(( $(cat "$d/boots") + 1 )) > "$d/boots"; }
op=$2; shift 2
settle
case "$op" in
  get)
    for p in "$@"; do
      case "$p" in
        power) echo "power:$(cat "$d/power")" ;;
        boot) echo "boot:default" ;;
        *) echo "Invalid parameter: $p"; exit 1 ;;
      esac
    done ;;
  set)
    while [ $# -ge 2 ]; do
      p=$1; v=$2; shift 2
      echo "$p $v" >> "$d/chassis.log"
      case "$p" in
        power)
          old=$(cat "$d/power"); echo "$v" > "$d/power"; rm -f "$d/off_at"
          if [ "$old" = 0 ] && [ "$v" = 1 ]; then boot; fi ;;
        reset) if [ "$(cat "$d/power")" = 1 ]; then boot; fi ;;
        shutdown)
          if [ "$(cat "$d/power")" = 1 ] && [ ! -f "$d/off_at" ]; then
            echo $(( $(now) + @DELAY_NS@ )) > "$d/off_at"
          fi ;;
        boot|identify) ;;
        *) echo "Invalid parameter: $p"; exit 1 ;;
      esac
    done ;;
  *) echo "Unknown operation: $op"; exit 1 ;;
esac
"""


class IpmiSimMissing(RuntimeError):
    """``ipmi_sim`` is not installed (install the Debian package ``openipmi``)."""


class IpmiSim:
    """One ``ipmi_sim`` BMC with one simulated machine, on loopback.

    Use as a context manager or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, workdir: Path, *, power: str = "on", soft_off_delay_s: float = 0.3,
                 kg: str | None = None, name: str = "ppsim",
                 passwords: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = 0
        self.name = name
        self.kg = kg
        self.soft_off_delay_s = soft_off_delay_s
        self.passwords = dict(passwords) if passwords else {
            user: f"pp-{secrets.token_hex(6)}" for user in USERS}
        """Each account's password (random per peer; at most 20 bytes, IPMI's limit)."""
        self._initial_power = power
        self.proc: Subprocess | None = None

    # -- files -----------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The BMC's address as a node's target: ``127.0.0.1:PORT``."""
        return f"{self.host}:{self.port}"

    def secret_file(self, user: str) -> Path:
        """A 0600 file holding ``user``'s password (for a ``{file: PATH}`` reference)."""
        path = self.workdir / f"{user}.password"
        if not path.exists():
            path.write_text(self.passwords[user] + "\n", encoding="utf-8")
            path.chmod(0o600)
        return path

    def kg_file(self, value: str | None = None) -> Path:
        """A 0600 file holding a K_g value (the peer's own, or ``value``)."""
        text = value if value is not None else (self.kg or "")
        path = self.workdir / f"kg-{secrets.token_hex(3)}"
        path.write_text(text + "\n", encoding="utf-8")
        path.chmod(0o600)
        return path

    def _write(self) -> Path:
        d = self.workdir
        (d / "state").mkdir(exist_ok=True)
        (d / "power").write_text("1\n" if self._initial_power == "on" else "0\n")
        (d / "boots").write_text("0\n")
        (d / "chassis.log").write_text("")
        script = d / "chassis"
        script.write_text(_SCRIPT.replace("@DELAY_NS@", str(int(self.soft_off_delay_s * 1e9))))
        script.chmod(0o700)
        users = "\n".join(
            f'  user {i} true "{user}" "{self.passwords[user]}" {priv} 10 md5'
            for i, (user, priv) in enumerate(USERS.items(), start=2))
        kg = f'    bmc_key "{self.kg}"\n' if self.kg else ""
        conf = d / "lan.conf"
        conf.write_text(
            f'name "{self.name}"\n'
            "set_working_mc 0x20\n"
            "  startlan 1\n"
            f"    addr {self.host} {self.port}\n"
            "    priv_limit admin\n"
            "    allowed_auths_callback md5\n"
            "    allowed_auths_user md5\n"
            "    allowed_auths_operator md5\n"
            "    allowed_auths_admin md5\n"
            f"    guid {secrets.token_hex(16)}\n"
            f"{kg}"
            "  endlan\n"
            f'  chassis_control "{script} 0x20"\n'
            f"{users}\n", encoding="utf-8")
        conf.chmod(0o600)
        (d / "sim.emu").write_text(
            "mc_setbmc 0x20\n"
            # IPMB 20h, device id 0, no device SDRs, revision 3, firmware 9.08,
            # device support 9Fh (bit 7: chassis device), manufacturer, product
            "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
            "mc_enable 0x20\n")
        return conf

    # -- process --------------------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> IpmiSim:
        """Start ``ipmi_sim`` on a free UDP port; return once it answers a sessionless probe.

        The port is chosen free a moment before ``ipmi_sim`` binds it; if another process
        takes it first, a new port is tried (up to five times).
        """
        exe = shutil.which(IPMI_SIM)
        if exe is None:
            raise IpmiSimMissing("ipmi_sim is not installed: install the Debian package "
                                 "'openipmi' (apt-get install openipmi)")
        last: Exception | None = None
        for _ in range(5):
            self.port = free_port("udp", self.host)
            conf = self._write()
            self.proc = Subprocess(
                [exe, "-c", conf, "-f", self.workdir / "sim.emu", "-s", self.workdir / "state",
                 "-n"], cwd=self.workdir, log=self.workdir / "ipmi_sim.log")
            try:
                wait_ready(self._answers, timeout, f"ipmi_sim on udp {self.address}", self.proc)
                return self
            except PeerNotReady as exc:
                last = exc
                self.stop()
        raise RuntimeError(f"ipmi_sim did not start: {last}")

    def _answers(self) -> bool:
        from powerplane_ipmi.config import parse_target
        from powerplane_ipmi.wire import sessionless

        try:
            code, _ = sessionless(parse_target(self.address), 0x06, 0x38, b"\x8e\x04", 0.2, 1)
        except Exception:
            return False
        return code == 0

    def stop(self) -> None:
        """Stop the simulator (and any chassis script it runs) by its own process handle."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop()

    def __enter__(self) -> IpmiSim:
        return self.start()

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The simulator's process id while it runs."""
        return self.proc.pid if self.proc is not None else None

    # -- the simulated machine -------------------------------------------------------------------
    def power(self) -> str:
        """``on`` or ``off``: the machine's state as the chassis script keeps it."""
        off_at = self.workdir / "off_at"
        if off_at.exists():
            try:
                if time.time_ns() >= int(off_at.read_text().strip()):
                    return "off"
            except (OSError, ValueError):
                pass
        return "on" if (self.workdir / "power").read_text().strip() == "1" else "off"

    def set_power(self, state: str) -> None:
        """Set the machine's state by hand (a person at the rack)."""
        (self.workdir / "off_at").unlink(missing_ok=True)
        (self.workdir / "power").write_text("1\n" if state == "on" else "0\n")

    def boots(self) -> int:
        """Boots counted by the chassis script (power up from off, hard reset while on)."""
        return int((self.workdir / "boots").read_text().strip() or 0)

    def chassis_log(self) -> list[str]:
        """Every chassis action ``ipmi_sim`` handed to the script, in order."""
        return (self.workdir / "chassis.log").read_text().splitlines()

    def active_sessions(self) -> int:
        """Sessions open at the BMC now, not counting the one this asks through.

        Asked through an administrator session (Get Session Info, "number of active sessions
        on this channel"), which is closed again before returning.
        """
        from powerplane_ipmi.session import forget_login, session_class

        sess: Any = session_class(3, False)(self.host, "admin", self.passwords["admin"],
                                           port=self.port, privlevel=4, keepalive=False,
                                           kg=self.kg)
        forget_login(sess)
        try:
            resp = sess.raw_command(netfn=0x06, command=0x3D, data=[0])
            if resp.get("code"):
                raise RuntimeError(f"Get Session Info answered {resp.get('code'):#x}")
            return int(resp["data"][2] & 0x3F) - 1
        finally:
            sid = struct.unpack("4B", struct.pack("<I", sess.sessionid))
            sess.raw_command(netfn=0x06, command=0x3C, data=list(sid))
            sess.logged = 0
            sess.logout()


def start(where: Path) -> StartedPeer:
    """Two ``ipmi_sim`` BMCs for the demo; the channel logs in as the operator account."""
    shared = {user: f"pp-{secrets.token_hex(6)}" for user in USERS}
    sims = [IpmiSim(where / f"bmc{i}", soft_off_delay_s=0.5, name=f"demo{i}", passwords=shared)
            for i in (1, 2)]
    started: list[IpmiSim] = []
    try:
        for sim in sims:
            started.append(sim.start())
    except BaseException:
        for sim in started:
            sim.stop()
        raise

    def stop() -> None:
        for sim in sims:
            sim.stop()

    return StartedPeer(
        config={"type": "ipmi", "username": "oper",
                "password": {"file": str(sims[0].secret_file("oper"))},
                "shutdown": "graceful", "reboot": "force",
                "timeouts": {"connect_s": 2, "read_s": 3}},
        targets=[sim.address for sim in sims],
        stop=stop,
        description="OpenIPMI ipmi_sim, IPMI 2.0 / RMCP+ cipher suite 3, at "
                    + ", ".join(f"udp {s.address}" for s in sims),
        pids=[s.pid for s in sims if s.pid is not None],
    )


PEER = Peer(name="ipmi", role="bmc", start=start)
"""The IPMI peer of ``powerplane demo`` (plays the BMC role with ``--only ipmi,...``)."""
