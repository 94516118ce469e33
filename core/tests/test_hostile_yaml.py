"""Hostile YAML through the CLI: exit 2, the file and the line, no traceback, bounded.

Each case runs ``powerplane --config FILE offers`` in a child process whose address space
(``RLIMIT_AS``) and CPU time (``RLIMIT_CPU``) are limited: a blow-up becomes a
MemoryError traceback or a kill by the kernel, never a pass. The memory bound is the
child's own peak on a good config plus 100 MiB.
"""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CPU_SECONDS = 5
HEADROOM = 100 * 1024 * 1024

GOOD = ("channels:\n  lab: {type: simulated, machines: {m1: 'on'}}\n"
        "nodes:\n  n1: {channels: [{channel: lab, target: m1}]}\n")


def _bomb() -> str:
    """10 anchors x 10 levels: 10**10 leaves once expanded (the issue's 332-byte bomb)."""
    rows = ["a: &a [x,x,x,x,x,x,x,x,x,x]"]
    names = "abcdefghij"
    for prev, name in itertools.pairwise(names):
        rows.append(f"{name}: &{name} [{','.join(['*' + prev] * 10)}]")
    return "\n".join(rows) + "\n"


# name -> (document, expected line, words the message must hold)
CASES: dict[str, tuple[str | bytes, int, str]] = {
    "alias bomb": (_bomb(), 6, "nodes, aliases expanded"),
    "recursive alias": ("nodes: &a [*a]\n", 1, "recursive alias *a"),
    "recursive alias in a map": ("x:\n  y: &a {z: *a}\n", 2, "recursive alias *a"),
    "undefined alias": ("nodes: *nope\n", 1, "undefined alias *nope"),
    "1000-deep flow nesting": ("a: " + "[" * 1000 + "]" * 1000 + "\n", 1, "nesting"),
    "5000-deep flow maps": ("a: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", 1, "nesting"),
    "65-deep flow nesting": ("a: " + "[" * 65 + "]" * 65 + "\n", 1, "nesting deeper than 64"),
    "1400-deep block maps": ("".join(" " * i + "k:\n" for i in range(1400)), 65,
                             "nesting deeper"),
    "python name tag": ("nodes: !!python/name:os.system\n", 1, "tag !!python/name:os.system"),
    "python apply tag": ("nodes: !!python/object/apply:os.system [echo hi]\n", 1,
                         "tag !!python/object/apply:os.system is not accepted"),
    "unknown tag on a map": ("channels: !foo {}\n", 1, "tag !foo is not accepted"),
    "unknown tag on a scalar": ("nodes:\n  n1:\n    site: !bar x\n", 3, "tag !bar"),
    "binary tag": ("nodes: !!binary aGk=\n", 1, "tag !!binary"),
    "merge key on a scalar": ("nodes:\n  n1:\n    <<: 5\n", 3, "merge key '<<' takes a mapping"),
    "merge key on a list of scalars": ("a: &a 1\nnodes:\n  <<: [*a]\n", 3, "merge key"),
    "half a million scalars": ("a: [" + ",".join(["x"] * 500_000) + "]\n", 1,
                               "nodes, aliases expanded"),
    "too long a number": ("limits:\n  total: " + "1" * 600_000 + "\n", 2,
                          "number longer than"),
    "a second document": ("nodes: {}\n---\nnodes: {}\n", 2, "single document"),
    "NUL character": ("nodes:\n  n1: {site: a\x00b}\n", 2, "control characters"),
    "not UTF-8": (b"nodes:\n  n1: {site: \xff\xfe}\n", 2, "not UTF-8"),
    "many duplicate keys": ("a: 1\n" * 200_000, 3, "duplicate key 'a'"),
    "syntax error deep inside": ("a: " + "[" * 30 + "\n", 2, "YAML syntax error"),
}


