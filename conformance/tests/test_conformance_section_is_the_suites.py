"""The ``conformance:`` section belongs to the suite: core's config does not know it.

The suite takes its section out of the target and hands the rest to core; problems of both
come in one run, each with its path and, from a file, its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conformance_targets import sim_target

from powerplane.config import Deployment, parse_config
from powerplane.errors import ConfigError
from powerplane_conformance.settings import load_target, split_target


def test_core_refuses_the_section_as_an_unknown_key() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(sim_target())
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("conformance", "unknown key; accepted keys: audit, channels, lifecycle, limits, "
                        "nodes, policy, recovery")]
    assert "conformance" not in Deployment.__dataclass_fields__


def test_the_suite_takes_its_section_out_and_core_validates_the_rest() -> None:
    data = sim_target(conformance={"nodes": ["n-m1"]})
    rest, section = split_target(data)
    assert "conformance" not in rest and section["nodes"] == ["n-m1"]
    assert data["conformance"] is section  # the caller's document is left as it was
    target = load_target(data)
    assert target.nodes == ["n-m1"]
    assert "conformance" not in (target.deployment.raw or {})


def test_problems_of_the_deployment_and_the_section_come_together_with_lines(
    tmp_path: Path,
) -> None:
    data = sim_target(conformance={"repeat": 0})
    data["limits"] = {"totl": 3}
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_target(path)
    text = path.read_text().splitlines()
    got = {p.path: p.line for p in err.value.problems}
    assert set(got) == {"limits.totl", "conformance.repeat"}
    assert got["conformance.repeat"] is not None
    assert text[got["conformance.repeat"] - 1].strip().startswith("repeat:")
    assert err.value.source == str(path)


@pytest.mark.parametrize("section", [None, ["n-m1"], "all"])
def test_a_missing_or_malformed_section_is_one_problem(section: object) -> None:
    data = sim_target()
    data["conformance"] = section
    with pytest.raises(ConfigError) as err:
        load_target(data)
    assert [p.path for p in err.value.problems] == ["conformance"]
    want = "required section is missing" if section is None else "expected a mapping"
    assert want in err.value.problems[0].message
