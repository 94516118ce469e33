"""``powerplane.testing``: each helper does what peers, tests and benchmarks rely on."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import os
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from powerplane import hookspecs, testing
from powerplane.testing import (
    Peer,
    PeerNotReady,
    SilentServer,
    StartedPeer,
    Subprocess,
    TLSFiles,
    closed_port,
    free_port,
    issue_cert,
    make_ca,
    wait_ready,
)

PY = sys.executable


# --- imports and types ---------------------------------------------------------------------


def test_importing_it_needs_only_the_standard_library() -> None:
    code = textwrap.dedent("""
        import sys
        before = set(sys.modules)
        import powerplane.testing
        roots = {name.partition(".")[0] for name in set(sys.modules) - before}
        print(sorted(roots - set(sys.stdlib_module_names) - {"powerplane"}))
    """)
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert testing.__all__ == sorted(testing.__all__)
    for name in testing.__all__:
        assert getattr(testing, name) is not None


def test_peer_types_keep_the_demo_fields() -> None:
    assert [f.name for f in dataclasses.fields(Peer)] == ["name", "role", "start"]
    assert [f.name for f in dataclasses.fields(StartedPeer)] == [
        "config", "targets", "stop", "description", "power_on_by_hand", "conformance", "pids"]
    # the old names went with the demo (now powerplane-demo): core has no demo module
    assert importlib.util.find_spec("powerplane.demo") is None
    assert "Peer" in inspect.signature(hookspecs.register_demo_peers).parameters[
        "register"].annotation


def test_every_peer_field_has_a_docstring() -> None:
    tree = ast.parse(inspect.getsource(sys.modules[Peer.__module__]))
    for cls in (c for c in tree.body if isinstance(c, ast.ClassDef)):
        body = cls.body
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.AnnAssign):
                after = body[i + 1] if i + 1 < len(body) else None
                assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant), (
                    f"{cls.name}.{ast.unparse(stmt.target)} has no docstring")


def test_a_started_peer_defaults_and_stops() -> None:
    stopped: list[bool] = []
    started = Peer("x", "bmc", lambda where: StartedPeer(
        {"type": "simulated"}, ["a", "b"], lambda: stopped.append(True), "a stand-in"))
    got = started.start(Path("."))
    assert (got.power_on_by_hand, got.conformance, got.pids) == (None, {}, [])
    got.stop()
    assert stopped == [True]


# --- ports ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_free_port_can_be_bound(kind: str) -> None:
    port = free_port(kind)  # type: ignore[arg-type]
    sock_type = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, sock_type) as sock:
        sock.bind(("127.0.0.1", port))


def test_free_port_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="sctp"):
        free_port("sctp")  # type: ignore[arg-type]


def test_closed_port_refuses_connections() -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", closed_port()), timeout=5).close()


def test_silent_server_accepts_and_never_answers() -> None:
    with SilentServer() as server, socket.create_connection(
        ("127.0.0.1", server.port), timeout=5
    ) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv(1)


def test_silent_server_holds_many_connections_and_close_is_idempotent() -> None:
    server = SilentServer()
    clients = [socket.create_connection(("127.0.0.1", server.port), timeout=5)
               for _ in range(80)]  # more than the listen backlog: it accepts them
    try:
        server.close()
        server.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    finally:
        for c in clients:
            c.close()


def test_silent_udp_server_never_replies() -> None:
    with SilentServer(kind="udp") as server, socket.socket(
        socket.AF_INET, socket.SOCK_DGRAM
    ) as client:
        client.settimeout(0.5)
        client.sendto(b"\x30\x00", ("127.0.0.1", server.port))
        with pytest.raises(TimeoutError):
            client.recvfrom(1)


# --- Subprocess ----------------------------------------------------------------------------


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print("ready", child.pid, flush=True)
time.sleep(600)
"""


def _ready_line(proc: Subprocess) -> list[str]:
    def ready() -> bool:
        return "ready" in proc.log_tail()

    wait_ready(ready, 30, "the stubborn child", proc)
    return proc.log_tail().split()


def test_a_process_that_ignores_sigterm_is_killed_with_its_group(tmp_path: Path) -> None:
    proc = Subprocess([PY, "-c", STUBBORN], log=tmp_path / "stubborn.log")
    grandchild = int(_ready_line(proc)[1])
    pid = proc.pid
    assert proc.alive
    assert proc.stop(timeout=0.5) == -signal.SIGKILL
    assert not proc.alive
    assert proc.returncode == -signal.SIGKILL
    assert not _running(pid)
    wait_ready(lambda: not _running(grandchild), 10, "the grandchild to go")