def _baseline_vm(tmp_path: Path) -> int:
    """The child's peak address space (bytes) on a good config, measured in the child."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    code = (
        "import sys\n"
        "from powerplane.cli import main\n"
        "try:\n"
        f"    main(['--config', {str(good)!r}, 'offers'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmPeak:')][0]\n"
        "print('VMPEAK', int(peak.split()[1]) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return int(out.split("VMPEAK")[1].split()[0])


@pytest.fixture(scope="module")
def limits(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], None]:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to measure the child's baseline")
    bound = _baseline_vm(tmp_path_factory.mktemp("baseline")) + HEADROOM

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (bound, bound))
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))

    return apply


def run_limited(path: Path, limits: Callable[[], None],
                *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("POWERPLANE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "powerplane.cli", "--config", str(path), *args],
        capture_output=True, text=True, env=env, preexec_fn=limits, timeout=60,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_yaml_is_exit_2_with_file_and_line(
    case: str, tmp_path: Path, limits: Callable[[], None]
) -> None:
    text, line, words = CASES[case]
    path = tmp_path / "powerplane.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    assert path.stat().st_size < 1024 * 1024
    res = run_limited(path, limits, "offers")
    out = res.stdout + res.stderr
    assert res.returncode == 2, f"exit {res.returncode}:\n{out[-2000:]}"
    assert "Traceback" not in out
    assert f"invalid config {path}" in res.stderr
    assert f"(line {line})" in res.stderr, res.stderr[-2000:]
    assert words in res.stderr, res.stderr[-2000:]
    assert len(res.stderr) < 20_000  # a bounded answer, not one line per duplicate


def test_a_file_over_the_size_bound_is_refused_unread(
    tmp_path: Path, limits: Callable[[], None]
) -> None:
    from powerplane._yaml import MAX_BYTES

    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:  # sparse: its size is checked before anything is read
        handle.truncate(MAX_BYTES + 1)
    res = run_limited(path, limits, "offers")
    assert res.returncode == 2, res.stderr
    assert f"larger than {MAX_BYTES} bytes" in res.stderr
    assert "Traceback" not in res.stdout + res.stderr


def test_the_good_config_passes_under_the_same_limits(
    tmp_path: Path, limits: Callable[[], None]
) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    res = run_limited(path, limits, "offers", "-o", "json")
    assert res.returncode == 0, res.stderr


def test_anchors_aliases_and_merges_still_work(tmp_path: Path) -> None:
    from powerplane import ConfigError, load_config

    path = tmp_path / "p.yaml"
    path.write_text(
        "x-base: &base {type: simulated, machines: {m1: 'on', m2: 'off'}}\n"
        "channels:\n"
        "  lab: {<<: *base, latency_ms: 1}\n"
        "  lab2:\n    <<: [*base, {latency_ms: 2}]\n    machines: {m3: 'on'}\n"
        "nodes:\n  n1: &node {channels: [{channel: lab, target: m1}]}\n  n2: *node\n",
    )
    with pytest.raises(ConfigError) as info:  # x-base is not a top-level key
        load_config(path)
    assert "x-base (line 1): unknown key" in str(info.value)
    path.write_text("channels:\n"
                    "  lab: &base {type: simulated, machines: {m1: 'on', m2: 'off'}}\n"
                    "  lab2:\n    <<: [*base, {latency_ms: 2}]\n    machines: {m3: 'on'}\n"
                    "nodes:\n  n1: &node {channels: [{channel: lab, target: m1}]}\n"
                    "  n2: *node\n")
    dep = load_config(path)
    lab2 = dep.channels["lab2"].config
    assert lab2.machines == {"m3": "on"}  # type: ignore[attr-defined]
    assert lab2.latency_ms == 2  # type: ignore[attr-defined]
    assert dep.nodes["n2"].channels[0].target == "m1"


def test_yaml_12_booleans_and_lines_are_kept() -> None:
    from powerplane._yaml import load_yaml

    data, lines = load_yaml("a:\n  b: on\n  c: [true, 'x', 3]\n  d: 1.5\n", "x")
    assert data == {"a": {"b": "on", "c": [True, "x", 3], "d": 1.5}}
    assert lines[("a", "b")] == 2
    assert lines[("a", "c", 2)] == 3
    assert lines.get(("a", "nope")) is None
