"""The demo walkthrough and the register_demo_peers hook (in process)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from powerplane import hookimpl
from powerplane.plugins import Registry
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig
from powerplane.testing import Peer, StartedPeer, plugin_registry
from powerplane_demo import Demo, UnknownPeer, install_hint

MARKUP_DESCRIPTION = "an in-memory BMC at [bold]rack[/bold] [/x] for this test"
MARKUP_ERROR = "port [bold]8443[/bold] already in use [/x]"
BMC = "fake[bold]bmc[/x]"
"""A peer (and so channel) name that is markup: printed as written, never parsed."""


class PeerPlugin:
    """Registers one peer that starts, one that cannot, and one whose package is missing."""

    stopped: list[str] = []

    @hookimpl
    def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
        def start_ok(where: Path) -> StartedPeer:
            (where / "marker").write_text("started")
            return StartedPeer(
                config={"type": "simulated", "machines": {"a": "on", "b": "on"},
                        "transition_ms": 100},
                targets=["a", "b"],
                stop=lambda: PeerPlugin.stopped.append(BMC),
                description=MARKUP_DESCRIPTION,
            )

        def start_broken(where: Path) -> StartedPeer:
            raise OSError(MARKUP_ERROR)

        def start_needs_bcrypt(where: Path) -> StartedPeer:
            # what `import bcrypt` raises when bcrypt is not installed
            raise ModuleNotFoundError("No module named 'bcrypt'", name="bcrypt")

        register(Peer(BMC, "bmc", start_ok))
        register(Peer("flaky-pdu", "pdu", start_broken))
        register(Peer("needs-bcrypt", "cloud", start_needs_bcrypt))


def demo_registry() -> Registry:
    # only=["simulated"]: no real peer from installed plugins; the plugin's distribution is
    # a real installed one: its metadata names the extra (powerplane-redfish[test]) that
    # declares bcrypt
    return plugin_registry(only=["simulated"], add={"peer-test": PeerPlugin()},
                           distribution="powerplane-redfish")


def run_demo(tmp_path: Path, only: set[str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    demo = Demo(Console(file=out, width=100), only=only, workdir=tmp_path,
                registry=demo_registry())
    return demo.run(), out.getvalue()


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_peer_that_cannot_start_fails_the_demo_and_names_the_fix(tmp_path: Path) -> None:
    PeerPlugin.stopped = []
    code, out = run_demo(tmp_path)
    text = flat(out)
    assert code == 1, out
    assert f"started {BMC}" in text
    assert f"rf-node: shutdown recoverable: channel {BMC} can power on" in text
    assert f"{BMC}: pass" in text
    # untrusted text (a plugin's description, an exception) is printed as written
    assert MARKUP_DESCRIPTION in text
    assert f"not started flaky-pdu: could not start (OSError: {MARKUP_ERROR})" in text
    # the missing package and the command that installs it, brackets and quotes intact
    assert "not started needs-bcrypt: could not start (ModuleNotFoundError: No module " \
           "named 'bcrypt')" in text
    assert "missing: the Python package 'bcrypt' (declared by powerplane-redfish[test]) " \
           "cannot be imported" in text
    assert "install it with: pip install 'powerplane-redfish[test]'" in text
    assert "FAILED peers: starting real protocol peers on loopback" in text
    assert "not started: flaky-pdu, needs-bcrypt" in text
    assert "demo failed" in text and "demo passed" not in text
    # the rest of the walkthrough still ran on stand-ins, and reported truthfully
    assert "pdu: no peer started; core's simulated channel stands in" in text
    assert "rf-node: PowerOffConfirmed=True" in text
    assert "talos-attended: PowerOffConfirmed=Unknown" in text
    assert PeerPlugin.stopped == [BMC]  # stopped by its own handle


def test_only_limits_the_peers(tmp_path: Path) -> None:
    PeerPlugin.stopped = []
    code, out = run_demo(tmp_path, only={BMC})
    assert code == 0, out
    assert f"started {BMC}" in out
    assert "not started" not in out and "could not start" not in out
    assert "demo passed" in out
    assert PeerPlugin.stopped == [BMC]


@pytest.mark.parametrize("only", [{"nothing-matches"}, {BMC, "nope"}, set()])
def test_an_unknown_only_name_is_bad_input_and_starts_nothing(
    tmp_path: Path, only: set[str]
) -> None:
    PeerPlugin.stopped = []
    out = io.StringIO()
    demo = Demo(Console(file=out, width=100), only=only, workdir=tmp_path / "w",
                registry=demo_registry())
    with pytest.raises(UnknownPeer) as err:
        demo.run()
    assert err.value.exit_code == 2
    assert f"the peers are: {BMC}, flaky-pdu, needs-bcrypt" in str(err.value)
    for name in only - {BMC}:
        assert repr(name) in str(err.value)
    assert out.getvalue() == ""
    assert not (tmp_path / "w").exists()
    assert PeerPlugin.stopped == []


def test_install_hint_from_a_missing_module() -> None:
    exc = ModuleNotFoundError("No module named 'sushy_tools'", name="sushy_tools.emulator")
    hint = install_hint(RuntimeError("wrapped"), "powerplane-redfish")
    assert hint is None  # nothing is missing: every declared requirement is installed
    try:
        raise RuntimeError("the emulator could not start") from exc
    except RuntimeError as wrapped:
        hint = install_hint(wrapped, "powerplane-redfish")
    assert hint == ("the Python package 'sushy-tools' (declared by powerplane-redfish[test]) "
                    "cannot be imported", "pip install 'powerplane-redfish[test]'")
    # a module no requirement declares: named, with no invented install command
    odd = ModuleNotFoundError("No module named 'nowhere_pkg'", name="nowhere_pkg")
    assert install_hint(odd, "powerplane-redfish") == (
        "the Python module 'nowhere_pkg' cannot be imported (not a declared requirement "
        "of powerplane-redfish)", None)


def test_install_hint_names_a_missing_extra_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    import powerplane_demo.hints as demo_mod

    real = demo_mod._importable
    monkeypatch.setattr(demo_mod, "_importable", lambda name: name != "moto" and real(name))
    hint = install_hint(RuntimeError("moto's server did not start"), "powerplane-cloud")
    assert hint == ("moto (declared by powerplane-cloud[test])",
                    "pip install 'powerplane-cloud[test]'")


class InbandPlugin:
    """One in-band peer (it cannot power on, nor see off), with or without a power button.

    Its machines are simulated; its button is wired to the machines of the host's channel
    named after the peer (see ``wired``), as a real peer's button is to its mock.
    """

    pressed: list[str] = []
    button = True
    live: list[SimulatedChannel] = []

    @hookimpl
    def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
        def press(target: object) -> None:
            InbandPlugin.pressed.append(str(target))
            chan = next(c for c in reversed(InbandPlugin.live) if c.name == "inband-test")
            chan.set_state(str(target), "on")

        def start(where: Path) -> StartedPeer:
            machines = {f"i{n}": "on" for n in range(5)}
            return StartedPeer(
                config={"type": "simulated", "verbs": ["reboot", "shutdown"],
                        "readback": "on-only", "machines": machines},
                targets=list(machines),
                stop=lambda: None,
                description="an in-band stand-in of this test",
                power_on_by_hand=press if InbandPlugin.button else None,
            )

        register(Peer("inband-test", "inband", start))


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every simulated channel created is known to :class:`InbandPlugin`'s button."""
    InbandPlugin.live = []
    real = SimulatedChannel.__init__

    def init(self: SimulatedChannel, name: str, config: SimulatedConfig) -> None:
        real(self, name, config)
        InbandPlugin.live.append(self)

    monkeypatch.setattr(SimulatedChannel, "__init__", init)


