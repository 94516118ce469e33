"""What README.md states about the repository and the CLI is what exists.

- its CLI table names every command there is (with the commands other distributions add
  through the ``powerplane.cli`` entry points) and every subcommand of a group, and no
  command that does not exist;
- its layout names every workspace member's directory and every tracked top-level
  directory;
- the demo's duration is one figure, the same in README.md and demo/README.md.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click

from powerplane.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def cli_table() -> dict[str, str]:
    """First cell of each row of the CLI table (its command words) -> the row."""
    rows: dict[str, str] = {}
    for line in section(README.read_text(encoding="utf-8"), "The CLI").splitlines():
        m = re.match(r"\|\s*`([a-z][\w-]*)([^`]*)`\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(1) + m.group(2)
    return rows


def test_the_cli_table_names_every_command_and_subcommand() -> None:
    ctx = click.Context(cli, info_name="powerplane")
    names = cli.list_commands(ctx)
    rows = cli_table()
    assert {"conformance", "demo", "operator", "maintenance"} <= set(names)
    assert sorted(rows) == sorted(names), "README's CLI table and the commands differ"
    missing = []
    for name in names:
        cmd = cli.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            listed = set(rows[name].split()[1].split("/"))
            subs = set(cmd.list_commands(click.Context(cmd, info_name=name, parent=ctx)))
            missing += [f"{name} {sub}" for sub in sorted(subs - listed)]
            missing += [f"{name} {sub}: listed, does not exist" for sub in sorted(listed - subs)]
    assert not missing, "README's CLI table: " + ", ".join(missing)


def layout() -> str:
    blocks: list[str] = re.findall(r"```\n(.*?)```", section(
        README.read_text(encoding="utf-8"), "Layout"), flags=re.DOTALL)
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_the_layout_names_every_member_and_top_level_directory() -> None:
    block = layout()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    members: list[Path] = []
    for pattern in pyproject["tool"]["powerplane"]["workspace"]["members"]:
        members += [p for p in sorted(ROOT.glob(pattern)) if (p / "pyproject.toml").is_file()]
    assert {"core", "kubernetes", "ipmi", "demo"} <= {m.name for m in members}
    words = set(re.findall(r"[\w.-]+", block))
    missing = [str(m.relative_to(ROOT)) for m in members if m.name not in words]
    tops = [p.name for p in ROOT.iterdir()
            if p.is_dir() and not p.name.startswith(".") and any(p.rglob("*.*"))]
    missing += [f"{top}/" for top in sorted(tops) if f"{top}/" not in block]
    assert not missing, f"README's layout lacks: {missing}"


DURATION = re.compile(r"\bin (about [\w\s\u2013-]+?seconds|about a minute|under [\w ]+?minute)\b")


def test_the_demo_duration_is_one_figure() -> None:
    here = DURATION.findall(README.read_text(encoding="utf-8"))
    there = DURATION.findall((ROOT / "demo" / "README.md").read_text(encoding="utf-8"))
    assert len(here) == 1 and len(there) == 1, (here, there)
    assert here == there, f"README.md says {here[0]!r}, demo/README.md {there[0]!r}"
