"""The demo walkthrough and the register_demo_peers hook."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from powerplane import hookimpl
from powerplane.demo import Demo, DemoChannel, DemoPeer
from powerplane.plugins import load_plugins


class PeerPlugin:
    """Registers one peer that starts and one that cannot."""

    stopped: list[str] = []

    @hookimpl
    def register_demo_peers(self, register: Callable[[DemoPeer], None]) -> None:
        def start_ok(where: Path) -> DemoChannel:
            (where / "marker").write_text("started")
            return DemoChannel(
                config={"type": "simulated", "machines": {"a": "on", "b": "on"},
                        "transition_ms": 100},
                targets=["a", "b"],
                stop=lambda: PeerPlugin.stopped.append("fake-bmc"),
                description="an in-memory BMC for this test",
            )

        def start_broken(where: Path) -> DemoChannel:
            raise OSError("port already in use")

        register(DemoPeer("fake-bmc", "bmc", start_ok))
        register(DemoPeer("flaky-pdu", "pdu", start_broken))


def run_demo(tmp_path: Path, only: set[str] | None = None) -> tuple[int, str]:
    os.environ["POWERPLANE_LOAD_PLUGINS"] = "simulated"  # no real peer from installed plugins
    try:
        reg = load_plugins()
    finally:
        del os.environ["POWERPLANE_LOAD_PLUGINS"]
    reg.add_module("peer-test", PeerPlugin())
    out = io.StringIO()
    demo = Demo(Console(file=out, width=200), only=only, workdir=tmp_path, registry=reg)
    return demo.run(), out.getvalue()


def test_register_demo_peers_starts_peers_and_skips_the_broken_one(tmp_path: Path) -> None:
    PeerPlugin.stopped = []
    code, out = run_demo(tmp_path)
    assert code == 0, out
    assert "started fake-bmc" in out
    assert "skipped flaky-pdu: could not start (OSError: port already in use)" in out
    assert "pdu: no peer started; core's simulated channel stands in" in out
    assert "shutdown withheld: channel 'sim-inband' cannot power on" in out
    assert "rf-node: PowerOffConfirmed=True" in out
    assert "talos-attended: PowerOffConfirmed=Unknown" in out
    assert "demo passed" in out
    assert PeerPlugin.stopped == ["fake-bmc"]  # stopped by its own handle


def test_only_limits_the_peers(tmp_path: Path) -> None:
    PeerPlugin.stopped = []
    code, out = run_demo(tmp_path, only={"nothing-matches"})
    assert code == 0
    assert "started fake-bmc" not in out
    assert PeerPlugin.stopped == []
