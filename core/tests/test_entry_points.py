"""Entry points read without :mod:`importlib.metadata` give the standard reader's answer: on
this installation, on hand-built site directories (a dist-info and an egg-info, a shadowed
second copy, other groups, comments, a name declared by two distributions), and through the
standard reader where a ``sys.path`` entry is a zip."""

from __future__ import annotations

import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from powerplane import _entry_points
from powerplane._entry_points import EntryPoint, read, read_here


def _dist(site: Path, leaf: str, name: str, version: str, entry_points: str) -> None:
    meta = site / leaf
    meta.mkdir(parents=True)
    (meta / ("METADATA" if leaf.endswith(".dist-info") else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-this-one\n"
        "Version: 0.0\n")
    (meta / "entry_points.txt").write_text(entry_points)


def _as_rows(found: dict[str, list[EntryPoint]], group: str) -> list[tuple[str, ...]]:
    return sorted((e.name, e.value, e.dist, e.version) for e in found[group])


def _standard_rows(group: str, path: list[str] | None = None) -> list[tuple[str, ...]]:
    if path is None:
        eps = list(metadata.entry_points(group=group))
    else:  # entry_points() has no path argument: the first distribution of a name, as it does
        seen: set[str] = set()
        eps = []
        for dist in metadata.distributions(path=path):
            key = dist.name.replace("-", "_").replace(".", "_").lower()
            if key not in seen:
                seen.add(key)
                eps += [ep for ep in dist.entry_points if ep.group == group]
    return sorted((ep.name, ep.value, ep.dist.name if ep.dist else "",
                   ep.dist.version if ep.dist else "") for ep in eps)


@pytest.mark.parametrize("group", ["powerplane", "powerplane.cli", "console_scripts"])
def test_this_installation_matches_the_standard_reader(group: str) -> None:
    found = read((group,))
    assert _as_rows(found, group) == _standard_rows(group)


def test_this_installation_has_the_project_plugins() -> None:
    found = read(("powerplane",))
    names = {e.name for e in found["powerplane"]}
    assert {"simulated", "redfish", "pdu", "talos", "cloud", "ipmi", "kubernetes"} <= names


def test_a_hand_built_site_matches_the_standard_reader(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Vendor_Tool-1.0.dist-info", "vendor-tool", "1.0",
          "# a comment\n[console_scripts]\nvt = vendor_tool:main\n\n"
          "[powerplane]\nvendor = vendor_tool.plugin [extra]\n# another comment\n"
          "[pydantic]\nrecorder = vendor_tool.pyd:plugin\n")
    _dist(first, "legacy_tool-0.3.egg-info", "legacy-tool", "0.3",
          "[powerplane]\nlegacy=legacy_tool:module.inner\nvendor = legacy_tool.again\n")
    _dist(second, "vendor.tool-2.0.dist-info", "vendor.tool", "2.0",  # shadowed by the first
          "[powerplane]\nshadowed = vendor_tool2:plugin\n")
    path = [str(first), str(second), str(tmp_path / "missing")]
    found = read(("powerplane", "pydantic"), path)
    assert _as_rows(found, "powerplane") == _standard_rows("powerplane", path)
    assert _as_rows(found, "powerplane") == [
        ("legacy", "legacy_tool:module.inner", "legacy-tool", "0.3"),
        ("vendor", "legacy_tool.again", "legacy-tool", "0.3"),
        ("vendor", "vendor_tool.plugin [extra]", "vendor-tool", "1.0"),
    ]
    assert [e.name for e in found["pydantic"]] == ["recorder"]
    assert [e.group for e in found["pydantic"]] == ["pydantic"]


def test_a_zip_on_the_path_is_read_by_the_standard_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_tool-1.0.dist-info/METADATA", "Name: zipped-tool\nVersion: 1.5\n")
        zf.writestr("zipped_tool-1.0.dist-info/entry_points.txt",
                    "[powerplane]\nzipped = zipped_tool:plugin\n")
    monkeypatch.syspath_prepend(str(archive))
    found = read(("powerplane",))
    assert EntryPoint("zipped", "zipped_tool:plugin", "powerplane", "zipped-tool", "1.5") \
        in found["powerplane"]
    assert read_here(("powerplane",)) is None


def test_an_entry_point_loads_by_its_value() -> None:
    assert _entry_points.load("os.path:join") is __import__("os").path.join
    assert _entry_points.load("json [extra]") is __import__("json")
    ep = EntryPoint("x", "os.path:join", "g", "python", "")
    assert ep.load() is __import__("os").path.join
