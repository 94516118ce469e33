"""Entry points are the standard reader's (:func:`importlib.metadata.entry_points`), in core's one
record (:class:`powerplane._entry_points.EntryPoint`): on this installation, on hand-built site
directories (a dist-info and an egg-info, a shadowed second copy, other groups, comments, a
name declared by two distributions), a zip on ``sys.path``, and a distribution that only a
custom finder on :data:`sys.meta_path` knows (which the reader core had before ignored)."""

from __future__ import annotations

import sys
import zipfile
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from powerplane._entry_points import EntryPoint, read


def _dist(site: Path, leaf: str, name: str, version: str, entry_points: str) -> None:
    meta = site / leaf
    meta.mkdir(parents=True)
    (meta / ("METADATA" if leaf.endswith(".dist-info") else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-this-one\n"
        "Version: 0.0\n")
    (meta / "entry_points.txt").write_text(entry_points)


def _as_rows(found: Iterable[EntryPoint]) -> list[tuple[str, ...]]:
    return sorted((e.name, e.value, e.dist, e.version) for e in found)


def _standard_rows(group: str) -> list[tuple[str, ...]]:
    return sorted((ep.name, ep.value, ep.dist.name if ep.dist else "",
                   ep.dist.version if ep.dist else "")
                  for ep in metadata.entry_points(group=group))


@pytest.mark.parametrize("group", ["powerplane", "powerplane.cli", "console_scripts"])
def test_this_installation_matches_the_standard_reader(group: str) -> None:
    found = read(group)
    assert _as_rows(found) == _standard_rows(group)
    assert {e.group for e in found} <= {group}


def test_this_installation_has_the_project_plugins() -> None:
    names = {e.name for e in read("powerplane")}
    assert {"simulated", "redfish", "pdu", "talos", "cloud", "ipmi", "kubernetes"} <= names


def test_a_hand_built_site_matches_the_standard_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Vendor_Tool-1.0.dist-info", "vendor-tool", "1.0",
          "# a comment\n[console_scripts]\nvt = vendor_tool:main\n\n"
          "[powerplane]\nvendor = vendor_tool.plugin [extra]\n# another comment\n"
          "[pydantic]\nrecorder = vendor_tool.pyd:plugin\n")
    _dist(first, "legacy_tool-0.3.egg-info", "legacy-tool", "0.3",
          "[powerplane]\nlegacy=legacy_tool:module.inner\nvendor = legacy_tool.again\n")
    _dist(second, "vendor.tool-2.0.dist-info", "vendor.tool", "2.0",  # shadowed by the first
          "[powerplane]\nshadowed = vendor_tool2:plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path / "missing"))
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    found = read("powerplane")
    assert _as_rows(found) == _standard_rows("powerplane")
    mine = [e for e in found if e.dist in ("vendor-tool", "legacy-tool", "vendor.tool")]
    assert _as_rows(mine) == [
        ("legacy", "legacy_tool:module.inner", "legacy-tool", "0.3"),
        ("vendor", "legacy_tool.again", "legacy-tool", "0.3"),
        ("vendor", "vendor_tool.plugin [extra]", "vendor-tool", "1.0"),
    ]
    assert [(e.name, e.group) for e in read("pydantic")] == [("recorder", "pydantic")]


def test_a_zip_on_the_path_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_tool-1.0.dist-info/METADATA", "Name: zipped-tool\nVersion: 1.5\n")
        zf.writestr("zipped_tool-1.0.dist-info/entry_points.txt",
                    "[powerplane]\nzipped = zipped_tool:plugin\n")
    monkeypatch.syspath_prepend(str(archive))
    assert EntryPoint("zipped", "zipped_tool:plugin", "powerplane", "zipped-tool", "1.5") \
        in read("powerplane")


class MemoryDistribution(metadata.Distribution):
    """A distribution that lives in memory (as an installer's or an embedder's finder may
    serve one): no file on ``sys.path`` describes it."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files_ = files

    def read_text(self, filename: str) -> str | None:
        return self.files_.get(filename)

    def locate_file(self, path: Any) -> Path:
        return Path("/nonexistent") / str(path)


class MemoryFinder:
    """A :data:`sys.meta_path` finder that finds no module and one distribution."""

    def __init__(self, dist: MemoryDistribution) -> None:
        self.dist = dist

    def find_spec(self, *args: Any, **kwargs: Any) -> None:
        return None

    def find_distributions(self, context: Any = None) -> Iterator[metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is None or name.replace("-", "_").lower() == "memory_tool":
            yield self.dist


MEMORY = MemoryDistribution({
    "METADATA": "Metadata-Version: 2.1\nName: memory-tool\nVersion: 4.2\n",
    "entry_points.txt": "[powerplane]\nmemory = json\n[powerplane.cli]\nmemory-cmd = json:dumps\n",
})


@pytest.fixture
def memory_finder(monkeypatch: pytest.MonkeyPatch) -> MemoryFinder:
    finder = MemoryFinder(MEMORY)
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, finder])
    return finder


def test_a_distribution_only_a_custom_finder_knows_is_read(memory_finder: MemoryFinder) -> None:
    assert EntryPoint("memory", "json", "powerplane", "memory-tool", "4.2") in read("powerplane")
    assert EntryPoint("memory-cmd", "json:dumps", "powerplane.cli", "memory-tool", "4.2") \
        in read("powerplane.cli")
    assert _as_rows(read("powerplane")) == _standard_rows("powerplane")


def test_a_plugin_only_a_custom_finder_knows_is_loaded(memory_finder: MemoryFinder) -> None:
    from powerplane.plugins import load_plugins

    reg = load_plugins()
    assert "memory" not in {f.name for f in reg.failures}
    info = {p.name: p for p in reg.plugins}["memory"]  # the json module: no channel type
    assert (info.distribution, info.version, info.channel_types) == ("memory-tool", "4.2", ())


def test_a_command_only_a_custom_finder_knows_is_listed(memory_finder: MemoryFinder) -> None:
    from powerplane.cli import EXTENSION_GROUP
    from powerplane.cli._extensions import scan

    found = scan(EXTENSION_GROUP)
    assert found["memory-cmd"].dist == "memory-tool"
    assert found["memory-cmd"].load() is __import__("json").dumps


def test_an_entry_point_loads_by_its_value() -> None:
    assert EntryPoint("x", "os.path:join", "g", "python", "").load() is __import__("os").path.join
    assert EntryPoint("y", "json [extra]", "g", "python", "").load() is __import__("json")
