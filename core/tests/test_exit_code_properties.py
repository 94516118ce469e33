"""Property: over random nodes, channels and faults, exit codes follow CONTRACT's table.

0 done; 1 a channel or device failed (or the outcome is unknown); 2 bad input; 3 refused by
the rule. Derived here from the faults injected, not from the code under test: a discovery
fault (unreachable, auth, timeout) makes a channel undiscoverable; a refused fault refuses
verbs only (unless a readback sees the machine already where a power-on or shutdown leads);
silent accepts and does nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from powerplane.cli import cli

DISCOVERY_FAULTS = {"unreachable", "auth", "timeout"}
FAULTS = [None, "unreachable", "auth", "timeout", "refused", "silent"]
VERBS = ["reboot", "shutdown", "power-on", "terminate"]

channel_strategy = st.fixed_dictionaries({
    "verbs": st.sets(st.sampled_from(["reboot", "shutdown", "power-on"]), min_size=0),
    "fault": st.sampled_from(FAULTS),
    "readback": st.sampled_from(["full", "on-only", "none"]),
    "state": st.sampled_from(["on", "off"]),
})


def _cli(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stdout


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    channels=st.lists(channel_strategy, min_size=0, max_size=3),
    verb=st.sampled_from(VERBS),
    attended=st.booleans(),
)
def test_exit_codes_of_state_invoke_and_offers_follow_the_contract(
    tmp_path_factory: Any, channels: list[dict[str, Any]], verb: str, attended: bool
) -> None:
    tmp = tmp_path_factory.mktemp("exit")
    cfg: dict[str, Any] = {"channels": {}, "nodes": {"n": {"site": "s", "channels": []}},
                           "recovery": {"attendedRack": attended}}
    for i, ch in enumerate(channels):
        name = f"c{i}"
        cfg["channels"][name] = {
            "type": "simulated", "verbs": sorted(ch["verbs"]), "machines": {"m": ch["state"]},
            "readback": ch["readback"], "timeout_s": 0.01,
            "faults": {"m": ch["fault"]} if ch["fault"] else {},
        }
        cfg["nodes"]["n"]["channels"].append({"channel": name, "target": "m"})
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    undiscovered = [ch["fault"] in DISCOVERY_FAULTS for ch in channels]

    # offers: 1 exactly when a channel of the node could not be discovered
    code, out = _cli(path, "offers", "n", "-o", "json")
    assert code == (1 if any(undiscovered) else 0)
    offer = json.loads(out)["nodes"][0]["verbs"][verb]

    # state: 1 exactly when no channel produced a reading (every one failed, or none exists)
    code, _ = _cli(path, "state", "n", "-o", "json")
    assert code == (1 if all(undiscovered) else 0)

    # invoke: 3 when the rule withholds, 1 when discovery or the device failed, else 0
    code, _ = _cli(path, "invoke", "n", verb, "--yes", "--reason", "property test")
    if not offer["offered"]:
        assert code == (1 if offer["cause"] == "channel" else 3)
        assert offer["cause"] == "rule" or any(undiscovered)
    else:
        carrier = channels[int(offer["channel"][1:])]
        assert code == (1 if carrier["fault"] == "refused"
                        and not _already_there(carrier, verb) else 0)


def _already_there(channel: dict[str, Any], verb: str) -> bool:
    """A power-on or shutdown the device refused is done when one readback sees the machine
    already where it leads (host/invoking.py's docstring): an ``on-only`` readback cannot see
    off, ``none`` sees nothing."""
    target = {"power-on": "on", "shutdown": "off"}.get(verb)
    visible = channel["readback"] == "full" or (
        channel["readback"] == "on-only" and channel["state"] == "on")
    return target is not None and channel["state"] == target and visible
