"""The EC2 peer of ``powerplane demo``: moto's server on loopback with two instances.

moto is part of this distribution's ``test`` extra; without it the demo reports this
peer as skipped. Credentials are moto's dummies, written to files the channel config
references (never inline), exactly as a real deployment would reference its own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from powerplane.testing import Peer, StartedPeer

__all__ = ["PEER"]

REGION = "us-east-1"
AMI = "ami-12c6146b"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def start(where: Path) -> StartedPeer:
    """Start moto's server in ``where`` and launch two instances on it."""
    import boto3

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (where / "moto.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=where,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                raise RuntimeError(
                    f"moto's server did not start (see {where / 'moto.log'})"
                ) from None
            time.sleep(0.1)
    key, secret = where / "aws-access-key-id", where / "aws-secret-access-key"
    for path, value in ((key, "testing"), (secret, "testing")):
        path.write_text(value)
        os.chmod(path, 0o600)
    try:
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=url,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        made = ec2.run_instances(ImageId=AMI, MinCount=2, MaxCount=2, InstanceType="t3.micro")
        ids = [i["InstanceId"] for i in made["Instances"]]
    except Exception:
        _stop(proc)
        raise
    return StartedPeer(
        config={"type": "ec2", "region": REGION, "endpoint_url": url,
                "access_key_id": {"file": str(key)},
                "secret_access_key": {"file": str(secret)}},
        targets=ids,
        stop=lambda: _stop(proc),
        description=f"moto's EC2 server at {url} with instances {', '.join(ids)}",
    )


PEER = Peer(name="ec2", role="cloud", start=start)