def test_stop_is_idempotent_and_signals_nothing_twice(tmp_path: Path) -> None:
    proc = Subprocess([PY, "-c", "import time; time.sleep(600)"])
    assert proc.stop() == -signal.SIGTERM
    assert proc.stop() == -signal.SIGTERM
    assert not proc.alive


def test_context_manager_stops_and_leaves_no_process(tmp_path: Path) -> None:
    with Subprocess([PY, "-c", "import time; time.sleep(600)"], cwd=tmp_path) as proc:
        pid = proc.pid
        assert proc.alive
    assert not _running(pid)
    assert proc.returncode == -signal.SIGTERM


def test_a_process_that_ended_by_itself_reports_its_status(tmp_path: Path) -> None:
    proc = Subprocess([PY, "-c", "import sys; sys.exit(7)"])
    wait_ready(lambda: not proc.alive, 30, "the child to end")
    assert proc.returncode == 7
    assert proc.stop() == 7


def test_argv_cwd_env_and_log_reach_the_child(tmp_path: Path) -> None:
    code = "import os; print(os.getcwd(), os.environ.get('PP_TEST_VALUE'), os.environ.get('HOME'))"
    log = tmp_path / "logs" / "child.log"
    with Subprocess([PY, "-c", code], cwd=tmp_path, env={"PP_TEST_VALUE": "seen"},
                    log=log) as proc:
        wait_ready(lambda: not proc.alive, 30, "the child to end")
    assert log.read_text().split() == [str(tmp_path), "seen", "None"]


def test_an_empty_command_is_refused() -> None:
    with pytest.raises(ValueError, match="argv"):
        Subprocess([])


# --- wait_ready ----------------------------------------------------------------------------


def test_wait_ready_returns_once_the_check_passes() -> None:
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("not yet")
        return True

    wait_ready(check, 30, "the counter")
    assert len(calls) == 3


def test_wait_ready_names_what_it_waited_for_and_the_last_failure() -> None:
    def check() -> bool:
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(PeerNotReady, match=r"the widget emulator was not ready within 0\.3 s"
                       r".*ConnectionRefusedError: nobody home"):
        wait_ready(check, 0.3, "the widget emulator")


def test_wait_ready_reports_a_dead_process_with_its_status_and_log(tmp_path: Path) -> None:
    code = "import sys; print('port 80 is taken', file=sys.stderr); sys.exit(3)"
    proc = Subprocess([PY, "-c", code], log=tmp_path / "peer.log")
    with pytest.raises(PeerNotReady) as err:
        wait_ready(lambda: False, 60, "the snmp simulator", proc)
    message = str(err.value)
    assert "the snmp simulator exited with status 3 before it was ready" in message
    assert "port 80 is taken" in message
    assert not proc.alive


def test_wait_ready_stops_the_process_when_time_runs_out(tmp_path: Path) -> None:
    proc = Subprocess([PY, "-c", "import time; time.sleep(600)"])
    with pytest.raises(PeerNotReady, match="the sleeper was not ready"):
        wait_ready(lambda: False, 0.2, "the sleeper", proc)
    assert proc.returncode == -signal.SIGTERM


# --- certificates --------------------------------------------------------------------------


class TLSServer:
    """A one-connection TLS server on loopback; records the client's certificate subject."""

    def __init__(self, files: TLSFiles, client_ca: Path | None = None) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(files.cert, files.key)
        if client_ca is not None:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(client_ca)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.port = self.sock.getsockname()[1]
        self.client_subject: object = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
            with self.context.wrap_socket(conn, server_side=True) as tls:
                self.client_subject = (tls.getpeercert() or {}).get("subject")
                tls.sendall(b"ok")
        except (OSError, ssl.SSLError) as exc:
            self.error = exc

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


@pytest.fixture
def tls_server() -> Iterator[list[TLSServer]]:
    made: list[TLSServer] = []
    yield made
    for server in made:
        server.close()


