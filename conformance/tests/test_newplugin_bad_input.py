"""``powerplane new-plugin`` with bad input: exit 2 with the reason, no traceback, nothing
left behind."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane.cli import cli


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["new-plugin", *args])
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


def test_a_300_character_name_is_refused(tmp_path: Path) -> None:
    code, out = run("a" * 300, "--dir", str(tmp_path))
    assert code == 2
    assert "bad plugin name: 300 characters, at most 64" in out
    assert list(tmp_path.iterdir()) == []


def test_a_64_character_name_is_written(tmp_path: Path) -> None:
    code, out = run("a" * 64, "--dir", str(tmp_path))
    assert code == 0, out
    assert (tmp_path / f"powerplane-{'a' * 64}" / "pyproject.toml").is_file()


def test_dir_that_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    code, out = run("acme", "--dir", str(file))
    assert code == 2
    assert "is a file" in out


def test_dir_under_a_regular_file(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    code, out = run("acme", "--dir", str(file / "sub"))
    assert code == 2
    assert f"{file} (in --dir {file / 'sub'}) is not a directory" in out


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_unwritable_dir(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, out = run("acme", "--dir", str(ro))
    finally:
        ro.chmod(0o755)
    assert code == 2
    assert "is not writable" in out
    assert list(ro.iterdir()) == []


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs sysfs")
def test_dir_where_nothing_can_be_created() -> None:
    """sysfs refuses new folders even to root: the operating system's own reason is shown."""
    code, out = run("acme", "--dir", "/sys/kernel/powerplane-test")
    assert code == 2
    assert "cannot create /sys/kernel/powerplane-test" in out or "not writable" in out


def test_a_write_that_fails_midway_leaves_nothing(tmp_path: Path) -> None:
    """With no room to write a byte (RLIMIT_FSIZE 0), the half-written folder is removed."""

    def no_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    res = subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "new-plugin", "acme", "--dir", str(tmp_path)],
        capture_output=True, text=True, preexec_fn=no_room, timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert f"cannot write {tmp_path / 'powerplane-acme'}: File too large" in res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "powerplane-acme").mkdir()
    (tmp_path / "powerplane-acme" / "mine.txt").write_text("keep")
    code, out = run("acme", "--dir", str(tmp_path))
    assert code == 2
    assert "already exists" in out
    assert (tmp_path / "powerplane-acme" / "mine.txt").read_text() == "keep"
