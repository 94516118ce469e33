"""The CLI run as two OS users: each one's decisions and audit records name that user, as
the OS says (the effective uid and groups), whatever the environment claims."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from authority_support import jsonl, write_deployment

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="switching to another OS user needs root (CI runs as root)")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder both users can read and write (pytest's own is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="powerplane-users-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_user(uid: int | None, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    def drop() -> None:
        if uid is not None:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(uid)

    env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME")}
    env["USER"] = env["LOGNAME"] = "alice"  # what a user may claim; the OS says otherwise
    return subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(config), *args],
        capture_output=True, text=True, env=env, timeout=120, preexec_fn=drop, check=False)


def test_each_os_user_gets_its_own_decisions_and_its_own_audit_records(shared: Path) -> None:
    audit = shared / "audit.jsonl"
    audit.touch()
    audit.chmod(0o666)
    roles = {"roles": {"admin": {"tier": "admin"}, "viewer": {"tier": "read"}},
             "bindings": [{"role": "admin", "users": ["root"]},
                          {"role": "viewer", "groups": ["nogroup"]},
                          {"role": "admin", "users": ["alice"]}]}
    config = write_deployment(shared, roles, audit=str(audit))
    for path in shared.iterdir():
        path.chmod(0o666 if path.is_file() else 0o777)

    root_may = as_user(None, config, "auth", "can-i", "reboot", "n1")
    nobody_may = as_user(NOBODY, config, "auth", "can-i", "reboot", "n1")
    assert root_may.returncode == 0, root_may.stderr
    assert "allowed: user root" in root_may.stdout
    assert nobody_may.returncode == 3, nobody_may.stderr
    assert nobody_may.stdout.strip() == (
        "denied: user nobody (groups: nogroup) servers:reboot on n1: no role allows it; "
        "role viewer allows servers:read")

    denied = as_user(NOBODY, config, "invoke", "n1", "reboot", "--reason", "kernel", "--yes")
    assert denied.returncode == 3, denied.stderr
    read = as_user(NOBODY, config, "state", "n1", "-o", "json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["state"] == "on"
    done = as_user(None, config, "invoke", "n1", "reboot", "--reason", "kernel", "--yes")
    assert done.returncode == 0, done.stderr

    trail = [(r["actor"], r["groups"], r["action"], r["outcome"]) for r in jsonl(audit)]
    assert trail == [
        ("nobody", ["nogroup"], "servers:reboot", "denied"),
        ("root", trail[1][1], "servers:reboot", "accepted"),
    ]
    assert "root" in trail[1][1]
    listed = as_user(NOBODY, config, "audit", "--node", "n1", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["actor"] for r in json.loads(listed.stdout)["records"]] == ["nobody", "root"]
