"""The README's ``PowerHost`` embedding example runs as written against a simulated deployment.

The example is taken from README.md (the one ``python`` block of "Embedding `PowerHost`"),
as the lifecycle example is in ``core/tests/lifecycle/test_readme_example.py``, written to
a file unchanged and run by the interpreter in a directory whose ``powerplane.yaml`` is a
simulated deployment with the two nodes it names. What it did is then read back from the
simulated machines' state file: a shutdown observed off, then the reboot of both nodes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

DEPLOYMENT = """\
channels:
  lab:
    type: simulated
    verbs: [reboot, shutdown, power-on]
    machines: {m1: on, m2: on}
    state_file: ./lab-state.json
nodes:
  node-1:
    channels: [{channel: lab, target: m1}]
  node-2:
    channels: [{channel: lab, target: m2}]
"""


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Embedding `PowerHost`\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def example() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", section(), flags=re.DOTALL)
    assert len(blocks) == 1, f"README.md: {len(blocks)} python blocks in the embedding section"
    return blocks[0]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "powerplane.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    return tmp_path


def test_the_embedding_example_runs_as_written(workdir: Path) -> None:
    code = example()
    assert "PowerHost.from_config" in code and "confirm_power_off" in code
    (workdir / "example.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "POWERPLANE_CONFIG"}
    env["POWERPLANE_LOAD_PLUGINS"] = "simulated"
    res = subprocess.run([sys.executable, "example.py"], cwd=workdir, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stdout.splitlines()
    # the shutdown was offered, accepted and its power-off observed
    assert lines == [
        "shutdown accepted: True - off observed: True",  # offered, accepted, observed off
        "node-1 reads off",
        "node-1 accepted by lab",                        # both nodes got the reboot
        "node-2 accepted by lab",
    ], res.stdout
    # what the simulated machines were sent, in order, each once
    state = json.loads((workdir / "lab-state.json").read_text(encoding="utf-8"))
    assert state["dispatches"] == [["shutdown", "m1"], ["reboot", "m1"], ["reboot", "m2"]]


def test_the_example_is_the_one_python_block_of_its_section() -> None:
    code = example()
    compile(code, "README.md", "exec")  # a syntax error fails here, by its line
    assert "asyncio.run(main())" in code
