"""``fence_powerplane`` on simulated machines, run as the fencer runs it (a child process,
options as ``key=value`` lines on a pipe, no terminal) and as people run it (long options):
each action's exit code, the rule's refusal of an unrecoverable off, off never claimed
without an off reading, reboot that never leaves a machine off, the policy and the audit,
no secret taken or printed, and metadata valid against fence-agents' ``metadata.rng``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fence_support import RNG, agent, need, stdin_lines, write_deployment

from powerplane.cli.fence import ACTIONS, metadata, parse_argv, parse_stdin


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """n1, n2: a full channel (reboot, shutdown, power-on; graceful); n3: a channel that
    cannot power on (the rule withholds its shutdown); n4: a channel that cannot see power
    off (on-only readback); n5: a node whose only channel is down."""
    state = str(tmp_path / "machines.json")
    return write_deployment(tmp_path / "pp.yaml", {
        "channels": {
            "lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                    "machines": {"m1": "on", "m2": "off"}, "state_file": state},
            "dark": {"type": "simulated", "verbs": ["reboot", "shutdown"], "graceful": False,
                     "machines": {"m3": "on"}, "state_file": str(tmp_path / "dark.json")},
            "soft": {"type": "simulated", "verbs": ["reboot", "shutdown"], "graceful": True,
                     "machines": {"m6": "on"}},
            "blind": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                      "graceful": False, "readback": "on-only", "machines": {"m4": "on"},
                      "state_file": str(tmp_path / "blind.json")},
            "down": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                     "machines": {"m5": "on"}, "faults": {"m5": "unreachable"}},
        },
        "nodes": {
            "n1": {"channels": [{"channel": "lab", "target": "m1"}]},
            "n2": {"channels": [{"channel": "lab", "target": "m2"}]},
            "n3": {"channels": [{"channel": "dark", "target": "m3"}]},
            "n4": {"channels": [{"channel": "blind", "target": "m4"}]},
            "n5": {"channels": [{"channel": "down", "target": "m5"}]},
            "n6": {"channels": [{"channel": "soft", "target": "m6"}]},
        },
        "audit": {"path": str(tmp_path / "audit.jsonl")},
    })


def fence(config: Path, **options: Any) -> subprocess.CompletedProcess[str]:
    """The agent as pacemaker's fencer calls it: every option on stdin."""
    return agent(stdin=stdin_lines(config=config, **options), cwd=config.parent)


def audit(config: Path) -> list[dict[str, Any]]:
    path = config.parent / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sends(config: Path) -> list[str]:
    """Every accepted act the audit trail recorded, as ``action node``."""
    return [f"{r['action']} {r['node']}" for r in audit(config) if r["outcome"] == "accepted"]


# -- options -----------------------------------------------------------------------------------
def test_stdin_lines_as_the_interface_says() -> None:
    opts, warnings = parse_stdin(
        "# a comment\n\n  action=off\nport=n1\nplug=n2\nconfig=\"/etc/pp.yaml\"\n"
        "nodename=cluster-a\naction=status\nunknown_thing=7\npasswd=hunter2\n")
    assert opts == {"action": "status", "plug": "n2", "config": "/etc/pp.yaml",
                    "nodename": "cluster-a"}
    assert any("unknown_thing" in w for w in warnings)
    assert not any("hunter2" in w or "7" in w for w in warnings)


def test_a_line_that_is_not_key_value_is_named_by_its_number_never_echoed() -> None:
    """A password typed on a line of its own, or a line whose "name" is not an option's,
    is ignored with its line number only."""
    opts, warnings = parse_stdin("action=status\nS3cr3t-P@ssw0rd!\nplug=n1\n"
                                 "not an option=x\n")
    assert opts == {"action": "status", "plug": "n1"}
    assert warnings == [
        "ignoring line 2 of standard input: not key=value with an option's name (the line "
        "is not shown)",
        "ignoring line 4 of standard input: not key=value with an option's name (the line "
        "is not shown)"]
    assert not any("S3cr3t" in w or "not an option" in w for w in warnings)


