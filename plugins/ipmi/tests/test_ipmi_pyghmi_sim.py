"""The same verbs against pyghmi's own BMC simulator: a second, independent implementation,
which refuses a role above the account's limit as a real BMC does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
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


def test_an_unknown_user_name_ends_within_the_channels_own_timeouts(
        pyghmi_bmc: PyghmiBmc) -> None:
    """pyghmi's simulator, like some BMCs, stays silent to a RAKP 1 naming an unknown user;
    pyghmi's own login then retries for ever. The call ends within connect_s + read_s."""
    import threading

    from powerplane import ChannelError, ChannelTimeout

    cfg = {"connect_s": 2, "read_s": 3}
    ch = channel(pyghmi_bmc, user="oper", timeouts=cfg)
    object.__setattr__(ch.config, "username", "nosuchuser")  # the oper password, wrong name
    got: list[BaseException] = []

    def call() -> None:
        try:
            ch.read_power_state(pyghmi_bmc.address)
        except ChannelError as exc:
            got.append(exc)

    for _ in range(2):  # and again: nothing of the first attempt is left to hang on
        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(timeout=cfg["connect_s"] + cfg["read_s"] + 2.0)
        assert not worker.is_alive(), "the call is still blocked in pyghmi"
    ch.close()
    assert len(got) == 2
    for err in got:
        assert type(err) is ChannelTimeout, err
        assert "RAKP 1" in str(err) and "user name" in str(err), err
        assert "nosuchuser" not in str(err) and pyghmi_bmc.users["oper"][0] not in str(err)


def test_the_cli_exits_after_a_wrong_user_name(pyghmi_bmc: PyghmiBmc, tmp_path: Path) -> None:
    doc = {"channels": {"bmc": {"type": "ipmi", "username": "nosuchuser",
                                "password": {"file": str(pyghmi_bmc.secret_file("oper"))},
                                "timeouts": {"connect_s": 2, "read_s": 3}}},
           "nodes": {"n1": {"channels": [{"channel": "bmc", "target": pyghmi_bmc.address}]}},
           "limits": {"timeout_s": 10}}
    f = tmp_path / "d.yaml"
    f.write_text(yaml.safe_dump(doc))
    for command in (["state", "n1"], ["offers", "n1"]):
        # the explicit bound is the subprocess timeout: a process that never exits fails here
        out = subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(f),
                              *command], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}, check=False)
        text = out.stdout + out.stderr
        assert "Traceback" not in text, text
        assert "RAKP 1" in text and "no answer within 10 s" not in text, text
        assert pyghmi_bmc.users["oper"][0] not in text
