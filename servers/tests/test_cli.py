"""``powerplane serve``: plain HTTP only on loopback unless told, a settings file with a way
to authenticate, a deployment with a lifecycle; served over TLS from certificate and key
files (HSTS on); ``--demo`` prints its URL and the two demo logins."""

from __future__ import annotations

import os
import select
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner
from servers_support import free_port, write_fleet

from powerplane.cli import cli
from powerplane.testing.tls import issue_cert, make_ca


def settings_file(tmp: Path) -> Path:
    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump({"proxy": {"trusted": ["127.0.0.1"]}}))
    return path


def test_plain_http_off_loopback_is_refused(tmp_path: Path) -> None:
    cfg = write_fleet(tmp_path)
    res = CliRunner().invoke(cli, ["--config", str(cfg), "serve", "--bind", "0.0.0.0",
                                   "--settings", str(settings_file(tmp_path))])
    assert res.exit_code == 2 and "--tls-cert" in res.output


def test_no_way_to_authenticate_is_refused(tmp_path: Path) -> None:
    cfg = write_fleet(tmp_path)
    res = CliRunner().invoke(cli, ["--config", str(cfg), "serve"])
    assert res.exit_code == 2 and "no way to authenticate" in res.output


def test_a_deployment_without_a_lifecycle_is_refused(tmp_path: Path) -> None:
    cfg = write_fleet(tmp_path)
    doc = yaml.safe_load(cfg.read_text())
    del doc["lifecycle"]
    cfg.write_text(yaml.safe_dump(doc))
    res = CliRunner().invoke(cli, ["--config", str(cfg), "serve", "--settings",
                                   str(settings_file(tmp_path))])
    assert res.exit_code == 2 and "lifecycle" in res.output


@pytest.fixture
def serve_process(request: pytest.FixtureRequest) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start(args: list[str], started: list[subprocess.Popen[str]]) -> tuple[
        subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "powerplane.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    started.append(proc)
    lines: list[str] = []
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("serving on"):
                return proc, lines
    raise AssertionError("serve did not start:\n" + "\n".join(lines))


def wait_up(url: str, **kw: object) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(url, timeout=5, **kw)  # type: ignore[arg-type]
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_served_over_tls(tmp_path: Path, serve_process: list[subprocess.Popen[str]]) -> None:
    cfg = write_fleet(tmp_path)
    ca = make_ca(tmp_path / "ca")
    cert = issue_cert(ca, tmp_path / "server")
    port = free_port()
    start(["--config", str(cfg), "serve", "--port", str(port), "--settings",
           str(settings_file(tmp_path)), "--tls-cert", str(cert.cert), "--tls-key",
           str(cert.key)], serve_process)
    r = wait_up(f"https://127.0.0.1:{port}/api/v1/whoami",
                verify=ssl.create_default_context(cafile=str(ca.cert)),
                headers={"X-Forwarded-User": "alice"})
    assert r.status_code == 200 and r.json()["user"] == "alice"
    assert r.headers["strict-transport-security"].startswith("max-age=")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/api/v1/whoami", timeout=5)


def test_demo_prints_its_url_and_logins(serve_process: list[subprocess.Popen[str]]) -> None:
    port = free_port()
    _, lines = start(["serve", "--demo", "--port", str(port)], serve_process)
    assert lines[-1] == f"serving on http://127.0.0.1:{port}/ (API: /api/v1, OpenAPI: " \
                        "/api/v1/openapi.json)"
    proc = serve_process[-1]
    assert proc.stdout is not None
    rest = [proc.stdout.readline().strip() for _ in range(3)]
    assert rest[0].startswith("demo issuer http://localhost:")
    assert rest[1].startswith("alice") and "admin" in rest[1]
    assert rest[2].startswith("eve") and "cordon and uncordon only" in rest[2]
    r = wait_up(f"http://127.0.0.1:{port}/auth/login", follow_redirects=False)
    assert r.status_code == 302 and "code_challenge=" in r.headers["location"]