def test_standard_input_is_read_to_a_bound_and_no_further(deployment: Path) -> None:
    import io

    from powerplane.cli.fence import MAX_STDIN, run

    huge = io.StringIO("action=status\nplug=n1\nreason=" + "x" * (200 * MAX_STDIN) + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert run([], stdin=huge, stdout=out, stderr=err) == 1
    assert f"standard input is longer than {MAX_STDIN} bytes" in err.getvalue()
    assert huge.tell() <= MAX_STDIN + 1  # read no further than the bound
    assert "xxxx" not in err.getvalue() and out.getvalue() == ""


def test_long_and_short_options() -> None:
    assert parse_argv(["--action=off", "--plug", "n1", "--config=/c.yaml", "-m", "cycle",
                       "--power-timeout", "5"]) == {
        "action": "off", "plug": "n1", "config": "/c.yaml", "method": "cycle",
        "power_timeout": "5"}
    assert parse_argv(["-o", "status", "-nn1"]) == {"action": "status", "plug": "n1"}


def test_status_from_stdin_without_a_terminal(deployment: Path) -> None:
    on = fence(deployment, action="status", port="n1")
    assert (on.returncode, on.stdout) == (0, "Status: ON\n"), on.stderr
    off = fence(deployment, action="status", plug="n2")
    assert (off.returncode, off.stdout) == (2, "Status: OFF\n"), off.stderr
    down = fence(deployment, action="status", plug="n5")
    assert down.returncode == 1 and "Unable to obtain the status of n5" in down.stderr
    # a blind channel's declared unknown is not on or off: a failure for status
    blind = agent("--action", "off", "--plug", "n4", "--config", str(deployment),
                  "--power-timeout", "0.5")
    assert blind.returncode == 1
    unknown = fence(deployment, action="status", plug="n4")
    assert unknown.returncode == 1 and "unknown" in unknown.stderr


def test_nodename_is_the_target_when_no_plug_is_given(deployment: Path) -> None:
    done = fence(deployment, action="status", nodename="n2")
    assert done.returncode == 2 and done.stdout == "Status: OFF\n"
    both = fence(deployment, action="status", nodename="n2", port="n1")
    assert both.returncode == 0  # port wins over nodename, as the interface says


def test_long_options_and_every_action_s_exit_code(deployment: Path) -> None:
    cfg = str(deployment)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return agent(*args, "--config", cfg, cwd=deployment.parent)

    assert run("-o", "off", "-n", "n1").returncode == 0
    assert run("-o", "status", "-n", "n1").returncode == 2
    off_again = run("-o", "off", "-n", "n1")
    assert (off_again.returncode, off_again.stdout) == (0, "Success: Already OFF\n")
    assert run("--action=on", "--plug=n1").stdout == "Success: Powered ON\n"
    assert run("-o", "status", "-n", "n1").returncode == 0
    reboot = run("-o", "reboot", "-n", "n1")
    assert (reboot.returncode, reboot.stdout) == (0, "Success: Rebooted\n"), reboot.stderr
    assert run("-o", "status", "-n", "n1").returncode == 0
    listed = run("-o", "list")
    assert (listed.returncode, listed.stdout.split()) == (
        0, ["n1,", "n2,", "n3,", "n4,", "n5,", "n6,"])
    states = run("-o", "list-status").stdout.splitlines()
    assert states[:3] == ["n1,,ON", "n2,,OFF", "n3,,ON"] and states[4] == "n5,,UNKNOWN"
    assert run("-o", "monitor", "-n", "n1").returncode == 0
    assert run("-o", "monitor", "-n", "n5").returncode == 1
    whole = run("-o", "monitor")  # every channel: the down one fails it, named
    assert whole.returncode == 1 and "n5" in whole.stderr
    assert run("-o", "validate-all", "-n", "n1").returncode == 0
    assert run("-o", "validate-all").returncode == 0
    bad = run("-o", "validate-all", "-n", "nope")
    assert bad.returncode == 1 and "unknown node 'nope'" in bad.stderr
    assert agent("-o", "metadata").returncode == 0
    assert run("-o", "dance", "-n", "n1").returncode == 1
    assert run("-o", "off").returncode == 1  # no plug


def test_an_unrecoverable_off_is_refused_with_the_reason(deployment: Path) -> None:
    refused = fence(deployment, action="off", plug="n3")
    assert refused.returncode == 1
    assert "shutdown not offered for n3" in refused.stderr
    assert "cannot power on" in refused.stderr
    assert refused.stdout == ""
    assert sends(deployment) == []  # nothing sent, nothing recorded as done
    assert fence(deployment, action="status", plug="n3").returncode == 0  # still on


def test_attendance_declared_makes_the_same_off_recoverable(tmp_path: Path) -> None:
    cfg = write_deployment(tmp_path / "pp.yaml", {
        "channels": {"dark": {"type": "simulated", "verbs": ["reboot", "shutdown"],
                              "graceful": False, "machines": {"m3": "on"}}},
        "nodes": {"n3": {"site": "plant", "channels": [{"channel": "dark", "target": "m3"}]}},
        "recovery": {"sites": {"plant": {"attended": True}}},
        "audit": {"path": str(tmp_path / "audit.jsonl")},
    })
    done = fence(cfg, action="off", plug="n3")
    assert (done.returncode, done.stdout) == (0, "Success: Powered OFF\n"), done.stderr


def test_off_is_never_claimed_without_an_off_reading(deployment: Path) -> None:
    blind = fence(deployment, action="off", plug="n4", power_timeout="0.5")
    assert blind.returncode == 1
    assert "reads unknown after off" in blind.stderr and "not claimed" in blind.stderr
    assert "Success" not in blind.stdout
    assert sends(deployment) == ["servers:shutdown n4"]  # sent once, never claimed


def test_a_device_that_cannot_be_read_is_sent_nothing(deployment: Path) -> None:
    down = fence(deployment, action="off", plug="n5")
    assert down.returncode == 1 and down.stdout == ""
    assert "Unreachable" in down.stderr or "nothing was sent" in down.stderr


def test_reboot_without_power_on_never_leaves_the_machine_off(deployment: Path) -> None:
    done = fence(deployment, action="reboot", plug="n3")
    assert done.returncode == 0, done.stderr
    assert "power-on is not available for n3" in done.stderr
    assert sends(deployment) == ["servers:reboot n3"]  # a power cycle, never shutdown
    assert fence(deployment, action="status", plug="n3").returncode == 0  # reads on


def test_a_graceful_reboot_is_not_a_fence(deployment: Path) -> None:
    refused = fence(deployment, action="reboot", plug="n6")
    assert refused.returncode == 1 and "graceful" in refused.stderr
    assert "nothing was sent" in refused.stderr and sends(deployment) == []


def test_reboot_onoff_is_off_then_on_and_cycle_is_the_reboot_verb(deployment: Path) -> None:
    assert fence(deployment, action="reboot", plug="n1").returncode == 0
    assert sends(deployment) == ["servers:shutdown n1", "servers:power-on n1"]
    cycle = fence(deployment, action="reboot", plug="n4", method="cycle")
    assert cycle.returncode == 0, cycle.stderr
    assert sends(deployment)[-1] == "servers:reboot n4"


def test_acts_are_audited_as_the_os_user_and_the_policy_decides(tmp_path: Path) -> None:
    import getpass

    (tmp_path / "roles.yaml").write_text(
        "roles:\n  reader: {tier: read}\n"
        f"bindings:\n  - {{role: reader, users: [{getpass.getuser()}]}}\n")
    cfg = write_deployment(tmp_path / "pp.yaml", {
        "channels": {"lab": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
                             "machines": {"m1": "on"}}},
        "nodes": {"n1": {"channels": [{"channel": "lab", "target": "m1"}]}},
        "policy": {"type": "local", "file": "roles.yaml"},
        "audit": {"path": str(tmp_path / "audit.jsonl")},
    })
    assert fence(cfg, action="status", plug="n1").returncode == 0  # read: allowed
    denied = fence(cfg, action="off", plug="n1")
    assert denied.returncode == 1 and "PolicyDenied" in denied.stderr
    (record,) = audit(cfg)
    assert (record["actor"], record["action"], record["outcome"]) == (
        getpass.getuser(), "servers:shutdown", "denied")


