"""The whole file is validated by every command, every problem with its line.

The ``lifecycle:`` section is validated when the file loads (``parse_config``), whatever
the command: ``offers`` and ``state`` refuse a bad section as ``invoke`` and
``maintenance`` do (they accepted 63 of 68 such mutations before), each problem naming its
path and line. A file without the section imports none of the lifecycle; one with it
imports its settings and ports, never the guard, the store or the reconciler, for a
command that does not use them. The section validated at load is not validated again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from powerplane.config import load_config, parse_config
from powerplane.errors import ConfigError
from powerplane.settings.lifecycle import LifecycleConfig, ValidatedSection, lifecycle_config

HEAD = """\
channels:
  lab: {type: simulated, machines: {m1: 'on', m2: 'on'}}
nodes:
  n1: {channels: [{channel: lab, target: m1}]}
lifecycle:
"""

# (what is wrong, the section's lines, the path of the problem)
MUTATIONS: list[tuple[str, str, str]] = [
    ("an unknown key", "  bogus: 1\n", "lifecycle.bogus"),
    ("a misspelt key", "  settle_windows_s: 30\n", "lifecycle.settle_windows_s"),
    ("a negative settle window", "  settle_window_s: -3\n", "lifecycle.settle_window_s"),
    ("a settle window over a day", "  settle_window_s: 90000\n", "lifecycle.settle_window_s"),
    ("a text settle window", "  settle_window_s: soon\n", "lifecycle.settle_window_s"),
    ("a zero drain deadline", "  drain_deadline_s: 0\n", "lifecycle.drain_deadline_s"),
    ("a negative evacuation timeout", "  evacuation_timeout_s: -1\n",
     "lifecycle.evacuation_timeout_s"),
    ("a zero ready timeout", "  ready_timeout_s: 0\n", "lifecycle.ready_timeout_s"),
    ("a list readback window", "  readback_window_s: [1]\n", "lifecycle.readback_window_s"),
    ("a zero readback cadence", "  readback_cadence_s: 0\n", "lifecycle.readback_cadence_s"),
    ("a zero tick", "  tick_s: 0\n", "lifecycle.tick_s"),
    ("a zero concurrency", "  concurrency: 0\n", "lifecycle.concurrency"),
    ("a busy timeout over an hour", "  busy_timeout_s: 4000\n", "lifecycle.busy_timeout_s"),
    ("a mapping label", "  control_plane_label: {a: b}\n", "lifecycle.control_plane_label"),
    ("a list virtual label", "  virtual_label: [a]\n", "lifecycle.virtual_label"),
    ("a text no_control_plane", "  no_control_plane: maybe\n", "lifecycle.no_control_plane"),
    ("a zero reason length", "  reason_policy: {min_length: 0}\n",
     "lifecycle.reason_policy.min_length"),
    ("an unknown reason policy key", "  reason_policy: {minimum: 3}\n",
     "lifecycle.reason_policy.minimum"),
    ("a scalar reason policy", "  reason_policy: 8\n", "lifecycle.reason_policy"),
    ("a mapping forbidden list", "  reason_policy: {forbidden: {a: b}}\n",
     "lifecycle.reason_policy.forbidden"),
    ("a list store", "  store: [a]\n", "lifecycle.store"),
    ("an unknown store type", "  store: {type: postgres}\n", "lifecycle.store.type"),
    ("a store without type", "  store: {path: x.db}\n", "lifecycle.store.type"),
    ("an unknown sqlite key", "  store: {type: sqlite, file: x.db}\n", "lifecycle.store.file"),
    ("an unknown cluster type", "  cluster: {type: nomad}\n", "lifecycle.cluster.type"),
    ("a scalar cluster", "  cluster: simulated\n", "lifecycle.cluster"),
    ("an unknown simulated cluster key", "  cluster: {type: simulated, podz: {}}\n",
     "lifecycle.cluster.podz"),
    ("negative eviction ticks", "  cluster: {type: simulated, eviction_ticks: -1}\n",
     "lifecycle.cluster.eviction_ticks"),
    ("a bad pdb", "  cluster: {type: simulated, pdbs: {p: {allowed_disruptions: 1}}}\n",
     "lifecycle.cluster.pdbs.p.pods"),
    ("an unknown storage type", "  storage: {type: ceph}\n", "lifecycle.storage.type"),
    ("an unknown storage preset",
     "  storage: {type: simulated, preset: rook}\n", "lifecycle.storage.preset"),
    ("negative evictions per read",
     "  storage: {type: simulated, evict_per_read: -2}\n", "lifecycle.storage.evict_per_read"),
]


def _write(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "powerplane.yaml"
    path.write_text(HEAD + section)
    return path


@pytest.mark.parametrize(("what", "section", "where"), MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_every_lifecycle_problem_is_found_at_load_with_its_line(
    tmp_path: Path, what: str, section: str, where: str
) -> None:
    path = _write(tmp_path, section)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    problems = info.value.problems
    assert [p.path for p in problems] == [where], (what, problems)
    assert problems[0].line == 6, (what, problems)  # the mutated line (the section's first)


def test_lifecycle_problems_come_with_the_other_problems_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text(HEAD.replace("  n1: {channels", "  n1: {sight: x, channels")
                    + "  settle_window_s: -3\n  reason_policy: {min_length: 0}\n"
                    + "limits: {total: 0}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    found = {(p.path, p.line) for p in info.value.problems}
    assert found == {("lifecycle.settle_window_s", 6), ("lifecycle.reason_policy.min_length", 7),
                     ("limits.total", 8), ("nodes.n1.sight", 4)}


def test_a_valid_section_is_validated_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "  settle_window_s: 30\n  store: ./p.db\n")
    deployment = load_config(path)
    assert isinstance(deployment.lifecycle, ValidatedSection)
    assert dict(deployment.lifecycle) == {"settle_window_s": 30, "store": "./p.db"}
    config = lifecycle_config(deployment.lifecycle, deployment.source)
    assert isinstance(config, LifecycleConfig)
    assert config.settle_window_s == 30
    assert lifecycle_config(deployment.lifecycle, deployment.source) is config
    assert lifecycle_config(dict(deployment.lifecycle)) == config  # plain data: validated


def test_parse_config_validates_the_section_too() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"lifecycle": {"tick_s": 0}})
    assert [p.path for p in info.value.problems] == ["lifecycle.tick_s"]
    assert parse_config({}).lifecycle == {}


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(path),
                           *args], capture_output=True, text=True, timeout=60, check=False)


COMMANDS = [
    ("offers",),
    ("offers", "n1"),
    ("state", "n1"),
    ("state", "n1", "-o", "json"),
    ("invoke", "n1", "reboot", "--reason", "kernel update", "--yes", "--dry-run"),
    ("maintenance", "list"),
    ("maintenance", "status", "n1"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_refuses_a_bad_section_naming_each_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = _write(tmp_path, "  settle_window_s: -3\n  no_control_plane: maybe\n  bogus: 1\n")
    res = _cli(path, *command)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    for line in ("lifecycle.settle_window_s (line 6):", "lifecycle.no_control_plane (line 7):",
                 "lifecycle.bogus (line 8): unknown key"):
        assert line in res.stderr, res.stderr
    assert not (tmp_path / "powerplane.db").exists()  # refused before a store is opened


IMPORTS = """
import sys
from powerplane.cli import main
try:
    main(['--config', sys.argv[1], 'state', 'n1'])
except SystemExit as exc:
    code = exc.code
import json
print(json.dumps(sorted(m for m in sys.modules if m.startswith('powerplane.lifecycle')
                        or m == 'powerplane.settings.lifecycle')))
"""


def _lifecycle_imports(path: Path) -> list[str]:
    res = subprocess.run([sys.executable, "-c", IMPORTS, str(path)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    found: list[str] = json.loads(res.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.perf
def test_what_state_imports_of_the_lifecycle(tmp_path: Path) -> None:
    bare = tmp_path / "bare.yaml"
    bare.write_text(HEAD.replace("lifecycle:\n", ""))
    assert _lifecycle_imports(bare) == []
    path = _write(tmp_path, "  settle_window_s: 30\n  cluster: {type: simulated}\n")
    found = set(_lifecycle_imports(path))
    assert "powerplane.settings.lifecycle" in found
    heavy = {"powerplane.lifecycle.guard", "powerplane.lifecycle.reconciler",
             "powerplane.lifecycle.store", "powerplane.lifecycle.service",
             "powerplane.lifecycle.dispatch", "powerplane.lifecycle.model"}
    assert not found & heavy, f"perf (one-shot startup): state imports {found & heavy}"
