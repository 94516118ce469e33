"""The same verbs against pyghmi's own BMC simulator: a second, independent implementation,
which refuses a role above the account's limit as a real BMC does."""

from __future__ import annotations

import time

import pytest
from ipmi_support import channel

from powerplane import AuthenticationFailed, PowerState, ProtocolError, Verb
from powerplane_ipmi.testing import PyghmiBmc


def settled(bmc: PyghmiBmc, key: str, want: object, timeout: float = 5.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and bmc.state()[key] != want:
        time.sleep(0.05)
    return bmc.state()[key]


def test_every_verb_against_pyghmi_simulator(pyghmi_bmc: PyghmiBmc) -> None:
    ch = channel(pyghmi_bmc)
    try:
        caps = ch.capabilities(pyghmi_bmc.address)
        assert caps.as_dict() == {"reboot": "hard", "shutdown": "graceful", "power-on": "hard"}
        assert "Set Session Privilege Level, no change" in caps.detail  # no Get Session Info
        assert "cipher suite 3" in caps.detail  # the only suite it offers
        ch.shutdown(pyghmi_bmc.address)
        assert settled(pyghmi_bmc, "power", "off") == "off"
        assert ch.read_power_state(pyghmi_bmc.address).state is PowerState.OFF
        ch.power_on(pyghmi_bmc.address)
        assert ch.read_power_state(pyghmi_bmc.address).state is PowerState.ON
        boots = pyghmi_bmc.state()["boots"]
        ch.reboot(pyghmi_bmc.address)
        assert pyghmi_bmc.state()["boots"] == boots + 1
    finally:
        ch.close()
    assert settled(pyghmi_bmc, "closed", 1) == 1
    assert pyghmi_bmc.state()["opened"] == 1


def test_user_account_asking_operator_is_refused_by_a_real_bmc_behaviour(
        pyghmi_bmc: PyghmiBmc) -> None:
    ch = channel(pyghmi_bmc, user="usr")
    with pytest.raises(AuthenticationFailed, match="refused the requested privilege"):
        ch.capabilities(pyghmi_bmc.address)
    ch.close()
    assert pyghmi_bmc.state()["opened"] == 0


def test_user_account_at_user_privilege_reads_and_advertises_nothing(
        pyghmi_bmc: PyghmiBmc) -> None:
    ch = channel(pyghmi_bmc, user="usr", privilege="user")
    try:
        caps = ch.capabilities(pyghmi_bmc.address)
        assert caps.verbs == {} and Verb.POWER_ON in caps.withheld
        assert ch.read_power_state(pyghmi_bmc.address).state is PowerState.ON
    finally:
        ch.close()


def test_a_bmc_offering_only_suites_without_authentication_is_refused(tmp_path: object) -> None:
    from pathlib import Path

    with PyghmiBmc(Path(str(tmp_path)) / "p", suites=[0, 1, 2]) as bmc:
        ch = channel(bmc)
        with pytest.raises(ProtocolError, match="offers cipher suites 0, 1, 2"):
            ch.capabilities(bmc.address)
        ch.close()
        assert bmc.state()["opened"] == 0