def test_no_secret_on_argv_and_none_printed(deployment: Path) -> None:
    refused = agent("--action", "status", "--password=hunter2", "--plug", "n1")
    assert refused.returncode == 1 and "takes no secret" in refused.stderr
    assert "hunter2" not in refused.stderr + refused.stdout
    unknown = agent("--action", "status", "--bogus=hunter2")
    assert unknown.returncode == 1 and "hunter2" not in unknown.stderr
    ignored = fence(deployment, action="status", plug="n1", passwd="hunter2",
                    password="hunter2", login="root")
    assert ignored.returncode == 0
    assert "hunter2" not in ignored.stderr + ignored.stdout


def test_metadata_is_valid_against_fence_agents_schema(tmp_path: Path) -> None:
    xmllint = need("xmllint", "libxml2-utils")
    if not RNG.exists():
        need(str(RNG), "fence-agents")
    printed = agent("-o", "metadata")
    assert printed.returncode == 0
    assert printed.stdout == metadata()
    (tmp_path / "md.xml").write_text(printed.stdout)
    checked = subprocess.run([xmllint, "--noout", "--relaxng", str(RNG),
                              str(tmp_path / "md.xml")], capture_output=True, text=True,
                             check=False)
    assert checked.returncode == 0, checked.stderr
    for action in ACTIONS:
        assert f'<action name="{action}"' in printed.stdout
    # the schema is not vacuous: a parameter without its getopt is refused
    broken = printed.stdout.replace('<getopt mixed="-o, --action=[action]" />', "", 1)
    (tmp_path / "bad.xml").write_text(broken)
    assert subprocess.run([xmllint, "--noout", "--relaxng", str(RNG), str(tmp_path / "bad.xml")],
                          capture_output=True, check=False).returncode != 0
    via_stdin = agent(stdin="action=metadata\n")
    assert via_stdin.stdout == printed.stdout
