"""Every config problem in one run: cross-references are checked in the same pass.

A node's reference to a channel the file does not have (``nodes.n2.channels[0].channel:
'nosuch'``) is reported with the node's other problems, even when the node has others
(it was found only once they were fixed), and in file order, so a file with more problems
than are listed shows it beside the node it belongs to (it came last, after the cap).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from powerplane._yaml import MAX_PROBLEMS
from powerplane.config import load_config
from powerplane.errors import ConfigError

TWELVE = """\
channels:
  lab: {type: simulated, machines: {m1: 'on'}, latency_ms: -1}
  bmc: {type: simulated, verbs: [reboot, dance]}
  pdu: {typo: simulated}
nodes:
  n1:
    site: [a]
    classification: disposable
    channels: [{channel: lab, target: m1}]
  n2:
    labels: {rack: [1]}
    colour: blue
    channels:
      - {channel: nosuch, target: m1}
      - {channel: lab, target: m1}
      - {channel: lab, target: m1}
  n3:
    channels: [{channel: labb, target: m1}]
recovery: {attendedRack: false, site: {}}
limits: {total: 0}
"""


def test_twelve_problems_with_an_unknown_channel_on_a_bad_node_in_one_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text(TWELVE)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    found = {(p.path, p.line) for p in info.value.problems}
    expected = {
        ("recovery.site", 19),
        ("limits.total", 20),
        ("nodes.n1.site", 7),
        ("nodes.n1.classification", 8),
        ("nodes.n2.labels.rack", 11),
        ("nodes.n2.colour", 12),
        ("nodes.n2.channels[0].channel", 14),  # on a node with other problems
        ("nodes.n2.channels[2].channel", 16),  # listed twice, on that node too
        ("nodes.n3.channels[0].channel", 18),
        ("channels.lab.latency_ms", 2),
        ("channels.bmc.verbs", 3),
        ("channels.pdu.type", 4),
    }
    assert found == expected, found ^ expected
    messages = {p.path: p.message for p in info.value.problems}
    assert messages["nodes.n2.channels[0].channel"].startswith("unknown channel 'nosuch'")
    assert messages["nodes.n3.channels[0].channel"].endswith("did you mean 'lab'?")
    assert messages["nodes.n2.channels[2].channel"] == (
        "channel 'lab' is listed twice for this node")


def test_an_unknown_channel_is_listed_beside_its_node_past_the_cap(tmp_path: Path) -> None:
    rows = ["channels:", "  lab: {type: simulated, machines: {m1: 'on'}}", "nodes:",
            "  n0: {channels: [{channel: nosuch, target: m1}]}"]
    rows += [f"  n{i}: {{site: [x], channels: [{{channel: lab, target: m1}}]}}"
             for i in range(1, MAX_PROBLEMS + 20)]
    path = tmp_path / "powerplane.yaml"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    problems = info.value.problems
    assert len(problems) == MAX_PROBLEMS + 1  # the cap, and the count of the rest
    assert problems[0].path == "nodes.n0.channels[0].channel"
    assert problems[0].line == 4
    assert problems[-1].message.endswith("more problem(s) not shown; fix these first")


def test_a_node_written_as_anything_but_a_mapping_names_no_reference(tmp_path: Path) -> None:
    path = tmp_path / "powerplane.yaml"
    path.write_text("nodes:\n  n1: [a]\n  n2: {channels: 5}\n  n3: {channels: [7, {x: 1}]}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert [p.path for p in info.value.problems] == [
        "nodes.n1", "nodes.n2.channels", "nodes.n3.channels[0]",
        "nodes.n3.channels[1].channel", "nodes.n3.channels[1].x"]
