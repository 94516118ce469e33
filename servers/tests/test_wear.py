"""A real ``powerplane serve`` on loopback worn down: 10,000 malformed or denied requests
(bad and malformed bearer tokens, a token for another audience, a forged signature,
forbidden and unknown nodes, maintenance probes, a foreign ``Origin``, oversize bodies) from
150 identities: never a 5xx, and the process's resident memory grows by at most 10 MB
after a warm-up (which meets every identity on every path: what the process keeps per
identity and per kind of denial is bounded, and its bounds are tested where they are
kept, ``core/tests/authority/test_folding.py`` and ``test_hardening.py``)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from oidc_support import Issuer, b64, compact, issuer, parts
from servers_support import ceremony, free_port, write_fleet

pytestmark = pytest.mark.slow

Request = Callable[[httpx.Client, int], httpx.Response]


def rss_kb(pid: int) -> int:
    """The process's resident set (``VmRSS`` of ``/proc/<pid>/status``), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as found:
        yield found


@pytest.fixture
def serve(tmp_path: Path, idp: Issuer) -> Iterator[tuple[subprocess.Popen[str], str]]:
    config = write_fleet(tmp_path)
    settings = tmp_path / "serve.yaml"
    settings.write_text(yaml.safe_dump({
        "proxy": {"trusted": ["127.0.0.1"]},
        "oidc": {"issuer": idp.url, "audience": "powerplane-api"},
        # every request goes the whole way (a rate limit would answer most of them early)
        "limits": {"requests_per_minute": 1e9, "request_burst": 1_000_000_000,
                   "acts_per_minute": 1e9, "act_burst": 1_000_000_000},
    }))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), "serve", "--port",
         str(port), "--settings", str(settings)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                if line.startswith("serving on"):
                    break
        else:
            raise AssertionError("serve did not start:\n" + "".join(lines))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/api/v1/openapi.json", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not answer"
                time.sleep(0.2)
        yield proc, base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def requests(idp: Issuer) -> list[Request]:
    """One of each kind of hostile request; ``i`` varies the identity and names."""
    other = idp.id_token("mallory", client_id="someone-else")  # a good token, another aud
    header, payload, sig = parts(idp.id_token("mallory", client_id="powerplane-api"))
    forged = compact(header, {**payload, "sub": "alice"}, sig)
    nested = ".".join([b64(b"[" * 5000), b64(b"{}"), "c2ln"])  # a header 5,000 deep

    def who(i: int) -> dict[str, str]:
        return {"X-Forwarded-User": f"mallory-{i % 150}"}

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    big = {"node": "bmc-1", "intent": "cordon", "reason": "x" * 100_000}
    return [
        lambda c, i: c.get("/api/v1/servers", headers=bearer("not-a-jwt")),
        lambda c, i: c.get("/api/v1/servers", headers=bearer(nested)),
        lambda c, i: c.post("/api/v1/maintenances", headers=bearer(other),
                            json=ceremony("bmc-1", "cordon")),
        lambda c, i: c.get("/api/v1/whoami", headers=bearer(forged)),
        lambda c, i: c.get("/api/v1/servers/bmc-1", headers=who(i)),
        lambda c, i: c.get(f"/api/v1/servers/nope-{i}", headers=who(i)),
        lambda c, i: c.post("/api/v1/preflight", headers=who(i),
                            json=ceremony(f"cp-{1 + i % 5}", "reboot")),
        lambda c, i: c.post("/api/v1/maintenances", headers=who(i),
                            json=ceremony("bmc-2", "shutdown")),
        lambda c, i: c.get(f"/api/v1/maintenances/probe-{i}", headers=who(i)),
        lambda c, i: c.get("/api/v1/servers", headers=who(i)),
        lambda c, i: c.post("/api/v1/maintenances",
                            headers={"X-Forwarded-User": "eve", "X-Forwarded-Groups":
                                     "plant-eng", "Origin": "https://evil.example"},
                            json=ceremony("bmc-1", "cordon")),
        lambda c, i: c.post("/api/v1/maintenances", headers=who(i), json=big),
        lambda c, i: c.post("/api/v1/maintenances", headers=who(i),
                            content=b"{" * 20_000),
    ]


def run(base: str, kinds: list[Request], start: int, count: int) -> dict[int, int]:
    codes: dict[int, int] = {}
    with httpx.Client(base_url=base, timeout=30) as c:
        for i in range(start, start + count):
            r = kinds[i % len(kinds)](c, i)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
            assert r.status_code < 500, (i % len(kinds), r.status_code, r.text[:300])
    return codes


def test_ten_thousand_hostile_requests_no_5xx_and_bounded_memory(
        serve: tuple[subprocess.Popen[str], str], idp: Issuer) -> None:
    proc, base = serve
    kinds = requests(idp)
    run(base, kinds, 0, 2_000)  # warm-up: every path taken, caches and arenas filled
    before = rss_kb(proc.pid)
    codes: dict[int, Any] = run(base, kinds, 2_000, 10_000)
    after = rss_kb(proc.pid)
    print(f"serve RSS {before} kB after the warm-up, {after} kB after 10,000 more; {codes}")
    assert set(codes) <= {401, 403, 404, 413, 422}, codes
    assert {401, 403, 404, 413} <= set(codes), codes
    assert after - before <= 10 * 1024, f"RSS grew {after - before} kB ({before} -> {after})"
    assert proc.poll() is None
