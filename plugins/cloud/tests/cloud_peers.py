"""Peers and helpers of the cloud plugin's tests (imported by conftest and the tests).

moto's server runs as a subprocess on a free loopback port; a second moto checks IAM
credentials. :class:`ThrottlingProxy` sits in front of moto and answers
``RequestLimitExceeded`` to the next N calls of chosen actions, forwarding the rest.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KEY_ENV = "PP_CLOUD_TEST_KEY_ID"
SECRET_ENV = "PP_CLOUD_TEST_SECRET"
SECRET_VALUE = "s3cr3t-never-shown-7f2a"
"""The secret access key the tests configure; no message may contain it."""
AMI = "ami-12c6146b"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Moto:
    """A running moto server."""

    url: str
    process: subprocess.Popen[bytes]
    user_key: tuple[str, str] | None = None
    """A valid access key of a user without permissions (the auth-checking server only)."""
    operator_key: tuple[str, str] | None = None
    """A valid access key of a user allowed ec2:* (the auth-checking server only)."""

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    def client(self, service: str = "ec2", **kw: Any) -> Any:
        import boto3

        kw.setdefault("aws_access_key_id", "testing")
        kw.setdefault("aws_secret_access_key", "testing")
        return boto3.client(service, region_name=REGION, endpoint_url=self.url, **kw)

    def run(self, count: int = 1) -> list[str]:
        """Start ``count`` instances; their ids."""
        r = self.client().run_instances(ImageId=AMI, MinCount=count, MaxCount=count,
                                        InstanceType="t2.micro")
        return [i["InstanceId"] for i in r["Instances"]]

    def state(self, instance: str) -> str:
        r = self.client().describe_instances(InstanceIds=[instance])
        return str(r["Reservations"][0]["Instances"][0]["State"]["Name"])


def start_moto(tmp: Path, **env: str) -> Moto:
    port = free_port()
    log = open(tmp / f"moto-{port}.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp, env={**os.environ, **env},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto did not start; see {tmp}") from None
            time.sleep(0.1)
    return Moto(url, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class ThrottlingProxy:
    """Forwards to moto; answers RequestLimitExceeded to the next N calls of an action."""

    upstream: str
    url: str = ""
    throttle: Counter[str] = field(default_factory=Counter)
    seen: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.thread is not None:
            self.thread.join(timeout=10)


ERROR_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
    b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
    b"</Error></Errors><RequestID>throttle-proxy</RequestID></Response>"
)


def start_throttling_proxy(upstream: str) -> ThrottlingProxy:
    """A proxy in front of ``upstream`` on a free loopback port, serving in a thread."""
    proxy = ThrottlingProxy(upstream)
    up = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            action = urllib.parse.parse_qs(body.decode()).get("Action", [""])[0]
            proxy.seen.append(action)
            if proxy.throttle[action] > 0:
                proxy.throttle[action] -= 1
                self.send_response(503)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(ERROR_XML)))
                self.end_headers()
                self.wfile.write(ERROR_XML)
                return
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "connection")}
            conn.request("POST", self.path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                     "server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    proxy.server = server
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    proxy.thread = threading.Thread(target=server.serve_forever, daemon=True)
    proxy.thread.start()
    return proxy


def ec2_channel_config(url: str, **extra: Any) -> dict[str, Any]:
    """The config of an ``ec2`` channel against moto, with secret references."""
    return {
        "type": "ec2",
        "region": REGION,
        "endpoint_url": url,
        "access_key_id": {"env": KEY_ENV},
        "secret_access_key": {"env": SECRET_ENV},
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        **extra,
    }
