"""No kill at any moment leaves the client's private key in a file.

A driver process builds a Talos channel from inline secret references (the key in an
environment variable, so no file of ours holds it to begin with), and runs a reboot
that the mock holds (a ``slow`` fault). The test SIGKILLs it mid-call -- once the mock
has received the request, or at the moment the TLS context loads the key -- then
searches the driver's temporary directory and working directory for the key's PEM
body, as is or base64-encoded as a talosconfig stores it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from talos_support import files_holding, key_body

from powerplane_talos.talosconfig import load_talosconfig

pytestmark = pytest.mark.timeout(120)

DRIVER = """
import asyncio, os, signal, ssl, sys
from powerplane_talos import TalosChannel, TalosConfig

transport, endpoint, node, refs, talosctl, kill_at_load = sys.argv[1:7]
if kill_at_load == "yes":
    def die(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)  # the worst moment: the key is being loaded
    ssl.SSLContext.load_cert_chain = die
config = TalosConfig(
    endpoint=endpoint, ca={"file": os.path.join(refs, "ca")},
    crt={"file": os.path.join(refs, "crt")}, key={"env": "DRIVER_TALOS_KEY"},
    transport=transport, talosctl=talosctl, timeouts={"connect_s": 600, "read_s": 600},
)
channel = TalosChannel("talos", config)
print("calling", flush=True)
asyncio.run(channel.reboot(node))
"""


def start_driver(peer: Any, tmp_path: Path, node: str, transport: str, standin: Path,
                 *, kill_at_load: bool = False) -> tuple[subprocess.Popen[bytes], list[Path]]:
    """The driver in its own session, with its own TMPDIR and working directory."""
    creds = load_talosconfig(peer.talosconfig)
    assert creds.crt is not None and creds.key is not None
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "ca").write_bytes(creds.ca)
    (refs / "crt").write_bytes(creds.crt)
    scratch, cwd = tmp_path / "tmp", tmp_path / "cwd"
    scratch.mkdir()
    cwd.mkdir()
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {**os.environ, "TMPDIR": str(scratch), "DRIVER_TALOS_KEY": creds.key.decode()}
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), transport, peer.endpoint, node,
         str(refs), str(standin), "yes" if kill_at_load else "no"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, [scratch, cwd]


def wait_until_received(peer: Any, node: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the mock holds the driver's Reboot (bounded by an explicit 60 s timeout)."""
    deadline = time.monotonic() + 60
    while {"node": node, "rpc": "Reboot"} not in peer.control.received():
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the Reboot did not reach the mock within 60 s"
        time.sleep(0.05)


def end_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL what is left of the driver's own session (the talosctl child, if any)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.mark.parametrize("transport", ["grpc", "talosctl"])
def test_sigkill_mid_call_leaves_no_file_holding_the_key(
    ed_mock: Any, tmp_path: Path, node: str, transport: str, standin: Path
) -> None:
    ed_mock.control.fault(node, "slow", seconds=60)
    proc, dirs = start_driver(ed_mock, tmp_path, node, transport, standin)
    try:
        wait_until_received(ed_mock, node, proc)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        body = key_body(ed_mock.talosconfig)
        assert files_holding(body, *dirs) == []
    finally:
        end_session(proc)
        ed_mock.control.clear(node)
    assert files_holding(key_body(ed_mock.talosconfig), *dirs) == []


def test_sigkill_while_the_tls_context_loads_the_key_leaves_no_file(
    ed_mock: Any, tmp_path: Path, node: str, standin: Path
) -> None:
    proc, dirs = start_driver(ed_mock, tmp_path, node, "grpc", standin, kill_at_load=True)
    try:
        assert proc.wait(60) == -signal.SIGKILL
    finally:
        end_session(proc)
    assert files_holding(key_body(ed_mock.talosconfig), *dirs) == []


def test_the_tls_context_loads_the_key_from_no_file_on_disk(
    ed_mock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    from powerplane_talos.tls import client_context

    creds = load_talosconfig(ed_mock.talosconfig)
    seen: list[tuple[str, bool]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, keyfile: Any = None, password: Any = None
            ) -> None:
        for path in (certfile, keyfile):
            real = os.path.realpath(path)
            seen.append((str(path), os.path.isfile(real) and not real.startswith("/memfd:")))
        original(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    client_context(creds.ca, creds.crt, creds.key)
    assert len(seen) == 2
    assert all(path.startswith(("/proc/self/fd/", "/dev/fd/")) for path, _ in seen)
    assert not any(on_disk for _, on_disk in seen)
