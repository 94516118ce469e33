"""Real peers for the PDU tests: snmpsim (from ``powerplane_pdu.testing``) and a small Redfish
PDU serving DMTF's public-pdu mockup, each on a free loopback port (``powerplane.testing``)
and stopped by its own process handle.
"""

from __future__ import annotations

import ssl
import sys
from pathlib import Path

import httpx

from powerplane.testing import Subprocess, free_port, wait_ready
from powerplane_pdu.testing.simulator import V3_USER, SnmpSim, snmprec_lines, write_snmprec

AUTH_KEY = "auth-KEY-s3cr3t-1"
"""The v3 auth key the tests configure (no message may contain it)."""
PRIV_KEY = "priv-KEY-s3cr3t-2"
"""The v3 privacy key the tests configure."""

__all__ = [
    "AUTH_KEY", "PRIV_KEY", "V3_USER", "RedfishServer", "SnmpSim", "snmprec_lines",
    "write_snmprec",
]

HERE = Path(__file__).resolve().parent


class RedfishServer:
    """``redfish_pdu_server.py`` on 127.0.0.1:<free port>, serving a copy of the mockup."""

    def __init__(
        self,
        mockup: Path,
        user: str,
        password_file: Path,
        tls: tuple[Path, Path] | None = None,
        ca: Path | None = None,
    ) -> None:
        self.port = free_port("tcp")
        self.mockup = mockup
        self.user = user
        self.password_file = password_file
        self.tls = tls
        self.ca = ca
        """The CA that signed ``tls`` (the readiness check verifies against it)."""
        self.proc: Subprocess | None = None

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
        log = self.password_file.parent / f"redfish-pdu-{self.port}.log"
        self.proc = Subprocess(argv, log=log)
        verify: bool | ssl.SSLContext = (
            ssl.create_default_context(cafile=str(self.ca)) if self.ca else False
        )

        def answers() -> bool:
            return httpx.get(f"{self.url}/redfish/v1", verify=verify, timeout=1).status_code == 200

        wait_ready(answers, timeout, f"redfish test PDU on {self.url}", self.proc)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop()

