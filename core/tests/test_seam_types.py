"""The seam a vendor codes against is typed and declared.

* ``mypy --strict`` over a vendor plugin catches a wrong return type at the seam (a plugin
  written into a temporary folder and type-checked), and passes a correct one;
* the optional parts of a channel are protocols, tested with ``isinstance`` by the host;
* ``ChannelType`` declares the address, the secret fields (by their ``SecretRef`` type)
  and the ``Timeouts`` a config embeds.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import powerplane
from powerplane import (
    Address,
    BatchInvoker,
    Channel,
    ChannelType,
    ConfigError,
    HasBootMarker,
    HasEndpoint,
    Identifies,
    PowerHost,
    SecretRef,
    Terminates,
    Timeouts,
    Verb,
    hookimpl,
    parse_config,
)
from powerplane.plugins import load_plugins
from powerplane.sim.channel import SimulatedChannel, SimulatedConfig

PLUGIN_HEAD = '''
"""A vendor plugin, type-checked by the test."""

from __future__ import annotations

from pydantic import BaseModel

from powerplane import Acceptance, CapabilitySet, Channel, ChannelType, Reading, Source, Verb


class Cfg(BaseModel):
    endpoint: str = "https://bmc"


def parse_target(raw: object) -> str:
    return str(raw)
'''

GOOD = PLUGIN_HEAD + '''

class Good:
    def __init__(self, name: str, config: Cfg) -> None:
        self.name = name

    async def capabilities(self, target: str) -> CapabilitySet:
        return CapabilitySet.of([Verb.REBOOT], source=Source.DECLARED)

    async def reboot(self, target: str) -> Acceptance:
        return Acceptance()

    def shutdown(self, target: str) -> None:
        return None

    async def power_on(self, target: str) -> Acceptance | None:
        return None

    def read_power_state(self, target: str) -> Reading:
        return Reading.on()

    async def close(self) -> None:
        return None


def make(name: str, config: Cfg) -> Good:
    return Good(name, config)


def check(config: Cfg) -> Channel[str]:
    return Good("check", config)  # names the member that conflicts, if one does


TYPE = ChannelType(name="good", config=Cfg, factory=make, target=parse_target,
                   description="typed", gated_sends=False)
'''

WRONG_READ = GOOD.replace(
    "    def read_power_state(self, target: str) -> Reading:\n        return Reading.on()",
    '    def read_power_state(self, target: str) -> str:\n        return "on"',
).replace('name="good"', 'name="wrong"')

WRONG_TARGET = GOOD.replace(
    "def parse_target(raw: object) -> str:\n    return str(raw)",
    "def parse_target(raw: object) -> int:\n    return 1",
)


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One ``mypy --strict`` run over three vendor plugins; each module's error lines."""
    root = tmp_path_factory.mktemp("vendor")
    for name, text in (("good_plugin", GOOD), ("wrong_read", WRONG_READ),
                       ("wrong_target", WRONG_TARGET)):
        (root / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    (root / "mypy.ini").write_text("[mypy]\nstrict = True\nplugins = pydantic.mypy\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(root / "mypy.ini"),
         "--cache-dir", str(root / ".mypy_cache"), "--no-error-summary",
         "--show-error-codes", "good_plugin.py", "wrong_read.py", "wrong_target.py"],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )
    out: dict[str, str] = {"good_plugin": "", "wrong_read": "", "wrong_target": "",
                           "stderr": proc.stderr}
    for line in proc.stdout.splitlines():
        module = line.partition(".py:")[0]
        if module in out:
            out[module] += line + "\n"
    return out


def test_mypy_strict_passes_a_correct_vendor_plugin(mypy_run: dict[str, str]) -> None:
    assert "error" not in mypy_run["good_plugin"], mypy_run["good_plugin"] + mypy_run["stderr"]


def test_mypy_strict_catches_a_wrong_return_type_at_the_seam(mypy_run: dict[str, str]) -> None:
    errors = mypy_run["wrong_read"]
    assert 'Argument "factory" to "ChannelType" has incompatible type' in errors, errors
    assert 'expected "Callable[[str, Cfg], Channel[str]]"' in errors, errors
    # where the channel is returned as a Channel, mypy names the member and both types
    assert 'Incompatible return value type (got "Good", expected "Channel[str]")' in errors
    assert "read_power_state" in errors and "-> str" in errors, errors


def test_mypy_strict_catches_a_target_parser_the_channel_cannot_take(
    mypy_run: dict[str, str],
) -> None:
    errors = mypy_run["wrong_target"]
    assert "error" in errors and "ChannelType" in errors, errors