def _client(ca: Path, client: TLSFiles | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        ctx.load_cert_chain(client.cert, client.key)
    return ctx


def _talk(ctx: ssl.SSLContext, port: int, hostname: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(
        raw, server_hostname=hostname
    ) as tls:
        return tls.recv(2)


@pytest.mark.parametrize("algorithm", ["ecdsa", "rsa", "ed25519"])
@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_a_server_certificate_verifies_with_ssl(
    tmp_path: Path, tls_server: list[TLSServer], algorithm: str, hostname: str
) -> None:
    ca = make_ca(tmp_path, "unit", algorithm=algorithm)  # type: ignore[arg-type]
    server = issue_cert(ca, tmp_path, algorithm=algorithm)  # type: ignore[arg-type]
    assert (server.ca, ca.ca, ca.cert) == (ca.cert, ca.cert, tmp_path / "unit-ca.pem")
    assert server.cert == tmp_path / "server.pem"
    assert (server.key.stat().st_mode & 0o777, ca.key.stat().st_mode & 0o777) == (0o600, 0o600)
    tls_server.append(TLSServer(server))
    assert _talk(_client(ca.ca), tls_server[-1].port, hostname) == b"ok"


def test_a_certificate_from_another_ca_does_not_verify(
    tmp_path: Path, tls_server: list[TLSServer]
) -> None:
    ca = make_ca(tmp_path / "a", "a")
    other = make_ca(tmp_path / "b", "b")
    tls_server.append(TLSServer(issue_cert(other, tmp_path / "b")))
    with pytest.raises(ssl.SSLCertVerificationError):
        _talk(_client(ca.ca), tls_server[-1].port, "localhost")


def test_a_name_not_in_the_certificate_does_not_verify(
    tmp_path: Path, tls_server: list[TLSServer]
) -> None:
    ca = make_ca(tmp_path)
    tls_server.append(TLSServer(issue_cert(ca, tmp_path, ["bmc.example"])))
    with pytest.raises(ssl.SSLCertVerificationError):
        _talk(_client(ca.ca), tls_server[-1].port, "localhost")


@pytest.mark.parametrize("algorithm", ["ed25519", "ecdsa"])
def test_mutual_tls_with_a_client_certificate_carrying_a_role(
    tmp_path: Path, tls_server: list[TLSServer], algorithm: str
) -> None:
    ca = make_ca(tmp_path, "talos", algorithm=algorithm,  # type: ignore[arg-type]
                 organization="talos")
    server = issue_cert(ca, tmp_path, stem="server", algorithm=algorithm)  # type: ignore[arg-type]
    admin = issue_cert(ca, tmp_path, [], stem="admin", common_name="admin",
                       organization="os:admin", client=True,
                       algorithm=algorithm)  # type: ignore[arg-type]
    tls_server.append(TLSServer(server, client_ca=ca.ca))
    assert _talk(_client(ca.ca, admin), tls_server[-1].port, "127.0.0.1") == b"ok"
    tls_server[-1].thread.join(10)
    assert tls_server[-1].client_subject == (
        (("organizationName", "os:admin"),), (("commonName", "admin"),))


def test_a_client_certificate_is_refused_as_a_server_certificate(
    tmp_path: Path, tls_server: list[TLSServer]
) -> None:
    ca = make_ca(tmp_path)
    tls_server.append(TLSServer(issue_cert(ca, tmp_path, client=True)))
    with pytest.raises(ssl.SSLCertVerificationError):
        _talk(_client(ca.ca), tls_server[-1].port, "127.0.0.1")


def test_key_formats_and_labels_as_talos_writes_them(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, "talos", algorithm="ed25519", key_label="ED25519 PRIVATE KEY")
    assert ca.key_pem().startswith(b"-----BEGIN ED25519 PRIVATE KEY-----\n")
    assert ca.key_pem().rstrip().endswith(b"-----END ED25519 PRIVATE KEY-----")
    ec_leaf = issue_cert(ca, tmp_path, stem="ec", key_format="traditional")
    assert ec_leaf.key_pem().startswith(b"-----BEGIN EC PRIVATE KEY-----")
    rsa_leaf = issue_cert(ca, tmp_path, stem="rsa", algorithm="rsa", key_format="traditional")
    assert rsa_leaf.key_pem().startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    # a CA whose key has a Talos label still signs
    again = issue_cert(ca, tmp_path, stem="ed", algorithm="ed25519")
    assert again.cert_pem().startswith(b"-----BEGIN CERTIFICATE-----")
    assert again.key_pem().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_bad_algorithm_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dsa"):
        make_ca(tmp_path, algorithm="dsa")  # type: ignore[arg-type]


def test_send_gate_marks_a_send_and_refuses_one_after_it_is_closed() -> None:
    from powerplane import ChannelTimeout, about_to_send
    from powerplane.testing import send_gate

    with send_gate() as gate:
        assert not gate.sent
        about_to_send()
        assert gate.sent
        gate.close()
        with pytest.raises(ChannelTimeout, match="not sent"):
            about_to_send()
    about_to_send()  # outside a gate: nothing to refuse
