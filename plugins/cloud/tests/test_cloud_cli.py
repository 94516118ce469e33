"""``powerplane`` CLI with an ec2 channel: terminate asks for the typed node name."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from cloud_peers import Moto, ec2_channel_config

from powerplane.cli import cli


def write_config(tmp_path: Path, moto: Moto, pet: str, cattle: str) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump({
        "channels": {"aws": ec2_channel_config(moto.url)},
        "nodes": {
            "pet": {"channels": [{"channel": "aws", "target": pet}]},
            "cattle": {"classification": "replaceable",
                       "channels": [{"channel": "aws", "target": cattle}]},
        },
    }), encoding="utf-8")
    return path


def test_terminate_is_offered_for_the_replaceable_node_and_needs_its_typed_name(
    moto: Moto, tmp_path: Path
) -> None:
    pet, cattle = moto.run(2)
    config = str(write_config(tmp_path, moto, pet, cattle))
    runner = CliRunner()

    out = runner.invoke(cli, ["--config", config, "offers", "-o", "json"])
    assert out.exit_code == 0, out.output
    verbs = {n["node"]: n["verbs"] for n in json.loads(out.output)["nodes"]}
    assert verbs["cattle"]["terminate"]["offered"] is True
    assert verbs["pet"]["terminate"]["offered"] is False
    assert "repairable" in verbs["pet"]["terminate"]["reason"]

    out = runner.invoke(cli, ["--config", config, "invoke", "pet", "terminate",
                              "--reason", "t", "--yes"])
    assert out.exit_code == 3
    assert moto.state(pet) == "running"

    out = runner.invoke(cli, ["--config", config, "invoke", "cattle", "terminate",
                              "--reason", "replace"], input="pet\n")
    assert out.exit_code == 2
    assert "nothing was sent" in out.output
    assert moto.state(cattle) == "running"

    out = runner.invoke(cli, ["--config", config, "invoke", "cattle", "terminate",
                              "--reason", "replace", "-o", "json"], input="cattle\n")
    assert out.exit_code == 0, out.output
    assert moto.state(cattle) == "terminated"

    out = runner.invoke(cli, ["--config", config, "state", "cattle", "-o", "json"])
    assert json.loads(out.output)["detail"] == "terminated"
