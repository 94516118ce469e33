"""``--channel`` naming no channel under test is an option mistake: a usage error naming
the option (exit 2, "Usage"), not an invalid config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from conformance_targets import sim_target

from powerplane.cli import cli


def test_an_unknown_channel_is_a_usage_error_naming_the_option(
    write_target: Callable[[dict[str, Any]], Path],
) -> None:
    result = CliRunner().invoke(cli, ["conformance", "--target",
                                      str(write_target(sim_target())), "--channel", "nope"])
    text = result.output + result.stderr
    assert result.exit_code == 2, text
    assert "Usage:" in text and "'--channel'" in text
    assert "'nope' reaches none of the nodes under test" in text
    assert "invalid config" not in text and "Traceback" not in text