# -- optional parts are protocols --------------------------------------------------------------
def test_in_tree_channels_are_what_their_optional_parts_say() -> None:
    from powerplane_cloud.ec2 import EC2Channel
    from powerplane_cloud.openstack import OpenStackChannel
    from powerplane_pdu.channel import PduChannel
    from powerplane_redfish.channel import RedfishChannel
    from powerplane_talos.channel import TalosChannel

    parts = (Terminates, BatchInvoker, HasEndpoint, Identifies, HasBootMarker)
    want: dict[type, set[Any]] = {
        SimulatedChannel: {Terminates, HasEndpoint, HasBootMarker},
        RedfishChannel: {HasEndpoint, Identifies, HasBootMarker},
        TalosChannel: {HasEndpoint, HasBootMarker},
        PduChannel: {BatchInvoker, HasEndpoint},
        EC2Channel: {Terminates, BatchInvoker, HasEndpoint, HasBootMarker},
        OpenStackChannel: {Terminates, HasEndpoint, HasBootMarker},
    }
    for cls, has in want.items():
        assert issubclass(cls, Channel), cls
        assert {p for p in parts if issubclass(cls, p)} == has, cls


class BatchChannel(SimulatedChannel):
    batches: list[list[str]] = []

    async def invoke_batch(self, verb: Verb, targets: list[str]) -> list[Any]:
        BatchChannel.batches.append(list(targets))
        return [await self.reboot(t) for t in targets]


class NoBatchChannel(BatchChannel):
    """A subclass that switches its parent's batching off."""

    invoke_batch = None  # type: ignore[assignment]


@pytest.mark.parametrize(("cls", "batched"), [(BatchChannel, True), (NoBatchChannel, False)])
async def test_the_host_batches_only_a_batch_invoker(cls: type, batched: bool) -> None:
    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType("batchy", SimulatedConfig, cls))

    reg = load_plugins()
    reg.add_module("batch-seam-test", Plugin())
    cfg = {"channels": {"s": {"type": "batchy", "machines": {"m0": "on", "m1": "on"}}},
           "nodes": {f"n{i}": {"channels": [{"channel": "s", "target": f"m{i}"}]}
                     for i in range(2)}}
    BatchChannel.batches = []
    async with PowerHost(parse_config(cfg, registry=reg)) as host:
        results = await host.invoke_many(list(host.nodes), Verb.REBOOT, reason="x")
    assert [type(r).__name__ for r in results.values()] == ["InvokeResult", "InvokeResult"]
    assert BatchChannel.batches == ([["m0", "m1"]] if batched else [])


# -- declarations ------------------------------------------------------------------------------
def test_secret_fields_are_found_by_their_type() -> None:
    from powerplane_cloud.plugin import EC2, OPENSTACK
    from powerplane_pdu.plugin import PDU
    from powerplane_redfish.plugin import REDFISH
    from powerplane_talos.plugin import TALOS

    assert REDFISH.secret_fields() == ("password",)
    assert TALOS.secret_fields() == ("ca", "crt", "key")
    assert EC2.secret_fields() == ("access_key_id", "secret_access_key", "session_token")
    assert OPENSTACK.secret_fields() == ("auth.password", "auth.secret")
    assert PDU.secret_fields() == (
        "auth_key", "community", "feeds.*.auth_key", "feeds.*.community", "feeds.*.password",
        "feeds.*.priv_key", "password", "priv_key")


def test_secret_fields_through_aliases_lists_and_optional_models() -> None:
    from pydantic import Field

    class Inner(BaseModel):
        token: SecretRef

    class Cfg(BaseModel):
        plain: str = ""
        aliased: SecretRef | None = Field(None, alias="apiKey")
        many: list[Inner] = []
        maybe: Inner | None = None

    assert powerplane.config.secret_fields(Cfg) == ("apiKey", "many.*.token", "maybe.token")


class TimedConfig(BaseModel):
    endpoint: str
    timeouts: Timeouts = Timeouts(connect_s=2, read_s=10)


def _timed_type() -> ChannelType[TimedConfig, Any]:
    return ChannelType(name="timed", config=TimedConfig, factory=SimulatedChannel,
                       address=Address("endpoint"))


def test_timeouts_are_validated_finite_and_positive() -> None:
    assert Timeouts().connect_s > 0 and Timeouts().read_s > 0
    assert Timeouts(connect_s=1, read_s=2).total_s == 3
    for bad in (0, -1, math.nan, math.inf, 86_401):
        with pytest.raises(ValidationError):
            Timeouts(connect_s=bad)
        with pytest.raises(ValidationError):
            Timeouts(read_s=bad)
    with pytest.raises(ValidationError):
        Timeouts.model_validate({"connect_s": 1, "write_s": 1})  # unknown key


