"""The README's lifecycle example works as written: its YAML, then its commands, in order."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from powerplane.cli import cli
from powerplane.lifecycle import LifecycleConfig, lifecycle_config

README = Path(__file__).resolve().parents[3] / "README.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## The maintenance lifecycle\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", section(), flags=re.DOTALL)


def commands() -> list[list[str]]:
    (script,) = blocks("sh")
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            assert argv[0] == "powerplane", line
            out.append(argv[1:])
    return out


def run(argv: list[str]) -> Result:
    return CliRunner().invoke(cli, argv)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POWERPLANE_CONFIG", raising=False)
    monkeypatch.delenv("POWERPLANE_ACTOR", raising=False)  # refused: the OS user asks
    return tmp_path


def test_the_documented_commands_work_as_written(workdir: Path) -> None:
    (workdir / "powerplane.yaml").write_text(blocks("yaml")[0], encoding="utf-8")
    argvs = commands()
    assert ["maintenance", "run", "--until-idle"] in argvs
    for argv in argvs:
        res = run(argv)
        assert res.exit_code == 0, (argv, res.output)
    listed = json.loads(run(["maintenance", "list", "--all", "-o", "json"]).output)
    phases = {m["node"]: m["phase"] for m in listed["maintenances"]}
    assert phases == {"node-2": "Complete", "node-1": "Complete"}
    node1 = next(m for m in listed["maintenances"] if m["node"] == "node-1")
    assert [d["verb"] for d in node1["dispatchRecords"]] == ["shutdown", "power-on"]


def test_the_documented_keys_are_the_defaults() -> None:
    reference = yaml.safe_load(blocks("yaml")[-1])
    assert set(reference) == {"lifecycle"}
    documented = lifecycle_config(reference["lifecycle"]).model_dump()
    assert documented == LifecycleConfig().model_dump()
    assert set(reference["lifecycle"]) == set(LifecycleConfig.model_fields)


def test_an_unlabelled_deployment_is_told_what_to_set(workdir: Path) -> None:
    text = blocks("yaml")[0]
    unlabelled = re.sub(r"^ *labels: .*\n", "", text, flags=re.MULTILINE)
    assert "control-plane" not in unlabelled
    (workdir / "powerplane.yaml").write_text(unlabelled, encoding="utf-8")
    res = run(["maintenance", "request", "node-1", "--intent", "cordon",
               "--reason", "rack move today"])
    assert res.exit_code == 3, res.output
    assert "no control-plane membership can be derived" in res.output
    assert "node-role.kubernetes.io/control-plane" in res.output
    assert "no_control_plane: true" in res.output
    declared = unlabelled.replace("lifecycle:\n", "lifecycle:\n  no_control_plane: true\n")
    (workdir / "powerplane.yaml").write_text(declared, encoding="utf-8")
    res = run(["maintenance", "request", "node-1", "--intent", "cordon",
               "--reason", "rack move today"])
    assert res.exit_code == 0, res.output
