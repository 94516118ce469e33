"""The second peer: pyghmi's own BMC simulator (``pyghmi.ipmi.bmc.Bmc``), in its own process.

An implementation independent of ``ipmi_sim`` (pyghmi's server side, cipher suite 3 only),
so the plugin is proven against two. :class:`PyghmiBmc` starts it with
``python -m powerplane_ipmi.testing.bmcsim DIR`` and stops it by its process handle; the
accounts and their passwords are read from ``DIR/users.json`` (never from argv), and the
simulator writes the machine's state and its session counts to ``DIR/state.json``.

Where it differs from pyghmi's stock simulator, on purpose:

- It behaves as a real BMC does on privilege: a RAKP 1 asking for more than the account's
  limit is answered with RAKP status 0x09 (invalid role), where ``ipmi_sim`` grants it.
- Get Channel Cipher Suites answers the configured set (``suites``; default ``[3]``, the
  one suite pyghmi's server implements), so a test can offer, say, only suite 0.
- Get Device ID declares a chassis device; chassis control changes the machine: power
  down, power up, hard reset (a boot), soft-off (off after ``soft_off_delay_s``).
- It counts sessions: opened (RAKP 4 sent with status 0) and closed (Close Session).
- With ``already=0xD5`` it answers a chassis control that would not change the machine
  (power up while on; power down or soft-off while off) with that completion code, as
  BMCs do that ``ipmitool`` reports as "Command not supported in present state"; the
  refusal is logged (``refused power up: already on``) and nothing changes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from powerplane.testing import Subprocess, free_port, wait_ready

__all__ = ["PyghmiBmc", "main"]


class PyghmiBmc:
    """pyghmi's BMC simulator on ``127.0.0.1`` and a free UDP port (its own process)."""

    def __init__(self, workdir: Path, *, users: dict[str, tuple[str, int]] | None = None,
                 suites: list[int] | None = None, power: str = "on",
                 soft_off_delay_s: float = 0.3, kg: str | None = None,
                 already: int | None = None) -> None:
        import secrets

        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.users = users or {"oper": (f"pp-{secrets.token_hex(6)}", 3),
                               "usr": (f"pp-{secrets.token_hex(6)}", 2)}
        """name -> (password, privilege limit: 2 user, 3 operator, 4 administrator)."""
        self.suites = suites if suites is not None else [3]
        self.power_at_start = power
        self.soft_off_delay_s = soft_off_delay_s
        self.kg = kg
        self.already = already
        """The completion code a chassis control that changes nothing is answered with
        (None: carried out, as pyghmi's stock simulator does)."""
        self.host = "127.0.0.1"
        self.port = 0
        self.proc: Subprocess | None = None

    @property
    def address(self) -> str:
        """The BMC's address as a node's target."""
        return f"{self.host}:{self.port}"

    def secret_file(self, user: str) -> Path:
        """A 0600 file with ``user``'s password."""
        path = self.workdir / f"{user}.password"
        path.write_text(self.users[user][0] + "\n", encoding="utf-8")
        path.chmod(0o600)
        return path

    def start(self, timeout: float = 20.0) -> PyghmiBmc:
        """Start the simulator; return once it answers a sessionless probe."""
        from powerplane_ipmi.config import parse_target
        from powerplane_ipmi.wire import sessionless

        self.port = free_port("udp", self.host)
        spec = self.workdir / "users.json"
        spec.write_text(json.dumps({
            "port": self.port, "users": self.users, "suites": self.suites,
            "power": self.power_at_start, "soft_off_delay_s": self.soft_off_delay_s,
            "kg": self.kg, "already": self.already}), encoding="utf-8")
        spec.chmod(0o600)
        self.proc = Subprocess([sys.executable, "-m", "powerplane_ipmi.testing.bmcsim",
                                self.workdir], log=self.workdir / "bmcsim.log")

        def answers() -> bool:
            code, _ = sessionless(parse_target(self.address), 0x06, 0x38, b"\x8e\x04", 0.2, 1)
            return code == 0

        wait_ready(answers, timeout, f"pyghmi BMC simulator on udp {self.address}", self.proc)
        return self

    def stop(self) -> None:
        """Stop the simulator by its process handle."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop()

    def __enter__(self) -> PyghmiBmc:
        return self.start()

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        """``{"power": "on"|"off", "boots": N, "opened": N, "closed": N, "log": [...]}``."""
        for _ in range(50):
            try:
                data: dict[str, Any] = json.loads((self.workdir / "state.json").read_text())
                return data
            except (OSError, ValueError):
                time.sleep(0.02)
        raise RuntimeError("the simulator wrote no state")

    def power(self) -> str:
        """The machine's power state."""
        return str(self.state()["power"])


