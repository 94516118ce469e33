"""Real peers for the PDU tests and benchmark: snmpsim (from ``powerplane_pdu.simulator``)
and a small Redfish PDU serving DMTF's public-pdu mockup, each on a free loopback port and
stopped by its own process handle.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from powerplane_pdu.profiles import Profile
from powerplane_pdu.simulator import (
    V3_USER,
    SnmpSim,
    free_udp_port,
    snmprec_lines,
    write_snmprec,
)

AUTH_KEY = "auth-KEY-s3cr3t-1"
"""The v3 auth key the tests configure (no message may contain it)."""
PRIV_KEY = "priv-KEY-s3cr3t-2"
"""The v3 privacy key the tests configure."""

__all__ = [
    "AUTH_KEY", "PRIV_KEY", "V3_USER", "RedfishServer", "SnmpSim", "free_tcp_port",
    "free_udp_port", "snmprec_lines", "write_snmprec",
]

HERE = Path(__file__).resolve().parent


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
