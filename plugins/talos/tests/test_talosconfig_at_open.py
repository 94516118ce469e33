"""A Talos channel's talosconfig file is read when the channel opens, not when the
deployment file loads (issue 24, "commands pay only for what they touch").

A missing or broken talosconfig on a channel a node does not use never fails ``state`` of
that node; on the node's own channel it is exit 2 naming ``channels.<name>.talosconfig``;
``powerplane check``, which opens every channel, refuses it with the field's path and line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from powerplane import ConfigError, load_config
from powerplane.config import check_config
from powerplane_talos.talosconfig import dump_talosconfig
from powerplane_talos.testing import pki

pytestmark = pytest.mark.timeout(120)

FILE = """\
channels:
  lab: {{type: simulated, machines: {{m1: 'on'}}}}
  plant:
    type: talos
    talosconfig: {talosconfig}
nodes:
  n1: {{channels: [{{channel: lab, target: m1}}]}}
  n2: {{channels: [{{channel: plant, target: 10.0.0.12}}]}}
"""
LINE = 5  # of ``talosconfig:`` in FILE


def _write(tmp_path: Path, talosconfig: Path) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(FILE.format(talosconfig=talosconfig))
    return path


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(path),
                           *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ), check=False)


@pytest.fixture
def missing(tmp_path: Path) -> tuple[Path, Path]:
    """A deployment whose talos channel names a talosconfig that does not exist."""
    gone = tmp_path / "no-such-talosconfig"
    return _write(tmp_path, gone), gone


@pytest.fixture
def garbled(tmp_path: Path) -> tuple[Path, Path]:
    """A deployment whose talosconfig's client key is not its certificate's."""
    certs = tmp_path / "pki"
    certs.mkdir()
    ca = pki.new_ca(certs, "ed25519")
    client = pki.issue(ca, certs, "admin", organization="os:admin")
    other = pki.issue(ca, certs, "other", organization="os:admin")
    tc = dump_talosconfig(tmp_path / "talosconfig", context="lab", endpoints=["127.0.0.1"],
                          ca=ca.cert, crt=client.cert, key=other.key)
    return _write(tmp_path, tc), tc


def test_a_missing_talosconfig_loads(missing: tuple[Path, Path]) -> None:
    path, _ = missing
    deployment = load_config(path)  # a load-time error before
    assert deployment.channels["plant"].type.name == "talos"


@pytest.mark.parametrize("case", ["missing", "garbled"])
def test_state_of_a_simulated_node_succeeds_beside_a_broken_talosconfig(
    case: str, request: pytest.FixtureRequest
) -> None:
    path, _ = request.getfixturevalue(case)
    res = _cli(path, "state", "n1")
    assert res.returncode == 0, res.stderr  # exit 2 at load before
    assert res.stdout == "n1: on via lab\n"


def test_state_of_the_talos_node_is_exit_2_naming_the_field(
    missing: tuple[Path, Path],
) -> None:
    path, gone = missing
    res = _cli(path, "state", "n2")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert f"channels.plant.talosconfig: talosconfig file '{gone}' does not exist" \
        in res.stderr
    assert "Traceback" not in res.stderr


def test_check_refuses_a_missing_talosconfig_with_the_path_and_line(
    missing: tuple[Path, Path],
) -> None:
    path, gone = missing
    res = _cli(path, "check")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    assert (f"channels.plant.talosconfig (line {LINE}): talosconfig file '{gone}' does "
            "not exist") in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_check_refuses_a_broken_talosconfig_with_the_path_and_line(
    garbled: tuple[Path, Path],
) -> None:
    path, tc = garbled
    with pytest.raises(ConfigError) as info:
        check_config(path)
    assert [(p.path, p.line) for p in info.value.problems] == [
        ("channels.plant.talosconfig", LINE)]
    message = info.value.problems[0].message
    assert f"talosconfig {tc}" in message
    assert "'key' is not the private key of the client certificate" in message
