"""Exit codes and streams of ``invoke`` and ``state``: a channel failure is 1 for every verb,
a one-node failure names its error class on stderr, and a node with no reading prints
nothing on stdout (docs/reference.md, ``powerplane state``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from powerplane.cli import cli

VERBS = ["reboot", "shutdown", "power-on", "terminate"]


def blind(tmp: Path, classification: str) -> Path:
    cfg: dict[str, Any] = {
        "channels": {"lab": {"type": "simulated", "verbs": VERBS, "machines": {"m": "on"},
                             "faults": {"m": "unreachable"}}},
        "nodes": {"n": {"classification": classification,
                        "channels": [{"channel": "lab", "target": "m"}]}},
    }
    path = tmp / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run(path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", str(path), *args])
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("classification", ["repairable", "replaceable"])
@pytest.mark.parametrize("verb", VERBS)
def test_a_channel_failure_is_exit_1_for_every_verb_naming_its_class(
    tmp_path: Path, verb: str, classification: str
) -> None:
    code, out, err = run(blind(tmp_path, classification), "invoke", "n", verb, "--yes",
                         "--reason", "kernel update")
    assert code == 1, err
    assert out == ""
    assert err.startswith("error: Unreachable: ") and "could not be discovered" in err


def test_a_rule_refusal_names_its_class_too(tmp_path: Path) -> None:
    cfg = {"channels": {"lab": {"type": "simulated", "verbs": ["reboot"],
                                "machines": {"m": "on"}}},
           "nodes": {"n": {"channels": [{"channel": "lab", "target": "m"}]}}}
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, out, err = run(path, "invoke", "n", "shutdown", "--yes", "--reason", "PSU swap")
    assert code == 3 and out == ""
    assert err.startswith("error: NotOffered: ")


def test_state_of_a_node_with_no_reading_prints_nothing_on_stdout(tmp_path: Path) -> None:
    path = blind(tmp_path, "repairable")
    code, out, err = run(path, "state", "n")
    assert code == 1
    assert out == ""
    assert "error: no reading of n: lab (Unreachable)" in err
    # a script still gets the node's document, each reading with its error class
    code, out, _ = run(path, "state", "n", "-o", "json")
    assert code == 1
    assert json.loads(out)["readings"][0]["error"] == "Unreachable"


def test_state_of_several_prints_only_the_nodes_read(tmp_path: Path) -> None:
    cfg = {"channels": {"lab": {"type": "simulated", "machines": {"a": "on", "b": "off"},
                                "faults": {"b": "unreachable"}}},
           "nodes": {"a": {"channels": [{"channel": "lab", "target": "a"}]},
                     "b": {"channels": [{"channel": "lab", "target": "b"}]}}}
    path = tmp_path / "powerplane.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code, out, err = run(path, "state", "a", "b")
    assert code == 1
    assert out.splitlines() == ["a: on via lab"]
    assert "no reading of b" in err