def test_a_bad_embedded_timeout_is_a_config_error_with_its_path() -> None:
    ctype = _timed_type()

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ctype)

    reg = load_plugins()
    reg.add_module("timed-test", Plugin())
    cfg = {"channels": {"t": {"type": "timed", "endpoint": "https://x",
                              "timeouts": {"connect_s": ".nan", "read_s": 0}}}}
    with pytest.raises(ConfigError) as info:
        parse_config(cfg, registry=reg)
    paths = sorted(p.path for p in info.value.problems)
    assert paths == ["channels.t.timeouts.connect_s", "channels.t.timeouts.read_s"]
    good = parse_config({"channels": {"t": {"type": "timed", "endpoint": "https://x"}}},
                        registry=reg)
    config = good.channels["t"].config
    assert isinstance(config, TimedConfig)
    assert ctype.timeouts_field() == "timeouts"
    assert ctype.timeouts_of(config) == Timeouts(connect_s=2, read_s=10)


def test_address_in_the_config() -> None:
    url = Address("endpoint")
    assert url.config_overrides("127.0.0.1", 8443) == {"endpoint": "https://127.0.0.1:8443"}
    assert Address("endpoint_url", scheme="http").render("::1", 80) == "http://[::1]:80"
    split = Address("host", format="host", port_field="port")
    assert split.config_overrides("127.0.0.1", 1161) == {"host": "127.0.0.1", "port": 1161}
    assert split.read({"host": "pdu-a", "port": 161}) == "pdu-a:161"
    assert Address("endpoint", format="host:port").config_overrides("h", 1) == {"endpoint": "h:1"}
    assert _timed_type().address_for(TimedConfig(endpoint="https://bmc")) == url
    assert url.read(TimedConfig(endpoint="https://bmc")) == "https://bmc"
    with pytest.raises(ValueError, match="config_overrides"):
        url.retarget("x", "h", 1)


def test_address_in_the_target() -> None:
    whole = Address(None, source="target", format="host:port")
    assert whole.retarget("10.0.0.5:623", "127.0.0.1", 6230) == "127.0.0.1:6230"
    assert whole.read(None, "10.0.0.5:623") == "10.0.0.5:623"
    keyed = Address("bmc", source="target", format="host", port_field="port")
    assert keyed.retarget({"bmc": "10.0.0.5", "slot": 2}, "127.0.0.1", 6230) == {
        "bmc": "127.0.0.1", "port": 6230, "slot": 2}
    with pytest.raises(ValueError, match="retarget"):
        whole.config_overrides("h", 1)


def test_an_address_depending_on_the_config() -> None:
    class Cfg(BaseModel):
        protocol: str = "snmp"

    def where(config: Cfg) -> Address:
        if config.protocol == "snmp":
            return Address("host", format="host", port_field="port")
        return Address("endpoint")

    ctype = ChannelType(name="dual", config=Cfg, factory=SimulatedChannel, address=where)
    assert ctype.address_for(Cfg()) == Address("host", format="host", port_field="port")
    assert ctype.address_for(Cfg(protocol="redfish")) == Address("endpoint")


@pytest.mark.parametrize("kwargs", [
    {"field": None},
    {"field": "host", "format": "url", "port_field": "port"},
    {"field": "x", "source": "elsewhere"},
    {"field": "x", "format": "ip"},
])
def test_a_malformed_address_is_refused_when_declared(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Address(**kwargs)


def test_the_vendor_names_are_public() -> None:
    import powerplane.channel as channel

    for name in ("Address", "BatchDiscovery", "BatchInvoker", "Channel", "ChannelType",
                 "HasBootMarker", "HasEndpoint", "Identifies", "Outcome", "Terminates",
                 "Timeouts"):
        assert name in powerplane.__all__
    assert powerplane.__all__ == sorted(powerplane.__all__)
    assert powerplane.BatchDiscovery is channel.BatchDiscovery


def test_the_channel_docstring_lists_every_optional_part() -> None:
    import powerplane.channel as channel

    for part in ("Terminates", "BatchInvoker", "HasEndpoint", "Identifies", "HasBootMarker"):
        assert f":class:`{part}`" in (channel.__doc__ or ""), part


def test_mypy_is_importable_here() -> None:
    """The type-check tests run mypy in this interpreter (a dev dependency)."""
    assert Path(sys.executable).exists()
    import mypy  # noqa: F401
