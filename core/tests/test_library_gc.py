"""Library code never tunes the garbage collector: ``powerplane.host``, ``powerplane.scheduling``
and ``powerplane.lifecycle`` call no ``gc.freeze``/``unfreeze``/``disable``/``set_threshold``,
and an application that embeds ``PowerHost`` and froze objects of its own keeps them frozen,
and its thresholds, after a fleet call. GC tuning lives in the CLI process only
(``test_cli_gc.py``)."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import powerplane
from powerplane import InvokeResult, PowerHost, Verb, load_config

CONFIG = ("channels:\n  lab:\n    type: simulated\n    machines: {m1: 'on', m2: 'on'}\n"
          "nodes:\n  n1:\n    channels: [{channel: lab, target: m1}]\n"
          "  n2:\n    channels: [{channel: lab, target: m2}]\n")


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's settings as the test found them, whatever the test did."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


TUNING = {"freeze", "unfreeze", "disable", "enable", "set_threshold"}


def _library_sources() -> Iterator[Path]:
    """Every module of core but the CLI's (the command's own process may tune it)."""
    root = Path(powerplane.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if "cli" not in path.relative_to(root).parts:
            yield path


def test_library_code_never_tunes_the_collector() -> None:
    found = []
    sources = list(_library_sources())
    assert any(p.name == "scheduling.py" for p in sources)
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in TUNING
                    and isinstance(node.value, ast.Name) and node.value.id == "gc"):
                found.append(f"{path.name}:{node.lineno}: gc.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "gc":
                found.append(f"{path.name}:{node.lineno}: from gc import ...")
    assert found == [], "GC tuning lives in the CLI process only (powerplane.cli._common)"


async def test_a_fleet_call_keeps_what_the_embedding_application_froze(
        tmp_path: Path, collector: None) -> None:
    config = tmp_path / "powerplane.yaml"
    config.write_text(CONFIG)
    kept = [["embedder", i] for i in range(1000)]  # the application's objects (lists: tracked)
    gc.freeze()
    gc.set_threshold(5000, 20, 30)
    async with PowerHost(load_config(config)) as host:
        results = await host.invoke_many(["n1", "n2"], Verb.REBOOT, "gc test")
        tracked = {id(o) for o in gc.get_objects()}  # generations 0-2: not the frozen ones
    assert all(isinstance(r, InvokeResult) for r in results.values()), results
    assert not any(id(o) in tracked for o in kept), "the application's objects were unfrozen"
    assert id(host) in tracked, "the host's own objects were frozen"
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (5000, 20, 30)