def run_inband_demo(tmp_path: Path, button: bool) -> tuple[int, str]:
    InbandPlugin.pressed, InbandPlugin.button = [], button
    reg = demo_registry()
    reg.add_module("inband-test", InbandPlugin(), distribution="powerplane-talos")
    out = io.StringIO()
    demo = Demo(Console(file=out, width=100), only={"inband-test"}, workdir=tmp_path,
                registry=reg)
    return demo.run(), flat(out.getvalue())


def test_a_person_presses_the_peers_button_and_the_demo_says_what_the_host_reads(
    tmp_path: Path, wired: None
) -> None:
    code, text = run_inband_demo(tmp_path, button=True)
    assert code == 0, text
    # the button of the peer that plays the node's channel, for that node's machine
    # the demo presses i1 once; the conformance step (attended) presses its own two machines
    assert InbandPlugin.pressed[0] == "i1" and set(InbandPlugin.pressed[1:]) == {"i3", "i4"}
    # what the demo prints is the host's readback after the press
    assert "talos-attended: a person powered it on at the rack and confirmed it (the host " \
           "reads it on); return requested" in text
    assert "talos-attended: Complete" in text


def test_a_peer_without_a_button_fails_the_return_instead_of_claiming_a_press(
    tmp_path: Path,
) -> None:
    code, text = run_inband_demo(tmp_path, button=False)
    assert code == 1, text
    assert "peer 'inband-test' offers no power button to press by hand" in text
    assert "a person powered it on" not in text
    assert "FAILED maintenance: shutdown with PowerOffConfirmed, then return" in text


