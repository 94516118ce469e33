"""The sushy-tools emulator (fake driver) as a subprocess on a loopback port, TLS and basic auth.

Facts about the fake driver: a power change is applied 1-11 s after the request, on a later
GET; it allows On, ForceOff, GracefulShutdown, GracefulRestart, ForceRestart, Nmi, ForceOn;
it has no SessionService; it keeps state in ``SUSHY_EMULATOR_STATE_DIR`` (fresh per run).

Two ways to start it:

- ``cli=True``: the ``sushy-emulator`` command itself (real delays; no request counting);
- ``cli=False`` (default): the same emulator app through
  :mod:`powerplane_redfish.testing._emulator_main`, which counts requests at the emulator
  and can set the power-change delay to zero (``zero_delay=True``).
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import bcrypt
import requests

from powerplane.testing import Subprocess, TLSFiles, free_port, issue_cert, make_ca, wait_ready

__all__ = ["SushyEmulator"]


class SushyEmulator:
    """One emulator process with ``systems`` fake systems (all on at start)."""

    def __init__(
        self,
        workdir: Path,
        *,
        systems: int = 1,
        username: str = "admin",
        password: str = "s3cret-Passw0rd",
        zero_delay: bool = True,
        cli: bool = False,
        power_state: str = "On",
    ) -> None:
        self.workdir = workdir
        self.username = username
        self.password = password
        self.zero_delay = zero_delay
        self.cli = cli
        self.port = free_port()
        self.endpoint = f"https://127.0.0.1:{self.port}"
        ca = make_ca(workdir / "tls", "emulator")
        self.tls: TLSFiles = issue_cert(ca, workdir / "tls", stem="emulator-server")
        """The emulator's server certificate and key; ``tls.ca`` is a client's bundle."""
        self.request_log = workdir / "requests.log"
        self.stderr_log = workdir / "emulator.log"
        self.system_ids = [
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"powerplane-{i}")) for i in range(systems)
        ]
        self.power_state = power_state
        self._proc: Subprocess | None = None

    @property
    def system_paths(self) -> list[str]:
        """``/redfish/v1/Systems/<uuid>`` of every fake system."""
        return [f"/redfish/v1/Systems/{s}" for s in self.system_ids]

    def _write_config(self) -> Path:
        htpasswd = self.workdir / "htpasswd"
        digest = bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(rounds=4)).decode()
        htpasswd.write_text(f"{self.username}:{digest}\n", encoding="utf-8")
        state = self.workdir / "state"
        state.mkdir(exist_ok=True)
        systems = [
            {
                "uuid": sid,
                "name": f"fake-{i:03d}",
                "power_state": self.power_state,
                "external_notifier": False,
                "nics": [{"mac": f"00:5c:52:31:{i // 256:02x}:{i % 256:02x}",
                          "ip": "172.22.0.100"}],
            }
            for i, sid in enumerate(self.system_ids)
        ]
        values = {
            "SUSHY_EMULATOR_LISTEN_IP": "127.0.0.1",
            "SUSHY_EMULATOR_LISTEN_PORT": self.port,
            "SUSHY_EMULATOR_SSL_CERT": str(self.tls.cert),
            "SUSHY_EMULATOR_SSL_KEY": str(self.tls.key),
            "SUSHY_EMULATOR_AUTH_FILE": str(htpasswd),
            "SUSHY_EMULATOR_FAKE_DRIVER": True,
            "SUSHY_EMULATOR_STATE_DIR": str(state),
            "SUSHY_EMULATOR_FAKE_SYSTEMS": systems,
        }
        config = self.workdir / "emulator.conf"
        config.write_text(
            "".join(f"{k} = {v!r}\n" for k, v in values.items()), encoding="utf-8"
        )
        return config

    def start(self, timeout: float = 30.0) -> SushyEmulator:
        """Start the process and wait until the service root answers over TLS."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        self.request_log.write_text("", encoding="utf-8")
        if self.cli:
            exe = shutil.which("sushy-emulator") or str(Path(sys.executable).parent /
                                                         "sushy-emulator")
            argv = [exe, "--config", str(config), "--fake"]
        else:
            argv = [sys.executable, "-m", "powerplane_redfish.testing._emulator_main",
                    str(config), str(self.request_log), "1" if self.zero_delay else "0"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUSHY_EMULATOR")}
        self._proc = Subprocess(argv, cwd=self.workdir, env=env, log=self.stderr_log)
        wait_ready(self._answers, timeout, f"sushy-emulator at {self.endpoint}", self._proc)
        self.reset_count()
        return self

    def _answers(self) -> bool:
        requests.get(f"{self.endpoint}/redfish/v1/", verify=str(self.tls.ca), timeout=2)
        return True

    def requests(self) -> list[tuple[str, str]]:
        """Requests received since the last :meth:`reset_count`, as (method, path)."""
        lines = self.request_log.read_text(encoding="utf-8").splitlines()
        return [(m, p) for m, _, p in (line.partition(" ") for line in lines)]

    def reset_count(self) -> None:
        """Forget the requests seen so far."""
        self.request_log.write_text("", encoding="utf-8")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the process by its own handle (terminate, wait, kill after ``timeout``)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout)

    def __enter__(self) -> SushyEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
