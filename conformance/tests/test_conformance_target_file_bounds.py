"""The pytest plugin reads the target file (to parametrize checks by subject) through
core's reader: size-limited, UTF-8 only, hostile YAML refused; never a bare yaml.load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from powerplane._yaml import MAX_BYTES  # the bound of every config file core reads
from powerplane_conformance import plugin


class _Config:
    def __init__(self, path: Path) -> None:
        self.path = path

    def getoption(self, name: str, default: Any = None) -> Any:
        return str(self.path) if name == "powerplane_target" else default


GOOD = """\
channels: {lab: {type: simulated, machines: {m1: "on"}}}
nodes: {n1: {channels: [{channel: lab, target: m1}]}}
conformance: {nodes: [n1]}
"""
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + GOOD


@pytest.mark.parametrize("text, subjects", [
    (GOOD, ["n1@lab"]),
    (BOMB, None),  # an alias bomb: refused, not expanded
    (GOOD + "#" * (MAX_BYTES + 1), None),  # over the size limit: not read at all
    ("!!python/object/apply:os.system ['true']\n", None),  # no Python tags
])
def test_target_file_read_through_cores_bounded_reader(
    tmp_path: Path, text: str, subjects: list[str] | None
) -> None:
    path = tmp_path / "target.yaml"
    path.write_text(text, encoding="utf-8")
    assert plugin._subjects_from_file(_Config(path)) == subjects  # type: ignore[arg-type]


def test_the_reader_is_cores() -> None:
    import inspect

    source = inspect.getsource(plugin._subjects_from_file)
    assert "read_config" in source and "yaml." not in source