def test_a_stand_in_is_pressed_and_read_back_through_the_host(tmp_path: Path) -> None:
    code, text = run_demo(tmp_path, only={BMC})
    assert code == 0, text
    # the in-band stand-in (on-only readback) sees the machine on once it is pressed
    assert "talos-attended: a person powered it on at the rack and confirmed it (the host " \
           "reads it on); return requested" in flat(text)


class IpmiPlugin:
    """A peer named ``ipmi`` in the BMC role (simulated machines), beside another BMC peer."""

    stopped: list[str] = []

    @hookimpl
    def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
        def start(where: Path) -> StartedPeer:
            machines = {f"bmc{n}": "on" for n in range(2)}
            return StartedPeer(
                config={"type": "simulated", "machines": machines, "transition_ms": 100},
                targets=list(machines),
                stop=lambda: IpmiPlugin.stopped.append("ipmi"),
                description="an IPMI stand-in of this test",
            )

        register(Peer("ipmi", "bmc", start))


def run_ipmi_demo(tmp_path: Path, only: set[str] | None) -> tuple[int, str]:
    PeerPlugin.stopped, IpmiPlugin.stopped = [], []
    reg = demo_registry()
    reg.add_module("ipmi-test", IpmiPlugin(), distribution="powerplane-ipmi")
    out = io.StringIO()
    demo = Demo(Console(file=out, width=100), only=only, workdir=tmp_path, registry=reg)
    return demo.run(), flat(out.getvalue())


def test_the_ipmi_peer_fills_its_own_slot_beside_the_bmc_peer_and_is_walked(
    tmp_path: Path,
) -> None:
    code, text = run_ipmi_demo(tmp_path, only={BMC, "ipmi"})
    assert code == 0, text
    # both BMC peers start: the IPMI one is not skipped as "the bmc role is already played"
    assert f"started {BMC}" in text and "started ipmi" in text
    assert "already played" not in text
    assert "ipmi: no peer started" not in text
    # offers, reboot through the lifecycle and the readback, shutdown observed, return
    assert "│ ipmi-node │ plant-a │ ipmi (graceful) │ ipmi (graceful) │ ipmi (graceful) │ " \
           "withheld │" in text
    assert "ipmi-node: shutdown recoverable: channel ipmi can power on" in text
    assert "pods queue-1; power reboot via ipmi" in text
    assert "ipmi-node: after the reboot the host reads it on (via ipmi" in text
    assert "ipmi-node: PowerOffConfirmed=True (observed off)" in text
    assert "ipmi-node: return requested (power-on through the host)" in text
    # after the reboot, and after the return
    assert text.count("ipmi-node: Complete (back in service)") == 2
    # rf-node stays on the other BMC peer
    assert f"rf-node: shutdown recoverable: channel {BMC} can power on" in text
    assert "ipmi: pass" in text and f"{BMC}: pass" in text
    assert "5 of 5 backend(s) conformant" in text
    assert IpmiPlugin.stopped == ["ipmi"] and PeerPlugin.stopped == [BMC]


def test_only_ipmi_puts_a_stand_in_in_the_bmc_slot(tmp_path: Path) -> None:
    code, text = run_ipmi_demo(tmp_path, only={"ipmi"})
    assert code == 0, text
    assert "started ipmi" in text and f"started {BMC}" not in text
    assert "bmc: no peer started; core's simulated channel stands in" in text
    assert "rf-node: shutdown recoverable: channel sim-bmc can power on" in text
    assert "ipmi-node: shutdown recoverable: channel ipmi can power on" in text
    assert "ipmi-node: PowerOffConfirmed=True" in text and "rf-node: PowerOffConfirmed=True" \
        in text
    assert IpmiPlugin.stopped == ["ipmi"] and PeerPlugin.stopped == []


def test_without_an_ipmi_peer_a_stand_in_plays_the_ipmi_node(tmp_path: Path) -> None:
    code, text = run_demo(tmp_path, only={BMC})
    assert code == 0, text
    assert "ipmi: no peer started; core's simulated channel stands in" in text
    assert "ipmi-node: shutdown recoverable: channel sim-ipmi can power on" in text
    assert "ipmi-node: after the reboot the host reads it on (via sim-ipmi" in text
    assert "ipmi-node: PowerOffConfirmed=True" in text
    assert "sim-ipmi: pass" in text
