"""The pdu channel type's config and target: loaded through the entry point, errors by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from powerplane import ConfigError, PowerHost, Verb, parse_config
from powerplane.testing import plugin_registry
from powerplane_pdu import PROFILES, OutletRef, detect, parse_target


def _deployment(channel: dict[str, Any], target: Any = None) -> dict[str, Any]:
    return {
        "channels": {"rack-a": {"type": "pdu", **channel}},
        "nodes": {"n1": {"channels": [
            {"channel": "rack-a", "target": target if target is not None else {"outlets": [3]}}
        ]}},
    }


@pytest.fixture
def community(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "community"
    path.write_text("private\n")
    return {"file": str(path)}


def test_the_pdu_type_is_registered_through_the_entry_point() -> None:
    registry = plugin_registry()
    assert registry.owners["pdu"] == "pdu"
    info = next(p for p in registry.plugins if p.name == "pdu")
    assert info.channel_types == ("pdu",)
    assert not [f for f in registry.failures if f.name == "pdu"]


def test_contract_example_parses(community: dict[str, str]) -> None:
    cfg = _deployment({"protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
                       "community": community}, {"outlets": [3, 4]})
    parsed = parse_config(cfg)
    target = parsed.nodes["n1"].channels[0].target
    assert target.outlets == (OutletRef("", 3), OutletRef("", 4))


@pytest.mark.parametrize(
    ("channel", "expected"),
    [
        ({"protocol": "snmp", "profile": "apc-rpdu", "community": "inline"},
         "needs 'host'|inline secret"),
        ({"protocol": "snmp", "profile": "apc-rpdu", "host": "h", "community": "public"},
         "inline secret values are not accepted"),
        ({"protocol": "snmp", "profile": "nope", "host": "h", "community": {"env": "HOME"}},
         "unknown profile 'nope'; expected auto or one of: apc-masterswitch"),
        ({"protocol": "snmp", "host": "h"}, "needs 'community'"),
        ({"protocol": "snmp", "host": "h", "version": 3}, "v3 needs 'user'"),
        ({"protocol": "snmp", "host": "h", "version": "3", "user": "u",
          "priv_protocol": "aes", "priv_key": {"env": "HOME"}},
         "privacy needs authentication"),
        ({"protocol": "redfish"}, "needs 'endpoint'"),
        ({"protocol": "modbus", "host": "h"}, "snmp"),
        ({"protocol": "snmp", "host": "h", "community": {"env": "HOME"},
          "on_when_already_on": "maybe"}, "refuse"),
    ],
)
def test_bad_channel_config_is_reported_under_its_path(
    channel: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        parse_config(_deployment(channel))
    assert "channels.rack-a" in str(info.value)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ([3, 4], "expected {outlets"),
        ({"outlets": []}, "non-empty list"),
        ({"outlets": [0]}, "not an outlet number"),
        ({"outlets": [-1]}, "start at 1"),
        ({"outlets": [True]}, "not an outlet number"),
        ({"outlets": [3, 3]}, "listed twice"),
        ({"sockets": [3]}, "unknown key"),
        ({"feeds": {"b": "3"}}, "feeds.b: expected a non-empty list"),
        ({}, "at least one outlet"),
    ],
)
def test_bad_target_is_reported_under_the_node(
    community: dict[str, str], target: Any, expected: str
) -> None:
    cfg = _deployment({"protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
                       "community": community}, target)
    with pytest.raises(ConfigError, match=expected) as info:
        parse_config(cfg)
    assert "nodes.n1.channels" in str(info.value)


def test_target_with_feeds_keeps_its_order() -> None:
    target = parse_target({"outlets": [3, "A1"], "feeds": {"b": [3]}})
    assert [r.label("rack") for r in target.outlets] == ["rack/3", "rack/A1", "rack.b/3"]
    assert target.by_feed() == {"": [3, "A1"], "b": [3]}


async def test_a_feed_the_channel_does_not_declare_withholds_every_verb(
    community: dict[str, str],
) -> None:
    cfg = _deployment({"protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
                       "community": community}, {"outlets": [1], "feeds": {"b": [1]}})
    async with PowerHost(parse_config(cfg)) as host:
        offer = host.offer_for("n1")[Verb.SHUTDOWN]
        assert not offer.offered
        assert "feed(s) b not declared under 'feeds'" in offer.reason


def test_ironic_vendor_families_have_a_profile_or_say_why_not() -> None:
    families = {
        "apc": "apc-rpdu", "aten": "aten", "cyberpower": "cyberpower", "eaton": "eaton-epdu",
        "baytech": "baytech-mrp27",
        "sentry3": "servertech-sentry3", "sentry4": "servertech-sentry4",
        "raritan": "raritan-pdu2", "geist": "vertiv-geist",
    }
    for profile in families.values():
        assert profile in PROFILES
        assert PROFILES[profile].source
    # no vendor MIB could be found for Teltronix: withdrawn with the reason, never guessed
    from powerplane_pdu.profiles import WITHDRAWN

    assert "teltronix" not in PROFILES and "teltronix" in WITHDRAWN


def test_detection_reads_apc_product_identifiers_not_mib_subtrees() -> None:
    # PowerNet-MIB: masterSwitch ::= { system 4 } = 1.3.6.1.4.1.318.1.3.4; V2 .2, MSP .4,
    # rPDU .5, rPDU2 .6, rPDUB .8. Real devices answer these, never the MIB subtrees.
    def one(oid: str) -> str:
        found = detect(oid)
        assert found is not None and not found.ambiguous, oid
        return found.candidates[0]

    assert one(".1.3.6.1.4.1.318.1.3.4.2") == "apc-masterswitch"
    assert one("1.3.6.1.4.1.318.1.3.4.4") == "apc-masterswitch-plus"
    assert one("1.3.6.1.4.1.318.1.3.4.5") == "apc-rpdu"
    assert one("1.3.6.1.4.1.318.1.3.4.6") == "apc-rpdu2"
    rpdub = detect("1.3.6.1.4.1.318.1.3.4.8")
    assert rpdub is not None and rpdub.ambiguous
    assert set(rpdub.candidates) == {"apc-rpdu2", "apc-rpdu", "apc-masterswitch"}
    vm = detect("1.3.6.1.4.1.318.1.3.4.3")
    assert vm is not None and vm.candidates == ()
    # the MIB subtree (what the profiles used to list) is no product identifier
    assert detect("1.3.6.1.4.1.318.1.1.12.3") is None
    assert detect("1.3.6.1.4.1.3181") is None


@pytest.mark.perf
def test_plugin_discovery_does_not_import_pysnmp_or_httpx() -> None:
    import subprocess
    import sys

    code = ("import sys, powerplane_pdu.plugin; "
            "print(sorted(m for m in ('pysnmp', 'httpx', 'powerplane_pdu.channel') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]", f"perf (plugin load): imported {out.stdout.strip()}"


def test_timeout_s_is_replaced_by_timeouts_and_says_so(community: dict[str, str]) -> None:
    cfg = _deployment({"protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
                       "community": community, "timeout_s": 1})
    with pytest.raises(ConfigError, match="'timeout_s' was replaced by 'timeouts") as info:
        parse_config(cfg)
    assert "channels.rack-a" in str(info.value)
    cfg = _deployment({"protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
                       "community": community, "timeouts": {"connect_s": 2, "read_s": 0.5},
                       "retries": 3})
    channel = parse_config(cfg).channels["rack-a"].config
    assert (channel.timeouts.connect_s, channel.timeouts.read_s) == (2, 0.5)
    assert channel.timeouts.total_s == 2.5 and channel.retries == 3


def test_the_channel_type_declares_its_address_timeouts_and_secrets(
    community: dict[str, str],
) -> None:
    from powerplane import Address, Timeouts
    from powerplane_pdu import PduChannelConfig
    from powerplane_pdu.plugin import PDU

    snmp = PduChannelConfig.model_validate({"protocol": "snmp", "host": "10.0.0.5",
                                            "port": 1161, "community": community})
    assert PDU.address_for(snmp) == Address("host", format="host", port_field="port",
                                            transport="udp")
    address = PDU.address_for(snmp)
    assert address is not None and address.read(snmp) == "10.0.0.5:1161"
    assert address.config_overrides("127.0.0.1", 9) == {"host": "127.0.0.1", "port": 9}
    redfish = PduChannelConfig.model_validate({"protocol": "redfish",
                                               "endpoint": "https://10.0.0.8"})
    assert PDU.address_for(redfish) == Address("endpoint")
    assert PDU.timeouts_field() == "timeouts"
    assert PDU.timeouts_of(snmp) == Timeouts(connect_s=1, read_s=1)
    assert "community" in PDU.secret_fields() and "feeds.*.priv_key" in PDU.secret_fields()


def test_the_snmp_timeout_is_read_s_per_attempt() -> None:
    import asyncio

    from powerplane.testing import SilentServer
    from powerplane_pdu import PduChannel, PduChannelConfig

    with SilentServer(kind="udp") as silent:
        cfg = PduChannelConfig.model_validate({
            "protocol": "snmp", "profile": "apc-rpdu", "host": "127.0.0.1",
            "port": silent.port, "community": {"env": "HOME"},
            "timeouts": {"connect_s": 30, "read_s": 0.2}, "retries": 1,
        })

        async def read() -> str:
            channel = PduChannel("rack", cfg)
            try:
                await channel.read_power_state(parse_target({"outlets": [1]}))
            except Exception as exc:
                return str(exc)
            finally:
                await channel.close()
            return ""

        text = asyncio.run(asyncio.wait_for(read(), timeout=20))
    assert "no SNMP response to get after 2 attempt(s) of 0.2 s" in text