def _serve(workdir: Path) -> None:  # pragma: no cover - runs in the simulator's process
    import pyghmi.ipmi.bmc as bmc
    import pyghmi.ipmi.private.serversession as serversession
    import pyghmi.ipmi.private.session as session

    spec = json.loads((workdir / "users.json").read_text())
    users: dict[str, tuple[str, int]] = {k: (v[0], int(v[1])) for k, v in spec["users"].items()}
    suites: list[int] = list(spec["suites"])
    lock = threading.Lock()
    st: dict[str, Any] = {"power": spec["power"], "boots": 0, "opened": 0, "closed": 0,
                          "log": []}

    def save() -> None:
        tmp = workdir / "state.json.tmp"
        tmp.write_text(json.dumps(st))
        tmp.replace(workdir / "state.json")

    def change(**kw: Any) -> None:
        with lock:
            st.update(kw)
            save()

    save()

    class Session(serversession.ServerSession):  # type: ignore[misc]
        def _got_rmcp_openrequest(self, data: Any) -> None:
            # pyghmi's server answers a new open request from a known client address on the
            # old session object, keeping its keys and sequence numbers; a real BMC starts
            # a new session: so does this one
            Session(self.authdata, self.kg, self.sockaddr, self.socket, bytes(data),
                    self.uuid, bmc=self.bmc)

        def _got_rakp1(self, data: Any) -> None:
            name = bytes(data[28:]).decode("utf-8", "replace")
            role = data[24] & 0x0F
            account = users.get(name)
            if account is not None and role > account[1]:
                # a real BMC: the role asked for is above the account's limit
                clienttag = data[0]
                self.send_payload(bytearray([clienttag, 0x09, 0, 0]) + self.clientsessionid,
                                  session.constants.payload_types["rakp2"], retry=False)
                return
            super()._got_rakp1(data)

        def _send_rakp4(self, tagvalue: int, statuscode: int) -> None:
            super()._send_rakp4(tagvalue, statuscode)
            if statuscode == 0:
                with lock:
                    st["opened"] += 1
                    save()

        def close_server_session(self) -> None:
            with lock:
                st["closed"] += 1
                save()

    serversession.ServerSession = Session

    class Sim(bmc.Bmc):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__({k: v[0] for k, v in users.items()}, port=spec["port"],
                             address="127.0.0.1")
            self.additionaldevices = 0x80  # a chassis device (Get Device ID)
            if spec.get("kg"):
                self.set_kg(spec["kg"])

        def send_cipher_suites(self, myaddr: int, mylun: int, clientaddr: int, clientlun: int,
                               clientseq: int, data: Any, sockaddr: Any) -> None:
            records = b"".join(bytes([0xC0, s]) for s in suites)
            body = bytes([myaddr, mylun | clientseq << 2, 0x54, 0x00, 0x01]) + records
            head = bytes([clientaddr, clientlun | (7 << 2)])
            msg = (head + bytes([session._checksum(*head)]) + body
                   + bytes([session._checksum(*body)]))
            pkt = (b"\x06\x00\xff\x07\x00" + b"\x00" * 8 + bytes([len(msg)]) + msg)
            session._io_sendto(self.serversocket, pkt, sockaddr)

        def get_power_state(self) -> str:
            return str(st["power"])

        def refused(self, what: str, state: str) -> int | None:
            """The configured completion code when the machine is already ``state``."""
            code = spec.get("already")
            if code is None or st["power"] != state:
                return None
            change(log=[*st["log"], f"refused {what}: already {state}"])
            return int(code)

        def power_off(self) -> int | None:
            code = self.refused("power down", "off")
            if code is not None:
                return code
            change(power="off", log=[*st["log"], "power down"])
            return None

        def power_on(self) -> int | None:
            code = self.refused("power up", "on")
            if code is not None:
                return code
            boots = st["boots"] + (1 if st["power"] == "off" else 0)
            change(power="on", boots=boots, log=[*st["log"], "power up"])
            return None

        def power_reset(self) -> None:
            boots = st["boots"] + (1 if st["power"] == "on" else 0)
            change(boots=boots, log=[*st["log"], "hard reset"])

        def power_cycle(self) -> None:
            change(power="on", boots=st["boots"] + 1, log=[*st["log"], "power cycle"])

        def power_shutdown(self) -> int | None:
            code = self.refused("soft-off", "off")
            if code is not None:
                return code
            change(log=[*st["log"], "soft-off"])

            def later() -> None:
                time.sleep(float(spec["soft_off_delay_s"]))
                change(power="off", log=[*st["log"], "soft-off reached off"])

            if st["power"] == "on":
                threading.Thread(target=later, daemon=True).start()
            return None

    Sim().listen(timeout=1)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - the simulator's process
    """``python -m powerplane_ipmi.testing.bmcsim DIR``: serve until terminated."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m powerplane_ipmi.testing.bmcsim DIR", file=sys.stderr)
        return 2
    _serve(Path(args[0]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
