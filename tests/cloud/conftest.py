"""Fixtures of the cloud plugin's tests: moto's server as the real EC2 peer.

moto runs as a subprocess on a free loopback port for the whole session and is reset
(``POST /moto-api/reset``) before each test that uses it. A second moto, with IAM
authentication switched on, serves the credential tests. A small throttling proxy
in front of moto answers ``RequestLimitExceeded`` for chosen actions.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture(scope="session", autouse=True)
def _test_secrets() -> Iterator[None]:
    old = {k: os.environ.get(k) for k in (KEY_ENV, SECRET_ENV)}
    os.environ[KEY_ENV] = "AKIAIOSFODNN7EXAMPLE"
    os.environ[SECRET_ENV] = SECRET_VALUE
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    server = start_moto(tmp_path_factory.mktemp("moto"))
    yield server
    stop(server.process)


@pytest.fixture
def moto(moto_server: Moto) -> Moto:
    """The session's moto server, reset for this test."""
    moto_server.reset()
    return moto_server


@pytest.fixture(scope="session")
def moto_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """A moto server that checks credentials (its first five calls create two users)."""
    server = start_moto(tmp_path_factory.mktemp("moto-auth"), INITIAL_NO_AUTH_ACTION_COUNT="5")
    iam = server.client("iam")
    iam.create_user(UserName="no-permissions")
    key = iam.create_access_key(UserName="no-permissions")["AccessKey"]
    server.user_key = (key["AccessKeyId"], key["SecretAccessKey"])
    iam.create_user(UserName="operator")
    key = iam.create_access_key(UserName="operator")["AccessKey"]
    iam.put_user_policy(UserName="operator", PolicyName="ec2", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}],
    }))
    server.operator_key = (key["AccessKeyId"], key["SecretAccessKey"])
    yield server
    stop(server.process)


@dataclass
class ThrottlingProxy:
    """Forwards to moto; answers RequestLimitExceeded to the next N calls of an action."""

    upstream: str
    url: str = ""
    throttle: Counter[str] = field(default_factory=Counter)
    seen: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None


ERROR_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
    b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
    b"</Error></Errors><RequestID>throttle-proxy</RequestID></Response>"
)


@pytest.fixture
def throttling(moto: Moto) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(moto.url)
    up = urllib.parse.urlsplit(moto.url)

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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield proxy
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


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
