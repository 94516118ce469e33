"""DMTF's mockups ship in the distribution with DMTF's licence: a clone alone runs the tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from powerplane_redfish.testing.dmtf import mockups_dir

TREES = ("public-bladed", "public-pdu", "public-rackmount1")
DISTRIBUTION = Path(__file__).resolve().parents[1]


def test_the_mockups_the_tests_use_are_in_the_repository_with_the_licence() -> None:
    root = mockups_dir()
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == list(TREES)
    licence = (root / "LICENSE.md").read_text(encoding="utf-8")
    assert "BSD 3-Clause License" in licence
    assert "Distributed Management Task" in licence
    for tree in TREES:
        service = json.loads((root / tree / "index.json").read_text(encoding="utf-8"))
        assert service["@odata.id"] == "/redfish/v1/"
    # inside the distribution's source, not a sibling folder of the checkout
    assert root.is_relative_to(DISTRIBUTION / "src")


def test_the_built_wheel_carries_the_mockups_and_the_licence(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(DISTRIBUTION, source,
                    ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "out"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    if res.returncode != 0:
        pytest.fail(f"pip wheel failed: {res.stderr[-2000:]}")
    (wheel,) = (tmp_path / "out").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    prefix = "powerplane_redfish/testing/"
    assert f"{prefix}dmtf.py" in names
    assert f"{prefix}dmtf_mockups/LICENSE.md" in names
    shipped = {n for n in names if n.startswith(f"{prefix}dmtf_mockups/")}
    in_tree = {f"{prefix}{p.relative_to(mockups_dir().parent).as_posix()}"
               for p in mockups_dir().rglob("*") if p.is_file()}
    assert shipped == in_tree
