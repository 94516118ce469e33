"""Every tests folder says what its tests test: a README.md that indexes its files.

Issue 25 ("tests that say what they test"): many test files are named after a behaviour,
not a module, so each folder of tests (every folder under the workspace's pytest
``testpaths`` that holds a ``test_*.py``) has a ``README.md`` with one line per file,
``- `test_x.py` — the module or behaviour it covers``. This test fails when a test file
exists that its folder's README does not list, when the README lists a file that does
not exist (helpers such as ``conftest.py`` and data folders may be listed; a listed one
must exist), or when a file is listed twice.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"^[-*] `([^`]+)`")


def folders_of_tests() -> list[Path]:
    """Every folder under the pytest ``testpaths`` that holds a ``test_*.py`` file."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    roots = config["tool"]["pytest"]["ini_options"]["testpaths"]
    found: set[Path] = set()
    for pattern in roots:
        for top in ROOT.glob(pattern):
            found.update(p.parent for p in top.rglob("test_*.py")
                         if "__pycache__" not in p.parts)
    return sorted(found)


FOLDERS = folders_of_tests()


def listed(readme: Path) -> list[str]:
    """The file names a README's index lines name, in order."""
    return [m.group(1) for line in readme.read_text(encoding="utf-8").splitlines()
            if (m := ENTRY.match(line))]


def test_the_walk_finds_every_tests_folder() -> None:
    names = {f.relative_to(ROOT).as_posix() for f in FOLDERS}
    assert {"core/tests", "core/tests/lifecycle", "conformance/tests", "demo/tests",
            "tests", "plugins/talos/tests", "plugins/redfish/tests"} <= names
    assert all(f.is_dir() for f in FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.relative_to(ROOT).as_posix()
                                                 for f in FOLDERS])
def test_the_folders_readme_indexes_every_test_file(folder: Path) -> None:
    readme = folder / "README.md"
    where = readme.relative_to(ROOT)
    assert readme.is_file(), f"{where} is missing: index this folder's test files there"
    names = listed(readme)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"{where} lists {', '.join(twice)} more than once"
    tests = sorted(p.name for p in folder.glob("test_*.py"))
    unlisted = [n for n in tests if n not in names]
    assert not unlisted, f"{where} does not list {', '.join(unlisted)}"
    gone = [n for n in names if not (folder / n).exists()]
    assert not gone, f"{where} lists {', '.join(gone)}, which {folder.name}/ does not have"


def test_a_line_is_read_as_an_entry_only_when_it_names_a_file(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# tests\n\nSee `test_a.py` below.\n\n- `test_a.py` — the a module\n"
                      "* `conftest.py` — fixtures\n  - `nested.py` not an entry\n",
                      encoding="utf-8")
    assert listed(readme) == ["test_a.py", "conftest.py"]
