"""``fence_powerplane`` side by side with fence-agents' own ``fence_redfish`` and
``fence_ipmilan`` on the same real peer: the sushy-tools Redfish emulator and OpenIPMI's
``ipmi_sim``, started as the plugins' tests start them. Both agents are run as the fencer
runs them (options on stdin); each one's status answers what the other did; powerplane's
``off`` is one reset request, and it never claims off while the machine does not read off.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fence_support import agent, need, stdin_lines, write_deployment

PASSWORD_ENV = "PP_FENCE_TEST_PASSWORD"


@pytest.fixture
def redfish(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, str], Any]]:
    """(powerplane deployment, fence_redfish's stdin, env, emulator) on one emulator."""
    need("fence_redfish", "fence-agents")
    from powerplane_redfish.testing.emulator import SushyEmulator

    with SushyEmulator(tmp_path / "emu", systems=1, zero_delay=True) as emu:
        system = emu.system_paths[0]
        cfg = write_deployment(tmp_path / "pp.yaml", {
            "channels": {"bmc": {"type": "redfish", "endpoint": emu.endpoint,
                                 "username": emu.username,
                                 "password": {"env": PASSWORD_ENV},
                                 "verify": str(emu.tls.ca), "auth": "basic",
                                 "shutdown": "force"}},
            "nodes": {"n1": {"channels": [{"channel": "bmc", "target": system}]}},
            "audit": {"path": str(tmp_path / "audit.jsonl")},
        })
        theirs = stdin_lines(ip="127.0.0.1", ipport=emu.port, username=emu.username,
                             password=emu.password, ssl=1, **{"systems-uri": system})
        env = {PASSWORD_ENV: emu.password, "REQUESTS_CA_BUNDLE": str(emu.tls.ca)}
        yield cfg, theirs, env, emu


@pytest.fixture
def ipmi(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, str], Any]]:
    """(powerplane deployment, fence_ipmilan's stdin, env, ipmi_sim) on one ipmi_sim."""
    need("fence_ipmilan", "fence-agents")
    need("ipmi_sim", "openipmi")
    from powerplane_ipmi.peer import IpmiSim

    with IpmiSim(tmp_path / "sim", soft_off_delay_s=60) as sim:
        secret = sim.secret_file("oper")
        script = tmp_path / "pw.sh"
        script.write_text(f"#!/bin/sh\ncat {secret}\n")
        script.chmod(0o700)
        cfg = write_deployment(tmp_path / "pp.yaml", {
            "channels": {"bmc": {"type": "ipmi", "username": "oper",
                                 "password": {"file": str(secret)}, "shutdown": "force"},
                         "soft": {"type": "ipmi", "username": "oper",
                                  "password": {"file": str(secret)}, "shutdown": "graceful"}},
            "nodes": {"n1": {"channels": [{"channel": "bmc", "target": sim.address}]},
                      "soft": {"channels": [{"channel": "soft", "target": sim.address}]}},
            "audit": {"path": str(tmp_path / "audit.jsonl")},
        })
        theirs = stdin_lines(ip=sim.host, ipport=sim.port, username="oper",
                             password_script=script, lanplus=1, cipher=3, privlvl="operator")
        yield cfg, theirs, {}, sim


def ours(cfg: Path, env: dict[str, str], action: str, plug: str = "n1",
         **more: str) -> tuple[int, str]:
    done = agent(stdin=stdin_lines(action=action, plug=plug, config=cfg, **more), env=env)
    return done.returncode, done.stdout + done.stderr


def theirs(exe: str, lines: str, env: dict[str, str], action: str) -> tuple[int, str]:
    done = agent(stdin=lines + f"action={action}\n", env=env, exe=exe)
    return done.returncode, done.stdout + done.stderr


def side_by_side(exe: str, cfg: Path, lines: str, env: dict[str, str]) -> None:
    def both(action: str) -> tuple[int, int]:
        return ours(cfg, env, action)[0], theirs(exe, lines, env, action)[0]

    assert both("status") == (0, 0)
    code, said = ours(cfg, env, "off")
    assert (code, said.splitlines()[-1]) == (0, "Success: Powered OFF"), said
    assert both("status") == (2, 2)
    code, said = ours(cfg, env, "on")
    assert code == 0, said
    assert both("status") == (0, 0)
    assert theirs(exe, lines, env, "off")[0] == 0  # their off, read by ours
    assert both("status") == (2, 2)
    assert ours(cfg, env, "off") == (0, "Success: Already OFF\n")
    assert ours(cfg, env, "reboot")[0] == 0
    assert both("status") == (0, 0)
    assert both("monitor") == (0, 0)


@pytest.mark.slow
def test_side_by_side_with_fence_redfish(redfish: tuple[Path, str, dict[str, str],
                                                        object]) -> None:
    cfg, lines, env, emu = redfish
    side_by_side("fence_redfish", cfg, lines, env)
    emu.reset_count()
    assert ours(cfg, env, "off")[0] == 0
    posts = [p for m, p in emu.requests() if m == "POST"]
    assert len(posts) == 1 and posts[0].endswith("/Actions/ComputerSystem.Reset"), posts


@pytest.mark.slow
def test_side_by_side_with_fence_ipmilan(ipmi: tuple[Path, str, dict[str, str],
                                                     object]) -> None:
    cfg, lines, env, _ = ipmi
    side_by_side("fence_ipmilan", cfg, lines, env)


@pytest.mark.slow
def test_off_is_not_claimed_while_the_machine_reads_on(ipmi: tuple[Path, str, dict[str, str],
                                                                   object]) -> None:
    cfg, lines, env, sim = ipmi
    # a soft-off the machine takes a minute to honour: sent, read back on, not claimed
    code, said = ours(cfg, env, "off", plug="soft", power_timeout="1")
    assert code == 1 and "Timed out waiting to power OFF" in said and "Success" not in said
    assert "shutdown 1" in sim.chassis_log()
    assert theirs("fence_ipmilan", lines, env, "status")[0] == 0  # still on, by both
    assert os.environ.get(PASSWORD_ENV) is None  # the secret stayed in the child's env
