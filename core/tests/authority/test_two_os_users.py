"""The CLI run as two OS users: each one's decisions and audit records name that user, as
the OS says (the effective uid and groups), whatever the environment claims; and a file
that grants power, which the other user could have written, is refused (exit 2).

Wherever the checkout lives: when uid 65534 cannot reach this venv (a clone in a ``0700``
folder), :mod:`other_user` stages what it needs where it can (see there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from authority_support import jsonl, write_deployment
from other_user import Runner, as_uid, runner_for

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="switching to another OS user needs root (CI runs as root)")


def shared_deployment(shared: Path, roles: dict[str, object] | None, audit: Path) -> Path:
    """A deployment both users run: the deployment and roles files root's, readable by
    all, writable by root alone (files that grant power); the audit trail and the machines'
    state in a folder both users write (``data``)."""
    data = shared / "data"
    data.mkdir(exist_ok=True)
    data.chmod(0o777)
    config = write_deployment(shared, roles, audit=str(audit))
    text = config.read_text().replace(str(shared / "machines.json"),
                                      str(data / "machines.json"))
    config.write_text(text)
    return config


@pytest.fixture(scope="module")
def nobody() -> Iterator[Runner]:
    """How uid 65534 runs the CLI (skipped, saying why, only when no Python is within
    its reach)."""
    try:
        with runner_for(NOBODY, NOBODY) as runner:
            yield runner
    except LookupError as gone:
        pytest.skip(str(gone))


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder both users can read and write, sticky as /tmp is (pytest's own is root's
    alone): each may add files, neither may replace the other's."""
    folder = Path(tempfile.mkdtemp(prefix="powerplane-users-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def as_user(nobody: Runner) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the CLI as root (``None``) or as uid 65534, claiming to be alice."""
    def run(uid: int | None, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME")}
        env["USER"] = env["LOGNAME"] = "alice"  # what a user may claim; the OS says otherwise
        python, drop = sys.executable, None
        if uid is not None:
            python, drop = nobody.python, as_uid(uid, NOBODY)
            env.update(nobody.env)
        return subprocess.run(
            [python, "-m", "powerplane.cli", "--config", str(config), *args],
            capture_output=True, text=True, env=env, timeout=120, preexec_fn=drop,
            check=False)
    return run


def test_each_os_user_gets_its_own_decisions_and_its_own_audit_records(
    shared: Path, as_user: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    audit = shared / "data" / "audit.jsonl"
    (shared / "data").mkdir()
    audit.touch()
    audit.chmod(0o666)
    roles = {"roles": {"admin": {"tier": "admin"}, "viewer": {"tier": "read"}},
             "bindings": [{"role": "admin", "users": ["root"]},
                          {"role": "viewer", "groups": ["nogroup"]},
                          {"role": "admin", "users": ["alice"]}]}
    config = shared_deployment(shared, roles, audit)

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


@pytest.mark.parametrize("attack", ["world-writable", "owned-by-nobody", "in-a-folder-others-write",
                                    "a-symlink-to-one"])
def test_a_roles_file_another_user_could_have_written_is_refused(
    shared: Path, attack: str, as_user: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """uid 65534 rewrote a world-writable roles.yaml to make itself admin, then rebooted a
    node: now the file is refused (exit 2, naming it, what is wrong and the fix) before
    anything is decided, for root and for 65534 alike."""
    roles = {"roles": {"admin": {"tier": "admin"}},
             "bindings": [{"role": "admin", "users": ["root"]}]}
    config = shared_deployment(shared, roles, shared / "data" / "audit.jsonl")
    target = shared / "roles.yaml"
    if attack == "world-writable":
        target.chmod(0o666)
        words = "is writable by its group and everyone (mode 0666)"
    elif attack == "owned-by-nobody":
        os.chown(target, NOBODY, NOBODY)  # root's deployment: root's roles file alone
        words = f"is owned by uid {NOBODY}"
    elif attack == "in-a-folder-others-write":
        inner = shared / "open"
        inner.mkdir()
        inner.chmod(0o777)  # no sticky bit: anyone may replace what is in it
        moved = inner / "roles.yaml"
        target.rename(moved)
        text = config.read_text().replace("file: roles.yaml", f"file: {moved}")
        config.write_text(text)
        target, words = moved, "writable by its group and everyone (mode 0777)"
    else:
        loose = shared / "loose-roles.yaml"
        target.rename(loose)
        loose.chmod(0o666)
        target.symlink_to(loose)
        words = "the symlink's target"
    for uid in (None, NOBODY):
        done = as_user(uid, config, "invoke", "n1", "reboot", "--reason", "kernel", "--yes")
        assert done.returncode == 2, (uid, done.stdout, done.stderr)
        assert "roles file" in done.stderr and words in done.stderr, done.stderr
        assert "fix:" in done.stderr and "Traceback" not in done.stderr
    state = shared / "data" / "machines.json"
    assert not state.exists() or "reboot" not in state.read_text()


def test_a_deployment_file_others_may_write_is_refused(
    shared: Path, as_user: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    config = shared_deployment(shared, None, shared / "data" / "audit.jsonl")
    config.chmod(0o664)
    done = as_user(None, config, "state", "n1")
    assert done.returncode == 2
    assert "the deployment file" in done.stderr and "writable by its group" in done.stderr
    assert f"chmod go-w {config}" in done.stderr
