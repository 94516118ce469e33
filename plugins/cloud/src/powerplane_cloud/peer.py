"""The loopback peer of the cloud plugin: moto's EC2 server, for the tests and the demo.

:func:`start_moto` starts ``python -m moto.server`` on a free loopback port (a
:class:`powerplane.testing.Subprocess`, stopped by its own handle) and waits until it
answers; the returned :class:`Moto` resets it, launches instances, reads their state and
stops it. :data:`PEER` is what ``powerplane demo`` starts: moto with four instances (two
for the demo's deployment, two the conformance suite may terminate).

moto is part of this distribution's ``test`` extra; without it the demo reports this peer
as skipped. Credentials are moto's dummies, written to files the channel config references
(never inline), exactly as a real deployment would reference its own.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from powerplane.testing import Peer, StartedPeer, Subprocess, free_port, wait_ready

__all__ = ["AMI", "PEER", "REGION", "UNKNOWN_INSTANCE", "Moto", "start", "start_moto"]

REGION = "us-east-1"
"""The region every moto client and channel of the peer uses."""
AMI = "ami-12c6146b"
"""An image id moto knows (instances are launched from it)."""
UNKNOWN_INSTANCE = "i-0deadbeefdeadbeef"
"""A well-formed instance id (``i-`` and 17 hex digits) the peer never launched: the
conformance suite's unknown target (the id it derives by a suffix is not one, and the
channel type's target parser rightly refuses it before any request)."""


@dataclass
class Moto:
    """A running moto server."""

    url: str
    """``http://127.0.0.1:PORT``."""
    process: Subprocess
    """The server process (stop it with :meth:`stop`)."""
    user_key: tuple[str, str] | None = None
    """A valid access key of a user without permissions (set by tests that make one)."""
    operator_key: tuple[str, str] | None = None
    """A valid access key of a user allowed ec2:* (set by tests that make one)."""

    def reset(self) -> None:
        """Forget every resource (``POST /moto-api/reset``)."""
        req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()

    def client(self, service: str = "ec2", **kw: Any) -> Any:
        """A boto3 client of ``service`` on this server (moto's dummy keys by default)."""
        import boto3

        kw.setdefault("aws_access_key_id", "testing")
        kw.setdefault("aws_secret_access_key", "testing")
        return boto3.client(service, region_name=REGION, endpoint_url=self.url, **kw)

    def run(self, count: int = 1, instance_type: str = "t2.micro") -> list[str]:
        """Launch ``count`` instances; their ids."""
        r = self.client().run_instances(ImageId=AMI, MinCount=count, MaxCount=count,
                                        InstanceType=instance_type)
        return [i["InstanceId"] for i in r["Instances"]]

    def state(self, instance: str) -> str:
        """The state name of ``instance`` as moto keeps it."""
        r = self.client().describe_instances(InstanceIds=[instance])
        return str(r["Reservations"][0]["Instances"][0]["State"]["Name"])

    def stop(self) -> None:
        """Stop the server (terminate, wait, kill, reap)."""
        self.process.stop(10)


def _answers(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
        return True


def start_moto(where: Path, *, timeout: float = 30, **env: str) -> Moto:
    """Start moto's server in ``where`` (its log there) and wait until it answers.

    ``env``: variables added to its environment (``INITIAL_NO_AUTH_ACTION_COUNT="5"``
    switches IAM authentication on after five calls).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = Subprocess(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        cwd=where, env={**os.environ, **env}, log=where / f"moto-{port}.log",
    )
    wait_ready(lambda: _answers(url), timeout, f"moto's server at {url}", proc=proc)
    return Moto(url, proc)


def start(where: Path) -> StartedPeer:
    """Start moto's server in ``where`` and launch four instances on it."""
    moto = start_moto(where)
    key, secret = where / "aws-access-key-id", where / "aws-secret-access-key"
    try:
        for path, value in ((key, "testing"), (secret, "testing")):
            path.write_text(value)
            os.chmod(path, 0o600)
        ids = moto.run(4, instance_type="t3.micro")
    except BaseException:
        moto.stop()
        raise
    return StartedPeer(
        config={"type": "ec2", "region": REGION, "endpoint_url": moto.url,
                "access_key_id": {"file": str(key)},
                "secret_access_key": {"file": str(secret)}},
        targets=ids,
        stop=moto.stop,
        description=f"moto's EC2 server at {moto.url} with instances {', '.join(ids)}",
        # the demo's moto runs with IAM authentication off (the plugin's own tests run a
        # second moto with it on, where wrong credentials are rejected and that check passes)
        # keyed by the peer's name, the channel name the demo and the benchmark give it;
        # allow_terminate is the target's call, not the peer's
        conformance={"xfail": {"WRONG_CREDENTIALS_REJECTED": "the demo's moto server checks "
                               "no credentials (IAM authentication is off)"},
                     "negative": {"ec2": {"unknown_target": UNKNOWN_INSTANCE}}},
        pids=[moto.process.pid],
    )


PEER = Peer(name="ec2", role="cloud", start=start)
"""The EC2 peer of ``powerplane demo`` (plays the cloud role)."""
