"""Every command and every option ``--help`` shows has help text.

The walk is of the real click tree, with the commands other distributions add through the
``powerplane.cli`` entry points (conformance, new-plugin, demo, operator and theirs): each
command has a one-line summary, each option a help string, and the top-level ``powerplane
--help`` lists every command with its summary (an extension's is its own command's short
help, never only the distribution it comes from).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import click
from click.testing import CliRunner

from powerplane.cli import BUILTIN, cli


def commands() -> Iterator[tuple[str, click.Command, click.Context]]:
    def walk(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command,
                                                                       click.Context]]:
        yield ctx.command_path, cmd, ctx
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, f"command {name!r} does not load"
                yield from walk(sub, click.Context(sub, info_name=name, parent=ctx))

    yield from walk(cli, click.Context(cli, info_name="powerplane"))


def listed(help_text: str) -> dict[str, str]:
    """The Commands section of a help page: command name -> its summary (wrapped lines
    joined)."""
    rows: dict[str, str] = {}
    section = help_text.split("\nCommands:\n", 1)[1]
    name = ""
    for line in section.splitlines():
        m = re.match(r"  (\S+)(?:\s{2,}(.*))?$", line)
        if m:
            name = m.group(1)
            rows[name] = (m.group(2) or "").strip()
        elif line.startswith("    ") and name:
            rows[name] = f"{rows[name]} {line.strip()}".strip()
    return rows


def test_the_walk_sees_every_distribution_s_commands() -> None:
    seen = {path for path, _, _ in commands()}
    assert {"powerplane conformance", "powerplane new-plugin", "powerplane demo",
            "powerplane operator", "powerplane operator run", "powerplane operator manifests",
            "powerplane maintenance resolve"} <= seen


def test_every_command_has_a_summary_and_every_option_a_help_text() -> None:
    missing: list[str] = []
    for path, cmd, ctx in commands():
        if not cmd.get_short_help_str(limit=300).strip():
            missing.append(f"{path}: no summary")
        for param in cmd.get_params(ctx):
            shown = isinstance(param, click.Option) and not param.hidden
            if shown and not (getattr(param, "help", None) or "").strip():
                missing.append(f"{path}: option {'/'.join(param.opts)} has no help")
    assert not missing, "\n".join(missing)


def test_every_help_page_shows_text_beside_every_option() -> None:
    runner = CliRunner()
    bare: list[str] = []
    for path, _, _ in commands():
        argv = [*path.split()[1:], "--help"]
        res = runner.invoke(cli, argv, terminal_width=100)
        assert res.exit_code == 0, (argv, res.output)
        options = res.output.split("\nOptions:\n", 1)[1].split("\nCommands:\n", 1)[0]
        entries = re.split(r"\n(?=  -)", options.rstrip("\n"))
        for entry in entries:
            # "  --opt TYPE   help text" (a long option's text may start on the next line)
            head, _, rest = entry.partition("\n")
            text = [*re.split(r"\s{2,}", head.strip(), maxsplit=1)[1:], rest.strip()]
            # click's own "[default: 2]", "[required]" are not help text
            if not re.sub(r"\[[^\]]*\]", "", "".join(text)).strip():
                bare.append(f"{path}: {head.strip()}")
    assert not bare, "options shown without help:\n" + "\n".join(bare)


def test_the_top_level_help_lists_every_command_with_its_summary() -> None:
    res = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    rows = listed(res.output)
    ctx = click.Context(cli, info_name="powerplane")
    assert set(rows) == set(cli.list_commands(ctx))
    for name, summary in rows.items():
        assert summary, f"{name}: no summary in powerplane --help"
        assert not summary.startswith("(from "), f"{name}: {summary!r}"
        if name in BUILTIN:
            assert summary == BUILTIN[name][2]
        else:  # another distribution's command: its own short help
            cmd = cli.get_command(ctx, name)
            assert cmd is not None
            assert summary == cmd.get_short_help_str(limit=300), name


def test_an_extension_without_help_says_where_it_comes_from() -> None:
    from powerplane.cli import _summary

    # what _summary reads of an entry point: the value it names and its distribution
    ext: Any = SimpleNamespace(name="bare", value="vendor_tool.cli:bare", dist="vendor-tool")
    assert _summary(click.Command("bare"), ext) == "(from vendor-tool; no help text)"
    assert _summary(None, ext) == (
        "(from vendor-tool: vendor_tool.cli:bare is not a click command)")
    assert _summary(click.Command("x", help="Do x. Then more."), ext) == "Do x."


def test_the_process_help_shows_the_summaries() -> None:
    code = ("from powerplane.cli import main\n"
            "try:\n  main(['--help'])\nexcept SystemExit: pass\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert "(from " not in out, out
    assert "Run the conformance suite" in out and "walk through the whole" in out
    assert "operator on the cluster API" in out
