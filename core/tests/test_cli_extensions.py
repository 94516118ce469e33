"""The ``powerplane.cli`` entry points are the standard reader's (first of a name kept): on this
installation, on a site directory built by hand (a dist-info and an egg-info, a shadowed
second copy, other groups, comments), and a zip on ``sys.path``. ``--help`` lists each
extension with its own summary.

The reader of its own that core had before (which kept ``--help`` from importing
:mod:`importlib.metadata`) is gone: the last test pins the new truth, marked ``perf``."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from powerplane._entry_points import EntryPoint
from powerplane.cli import EXTENSION_GROUP
from powerplane.cli._extensions import scan


def _standard(group: str, path: list[str]) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    seen: set[str] = set()
    for dist in metadata.distributions(path=path):  # entry_points() keeps the first of a name
        key = re.sub(r"[-_.]+", "_", dist.name).lower()
        if key in seen:
            continue
        seen.add(key)
        for ep in dist.entry_points:
            if ep.group == group:
                found.setdefault(ep.name, (ep.value, dist.name))
    return found


def _dist(site: Path, leaf: str, name: str, entry_points: str) -> None:
    meta = site / leaf
    meta.mkdir(parents=True)
    (meta / ("METADATA" if leaf.endswith(".dist-info") else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\nName: not-this-one\n")
    (meta / "entry_points.txt").write_text(entry_points)


def test_this_installation_matches_the_standard_reader() -> None:
    mine = {n: (e.value, e.dist) for n, e in scan(EXTENSION_GROUP).items()}
    standard = {ep.name: (ep.value, ep.dist.name if ep.dist else "")
                for ep in metadata.entry_points(group=EXTENSION_GROUP)}
    assert mine == standard
    assert {"conformance", "demo", "new-plugin"} <= set(mine)


def test_a_hand_built_site_matches_the_standard_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Vendor_Tool-1.0.dist-info", "vendor-tool",
          "# a comment\n[console_scripts]\nvt = vendor_tool:main\n\n"
          "[powerplane.cli]\nvendor = vendor_tool.cli:command [extra]\n")
    _dist(first, "legacy_tool-0.3.egg-info", "legacy-tool",
          "[powerplane.cli]\nlegacy=legacy_tool:cmd.inner\n")
    _dist(second, "vendor.tool-2.0.dist-info", "vendor.tool",  # shadowed by the first copy
          "[powerplane.cli]\nshadowed = vendor_tool2:command\n")
    path = [str(first), str(second)]
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    mine = {n: (e.value, e.dist) for n, e in scan(EXTENSION_GROUP).items()
            if e.dist in ("vendor-tool", "legacy-tool", "vendor.tool")}
    assert mine == _standard(EXTENSION_GROUP, path)
    assert mine == {"vendor": ("vendor_tool.cli:command [extra]", "vendor-tool"),
                    "legacy": ("legacy_tool:cmd.inner", "legacy-tool")}


def test_a_zip_on_the_path_is_read_by_the_standard_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_tool-1.0.dist-info/METADATA", "Name: zipped-tool\nVersion: 1.0\n")
        zf.writestr("zipped_tool-1.0.dist-info/entry_points.txt",
                    "[powerplane.cli]\nzipped = zipped_tool:cmd\n")
    monkeypatch.syspath_prepend(str(archive))
    found = scan(EXTENSION_GROUP)
    assert found["zipped"] == EntryPoint("zipped", "zipped_tool:cmd", EXTENSION_GROUP,
                                         "zipped-tool", "1.0")


def test_an_extension_loads_by_its_value() -> None:
    ext = EntryPoint("x", "os.path:join", EXTENSION_GROUP, "python", "")
    assert ext.load() is __import__("os").path.join
    assert EntryPoint("y", "json [extra]", EXTENSION_GROUP, "python", "").load() \
        is __import__("json")


@pytest.mark.perf
def test_perf_help_lists_extensions_through_the_standard_reader() -> None:
    code = ("import sys\nfrom powerplane.cli import main\n"
            "try:\n  main(['--help'])\nexcept SystemExit: pass\n"
            "print('METADATA', 'importlib.metadata' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    # each extension listed with its own summary (was "(from powerplane-...)")
    assert "Run the conformance suite against a target" in out and "Start the bundled peers" in out
    # speed target given up (was "METADATA False": core read the metadata itself to spare
    # --help the import of importlib.metadata); the standard reader is the one now
    assert "METADATA True" in out, "perf: --help reads the entry points by importlib.metadata"
