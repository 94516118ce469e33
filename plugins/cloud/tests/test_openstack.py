"""The ``openstack`` channel against a respx Keystone v3 and Compute API."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
from cloud_peers import free_port

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ConfigError,
    NotOffered,
    PowerHost,
    PowerState,
    RefusedByDevice,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane_cloud.config import OpenStackConfig
from powerplane_cloud.openstack import OpenStackChannel, reading_for_server
from powerplane_cloud.testing.openstack import (
    APP_CRED_ID,
    APP_CRED_SECRET,
    COMPUTE,
    KEYSTONE,
    PASSWORD,
    FakeOpenStack,
    Server,
)

SID = "9168b536-cd40-4630-b43f-b259807c6e87"
SID2 = "5f1c8d6b-2b54-4a0e-9a63-07c6a5e1f3c2"
PASS_ENV = "PP_CLOUD_TEST_OS_PASSWORD"
APP_ENV = "PP_CLOUD_TEST_OS_APP_SECRET"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASS_ENV, PASSWORD)
    monkeypatch.setenv(APP_ENV, APP_CRED_SECRET)


@pytest.fixture
def cloud() -> Iterator[tuple[FakeOpenStack, dict[str, respx.Route]]]:
    fake = FakeOpenStack(servers={SID: Server(), SID2: Server()})
    with respx.mock(assert_all_called=False) as router:
        yield fake, fake.install(router)


def password_config(**extra: Any) -> dict[str, Any]:
    return {
        "type": "openstack",
        "auth_url": KEYSTONE,
        "auth": {"method": "password", "username": "admin", "password": {"env": PASS_ENV},
                 "project_name": "admin"},
        "region": "RegionOne",
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        **extra,
    }


def app_cred_config(**extra: Any) -> dict[str, Any]:
    return password_config(auth={"method": "application_credential", "id": APP_CRED_ID,
                                 "secret": {"env": APP_ENV}}, **extra)


def channel(config: dict[str, Any]) -> OpenStackChannel:
    body = {k: v for k, v in config.items() if k != "type"}
    return OpenStackChannel("os", OpenStackConfig.model_validate(body))


def deployment(config: dict[str, Any], nodes: dict[str, tuple[str, str]]) -> Any:
    return parse_config({
        "channels": {"os": config},
        "nodes": {n: {"classification": c, "channels": [{"channel": "os", "target": t}]}
                  for n, (t, c) in nodes.items()},
    })


async def test_every_verb_and_its_readback(cloud: Any) -> None:
    fake, routes = cloud
    async with PowerHost(deployment(password_config(), {"vm": (SID, "replaceable")})) as host:
        assert (await host.read_power_state("vm")).state is PowerState.ON

        await host.invoke("vm", Verb.SHUTDOWN, reason="test")
        assert (await host.read_power_state("vm")).state is PowerState.OFF

        await host.invoke("vm", Verb.POWER_ON, reason="test")
        assert (await host.read_power_state("vm")).state is PowerState.ON

        result = await host.invoke("vm", Verb.REBOOT, reason="test")
        assert result.detail == "reboot SOFT accepted (202)"

        result = await host.invoke("vm", Verb.TERMINATE, reason="replace")
        assert result.detail == "delete accepted (204)"
        reading = await host.read_power_state("vm")
        assert reading.state is PowerState.UNKNOWN
        assert f"server {SID} does not exist" in reading.detail
    assert [(a, b) for _, a, b in fake.actions] == [
        ("os-stop", None), ("os-start", None), ("reboot", {"type": "SOFT"}), ("delete", None),
    ]
    assert routes["auth"].call_count == 1  # one token, cached for every call


async def test_password_auth_sends_a_project_scoped_v3_body(cloud: Any) -> None:
    fake, _ = cloud
    await channel(password_config()).read_power_state(SID)
    assert fake.auth_bodies == [{"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": PASSWORD}}},
        "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
    }}]


async def test_application_credential_auth_sends_no_scope(cloud: Any) -> None:
    fake, _ = cloud
    ch = channel(app_cred_config())
    assert (await ch.read_power_state(SID)).state is PowerState.ON
    assert fake.auth_bodies == [{"auth": {"identity": {
        "methods": ["application_credential"],
        "application_credential": {"id": APP_CRED_ID, "secret": APP_CRED_SECRET},
    }}}]
    await ch.close()


async def test_an_expired_token_is_renewed_once_on_401(cloud: Any) -> None:
    fake, routes = cloud
    ch = channel(password_config())
    await ch.shutdown(SID)
    fake.tokens.clear()  # Keystone revoked it, or it expired early
    assert (await ch.power_on(SID)).detail == "os-start accepted (202)"
    assert routes["auth"].call_count == 2
    assert ch.requests["os-start"] == 2
    assert fake.servers[SID].status == "ACTIVE"


async def test_a_token_about_to_expire_is_renewed_before_use(cloud: Any) -> None:
    fake, routes = cloud
    fake.lifetime = dt.timedelta(seconds=30)  # inside the one-minute margin
    ch = channel(app_cred_config())
    await ch.read_power_state(SID)
    await ch.read_power_state(SID)
    assert routes["auth"].call_count == 2
    assert ch.requests["GET server"] == 2  # never sent with a token about to expire


async def test_a_401_after_renewal_is_authentication_failed_not_a_loop(cloud: Any) -> None:
    fake, routes = cloud
    ch = channel(password_config())
    fake.reject_all_tokens = True
    with pytest.raises(AuthenticationFailed, match="requires authentication"):
        await ch.shutdown(SID)
    assert routes["auth"].call_count == 2
    assert ch.requests["os-stop"] == 2
    assert fake.servers[SID].status == "ACTIVE"


async def test_a_409_conflict_is_refused_by_device_with_the_api_message(cloud: Any) -> None:
    fake, _ = cloud
    fake.servers[SID] = Server("SHUTOFF", 4, "stopped")
    ch = channel(password_config())
    with pytest.raises(RefusedByDevice) as err:
        await ch.shutdown(SID)
    said = f"Cannot 'stop' instance {SID} while it is in vm_state stopped"
    assert err.value.message == said
    assert str(err.value) == f"channel 'os', target {SID}: {said}"


async def test_a_404_names_the_server_id(cloud: Any) -> None:
    ghost = "0c5e2e5e-0000-4000-8000-000000000000"
    ch = channel(password_config())
    for call in (ch.shutdown, ch.power_on, ch.reboot, ch.terminate, ch.read_power_state):
        with pytest.raises(RefusedByDevice, match=f"server {ghost} does not exist"):
            await call(ghost)


async def test_power_on_of_a_deleted_server_is_a_clear_error(cloud: Any) -> None:
    ch = channel(password_config())
    await ch.terminate(SID)
    with pytest.raises(RefusedByDevice, match=f"server {SID} does not exist"):
        await ch.power_on(SID)


async def test_rejected_credentials_never_show_the_secret(
    cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASS_ENV, "wrong-" + PASSWORD)
    ch = channel(password_config())
    with pytest.raises(AuthenticationFailed, match="Keystone rejected the credentials") as err:
        await ch.read_power_state(SID)
    assert PASSWORD not in str(err.value)
    assert PASSWORD not in repr(err.value)
    async with PowerHost(deployment(password_config(), {"vm": (SID, "replaceable")})) as host:
        reason = host.offer_for("vm")[Verb.REBOOT].reason
        assert "Keystone rejected the credentials" in reason
        assert PASSWORD not in reason


async def test_terminate_offered_only_for_a_replaceable_node(cloud: Any) -> None:
    fake, _ = cloud
    nodes = {"pet": (SID, "repairable"), "cattle": (SID2, "replaceable")}
    async with PowerHost(deployment(password_config(), nodes)) as host:
        assert host.offer_for("cattle")[Verb.TERMINATE].offered
        assert not host.offer_for("pet")[Verb.TERMINATE].offered
        with pytest.raises(NotOffered):
            await host.invoke("pet", Verb.TERMINATE, reason="oops")
    assert SID in fake.servers


async def test_a_rate_limited_get_is_retried_and_an_action_is_not(cloud: Any) -> None:
    fake, routes = cloud
    ch = channel(password_config())
    limited = httpx.Response(429, headers={"Retry-After": "0"}, json={"overLimit": {
        "code": 429, "message": "This request was rate-limited."}})
    routes["get"].side_effect = [limited, limited, fake.get]
    assert (await ch.read_power_state(SID)).state is PowerState.ON
    assert ch.requests["GET server"] == 3
    routes["action"].side_effect = [limited, fake.action]
    with pytest.raises(RefusedByDevice, match="rate limited"):
        await ch.shutdown(SID)
    assert ch.requests["os-stop"] == 1
    assert fake.servers[SID].status == "ACTIVE"


async def test_hard_reboot_is_advertised_hard(cloud: Any) -> None:
    fake, _ = cloud
    ch = channel(password_config(reboot_type="HARD"))
    caps = await ch.capabilities(SID)
    assert caps.as_dict()["reboot"] == "hard"
    await ch.reboot(SID)
    assert fake.actions[-1] == (SID, "reboot", {"type": "HARD"})


async def test_the_compute_endpoint_comes_from_the_catalog(cloud: Any) -> None:
    _, routes = cloud
    ch = channel(password_config(region="RegionTwo"))
    with pytest.raises(ChannelError, match="no public compute endpoint in region RegionTwo"):
        await ch.read_power_state(SID)
    internal = channel(password_config(interface="internal"))
    assert (await internal.read_power_state(SID)).state is PowerState.ON
    assert routes["get-internal"].call_count == 1
    assert routes["get"].call_count == 0


async def test_an_unreachable_keystone_is_unreachable() -> None:
    ch = channel(password_config(auth_url=f"http://127.0.0.1:{free_port()}/v3",
                                 timeouts={"connect_s": 5, "read_s": 5}))
    with pytest.raises(Unreachable, match="Keystone authentication"):
        await ch.read_power_state(SID)
    await ch.close()


@pytest.mark.parametrize(
    ("server", "state", "detail"),
    [
        ({"status": "ACTIVE", "OS-EXT-STS:power_state": 1}, PowerState.ON, ""),
        ({"status": "SHUTOFF", "OS-EXT-STS:power_state": 4}, PowerState.OFF, ""),
        ({"status": "ACTIVE", "OS-EXT-STS:power_state": 1,
          "OS-EXT-STS:task_state": "powering-off"}, PowerState.UNKNOWN, "powering-off"),
        ({"status": "REBOOT", "OS-EXT-STS:power_state": 1,
          "OS-EXT-STS:task_state": "rebooting"}, PowerState.UNKNOWN, "rebooting"),
        ({"status": "PAUSED", "OS-EXT-STS:power_state": 3}, PowerState.UNKNOWN, "PAUSED"),
        ({"status": "ACTIVE"}, PowerState.ON, ""),
        ({"status": "SHUTOFF"}, PowerState.OFF, ""),
        ({"status": "ERROR"}, PowerState.UNKNOWN, "ERROR"),
        ({"status": "SOFT_DELETED", "OS-EXT-STS:power_state": 4}, PowerState.OFF,
         "soft_deleted"),
    ],
)
def test_compute_states_read_as_on_off_or_unknown(
    server: dict[str, Any], state: PowerState, detail: str
) -> None:
    reading = reading_for_server(server)
    assert reading.state is state
    assert detail in reading.detail


def test_compute_url_override_skips_the_catalog() -> None:
    cfg = OpenStackConfig.model_validate({k: v for k, v in password_config(
        compute_url=COMPUTE + "/", auth_url="http://keystone.test:5000").items() if k != "type"})
    assert cfg.identity_url == KEYSTONE


async def test_a_ca_bundle_path_is_loaded_and_a_bad_one_is_a_config_error(
    cloud: Any, tmp_path: Any
) -> None:
    import certifi

    ch = channel(password_config(verify=certifi.where()))
    assert (await ch.read_power_state(SID)).state is PowerState.ON
    await ch.close()
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("not a certificate", encoding="utf-8")
    ch = channel(password_config(verify=str(bad)))
    with pytest.raises(ConfigError, match=r"channels\.os\.verify"):
        await ch.read_power_state(SID)


# -- at most once across a timeout ------------------------------------------------------------
def test_the_openstack_type_declares_gated_sends_its_address_and_timeouts() -> None:
    from powerplane import Address, Timeouts
    from powerplane_cloud.plugin import OPENSTACK

    cfg = OpenStackConfig.model_validate({k: v for k, v in app_cred_config().items()
                                          if k != "type"})
    assert OPENSTACK.gated_sends is True
    assert OPENSTACK.address_for(cfg) == Address("auth_url", scheme="http")
    assert OPENSTACK.timeouts_of(cfg) == Timeouts(connect_s=30, read_s=30)
    assert set(OPENSTACK.secret_fields()) == {"auth.password", "auth.secret"}
    ch = channel(password_config(timeouts={"connect_s": 2, "read_s": 7}))
    timeout = ch._http().timeout
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (2, 7, 7, 7)


async def test_every_action_and_delete_passes_about_to_send_and_reads_do_not(
    cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powerplane_cloud.openstack as os_module

    fake, routes = cloud
    ch = channel(password_config())
    gates: list[tuple[int, int]] = []
    monkeypatch.setattr(os_module, "about_to_send", lambda: gates.append(
        (routes["action"].call_count, routes["delete"].call_count)))
    await ch.read_power_state(SID)
    assert gates == []
    await ch.shutdown(SID)
    fake.tokens.clear()  # the next action is rejected (401) and repeated with a new token
    await ch.power_on(SID)
    await ch.terminate(SID2)
    # one gate per request that left, each before it left
    assert gates == [(0, 0), (1, 0), (2, 0), (3, 0)]
    await ch.close()


async def test_a_closed_gate_sends_no_action(
    cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powerplane_cloud.openstack as os_module
    from powerplane import ChannelTimeout

    fake, routes = cloud
    ch = channel(password_config())

    def closed() -> None:
        raise ChannelTimeout("the host gave up on this call before the request left")

    monkeypatch.setattr(os_module, "about_to_send", closed)
    for verb in (ch.reboot, ch.shutdown, ch.power_on, ch.terminate):
        with pytest.raises(ChannelTimeout, match="before the request left"):
            await verb(SID)
    assert routes["action"].call_count == routes["delete"].call_count == 0
    assert fake.actions == []
    await ch.close()


@pytest.mark.parametrize("lost", [httpx.ReadTimeout("timed out"),
                                  httpx.RemoteProtocolError("Server disconnected"),
                                  httpx.ReadError("connection reset")])
async def test_an_action_whose_answer_is_lost_is_outcome_unknown_and_sent_once(
    cloud: Any, lost: httpx.HTTPError
) -> None:
    from powerplane import OutcomeUnknown

    fake, routes = cloud
    ch = channel(password_config())

    def applied_then_lost(request: httpx.Request, sid: str) -> httpx.Response:
        fake.action(request, sid)
        raise lost

    routes["action"].side_effect = applied_then_lost
    with pytest.raises(OutcomeUnknown, match="may have been applied"):
        await ch.shutdown(SID)
    assert routes["action"].call_count == 1
    assert fake.servers[SID].status == "SHUTOFF"

    def deleted_then_lost(request: httpx.Request, sid: str) -> httpx.Response:
        fake.delete(request, sid)
        raise lost

    routes["delete"].side_effect = deleted_then_lost
    with pytest.raises(OutcomeUnknown):
        await ch.terminate(SID2)
    assert routes["delete"].call_count == 1  # DELETE is retried on 429 only, never here
    # the same on a read is a plain failure: nothing was changed
    routes["get"].side_effect = lost
    with pytest.raises(ChannelError) as err:
        await ch.read_power_state(SID)
    assert not isinstance(err.value, OutcomeUnknown)
    await ch.close()


async def test_a_5xx_on_an_action_is_refused_with_novas_words(cloud: Any) -> None:
    _, routes = cloud
    ch = channel(password_config())
    routes["action"].side_effect = [httpx.Response(503, json={"computeFault": {
        "code": 503, "message": "The server is currently unavailable."}})]
    with pytest.raises(RefusedByDevice, match="currently unavailable") as err:
        await ch.shutdown(SID)
    assert "(503)" in str(err.value)
    await ch.close()
