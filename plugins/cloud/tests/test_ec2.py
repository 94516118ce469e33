"""The ``ec2`` channel against moto's server: verbs, readback, refusals, errors, batching."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest
from cloud_peers import (
    KEY_ENV,
    SECRET_ENV,
    SECRET_VALUE,
    Moto,
    ThrottlingProxy,
    ec2_channel_config,
    free_port,
)

from powerplane import (
    AuthenticationFailed,
    NotOffered,
    PowerHost,
    PowerState,
    RefusedByDevice,
    Unreachable,
    Verb,
    parse_config,
)
from powerplane_cloud.config import EC2Config
from powerplane_cloud.ec2 import EC2Channel, reading_for_state


def deployment(url: str, nodes: dict[str, tuple[str, str]], **channel: Any) -> Any:
    """A deployment with one ec2 channel ``aws``; nodes: name -> (instance, classification)."""
    return parse_config({
        "channels": {"aws": ec2_channel_config(url, **channel)},
        "nodes": {
            name: {"classification": cls, "channels": [{"channel": "aws", "target": iid}]}
            for name, (iid, cls) in nodes.items()
        },
        "limits": {"timeout_s": 60},
    })


def channel(url: str, **extra: Any) -> EC2Channel:
    cfg = {k: v for k, v in ec2_channel_config(url, **extra).items() if k != "type"}
    return EC2Channel("aws", EC2Config.model_validate(cfg))


async def test_every_verb_and_its_readback_through_moto(moto: Moto) -> None:
    (iid,) = moto.run()
    async with PowerHost(deployment(moto.url, {"w1": (iid, "replaceable")})) as host:
        assert (await host.read_power_state("w1")).state is PowerState.ON

        result = await host.invoke("w1", Verb.SHUTDOWN, reason="test")
        assert result.detail == "running -> stopping"
        assert (await host.read_power_state("w1")).state is PowerState.OFF
        assert moto.state(iid) == "stopped"

        result = await host.invoke("w1", Verb.POWER_ON, reason="test")
        assert result.detail == "stopped -> pending"
        assert (await host.read_power_state("w1")).state is PowerState.ON

        result = await host.invoke("w1", Verb.REBOOT, reason="test")
        assert result.accepted and result.detail == "reboot requested"
        assert (await host.read_power_state("w1")).state is PowerState.ON

        result = await host.invoke("w1", Verb.TERMINATE, reason="replace")
        assert result.detail == "running -> shutting-down"
        reading = await host.read_power_state("w1")
        assert (reading.state, reading.detail) == (PowerState.OFF, "terminated")
        assert moto.state(iid) == "terminated"


async def test_capabilities_are_the_api_verbs_graceful_where_the_os_is_asked(moto: Moto) -> None:
    (iid,) = moto.run()
    caps = channel(moto.url).capabilities(iid)
    assert caps.as_dict() == {
        "reboot": "graceful", "shutdown": "graceful", "power-on": "hard",
        "terminate": "graceful",
    }


async def test_terminate_offered_only_for_a_replaceable_node(moto: Moto) -> None:
    pet, cattle = moto.run(2)
    nodes = {"pet": (pet, "repairable"), "cattle": (cattle, "replaceable")}
    async with PowerHost(deployment(moto.url, nodes)) as host:
        assert host.offer_for("cattle")[Verb.TERMINATE].offered
        withheld = host.offer_for("pet")[Verb.TERMINATE]
        assert not withheld.offered
        assert "repairable" in withheld.reason
        with pytest.raises(NotOffered, match="repairable"):
            await host.invoke("pet", Verb.TERMINATE, reason="oops")
        assert host.offer_for("pet")[Verb.SHUTDOWN].offered
    assert moto.state(pet) == "running"


async def test_power_on_of_a_terminated_instance_is_refused_by_the_channel(moto: Moto) -> None:
    (iid,) = moto.run()
    async with PowerHost(deployment(moto.url, {"w1": (iid, "replaceable")})) as host:
        await host.invoke("w1", Verb.TERMINATE, reason="replace")
        ch = host.channel("aws")
        assert isinstance(ch, EC2Channel)
        with pytest.raises(RefusedByDevice, match="terminated instance cannot be started"):
            await host.invoke("w1", Verb.POWER_ON, reason="bring it back")
        assert ch.api_calls["start_instances"] == 0
    assert moto.state(iid) == "terminated"


async def test_a_terminated_instance_advertises_nothing(moto: Moto) -> None:
    (iid,) = moto.run()
    moto.client().terminate_instances(InstanceIds=[iid])
    async with PowerHost(deployment(moto.url, {"w1": (iid, "replaceable")})) as host:
        offer = host.offer_for("w1")
        assert offer.offered() == []
        assert f"instance {iid} is terminated" in offer[Verb.POWER_ON].reason


async def test_an_unknown_instance_id_is_a_clear_error_naming_it(moto: Moto) -> None:
    ghost = "i-0123456789abcdef0"
    ch = channel(moto.url)
    for call in (ch.shutdown, ch.power_on, ch.reboot, ch.terminate, ch.read_power_state):
        with pytest.raises(RefusedByDevice, match=f"instance {ghost} does not exist"):
            call(ghost)
    assert ch.api_calls["stop_instances"] == 0
    async with PowerHost(deployment(moto.url, {"w1": (ghost, "replaceable")})) as host:
        reason = host.offer_for("w1")[Verb.REBOOT].reason
        assert f"instance {ghost} does not exist" in reason


async def test_bad_credentials_are_authentication_failed_without_the_secret(
    moto_auth: Moto,
) -> None:
    ch = channel(moto_auth.url)
    with pytest.raises(AuthenticationFailed) as err:
        ch.read_power_state("i-0123456789abcdef0")
    assert "AuthFailure" in str(err.value)
    assert SECRET_VALUE not in str(err.value)
    with pytest.raises(AuthenticationFailed) as err:
        ch.shutdown("i-0123456789abcdef0")
    assert SECRET_VALUE not in str(err.value)
    async with PowerHost(deployment(moto_auth.url, {"w1": ("i-0123456789abcdef0",
                                                           "replaceable")})) as host:
        assert "AuthFailure" in host.offer_for("w1")[Verb.SHUTDOWN].reason


async def test_a_key_without_permission_is_unauthorized_operation(
    moto_auth: Moto, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert moto_auth.user_key is not None
    key_id, secret = moto_auth.user_key
    monkeypatch.setenv(KEY_ENV, key_id)
    monkeypatch.setenv(SECRET_ENV, secret)
    ch = channel(moto_auth.url)
    # AWS answers UnauthorizedOperation here; moto answers AccessDenied. Both map alike.
    with pytest.raises(AuthenticationFailed, match="not authorized to perform") as err:
        ch.shutdown("i-0123456789abcdef0")
    assert secret not in str(err.value)


async def test_an_unreachable_endpoint_is_unreachable() -> None:
    ch = channel(f"http://127.0.0.1:{free_port()}", timeouts={"connect_s": 5, "read_s": 5})
    with pytest.raises(Unreachable, match="cannot reach the endpoint"):
        ch.read_power_state("i-0123456789abcdef0")


async def test_a_throttled_read_and_stop_are_retried(
    moto: Moto, throttling: ThrottlingProxy
) -> None:
    (iid,) = moto.run()
    ch = channel(throttling.url)
    throttling.throttle.update({"DescribeInstanceStatus": 2, "StopInstances": 2})
    assert ch.shutdown(iid).detail == "running -> stopping"
    assert throttling.seen.count("DescribeInstanceStatus") == 3
    assert throttling.seen.count("StopInstances") == 3
    assert moto.state(iid) == "stopped"


async def test_a_throttled_reboot_is_not_repeated(
    moto: Moto, throttling: ThrottlingProxy
) -> None:
    (iid,) = moto.run()
    ch = channel(throttling.url)
    throttling.throttle["RebootInstances"] = 1
    with pytest.raises(RefusedByDevice, match="RequestLimitExceeded"):
        ch.reboot(iid)
    assert throttling.seen.count("RebootInstances") == 1


async def test_throttling_that_persists_gives_up_after_the_retries(
    moto: Moto, throttling: ThrottlingProxy
) -> None:
    ch = channel(throttling.url, throttle_retries=2)
    throttling.throttle["DescribeInstanceStatus"] = 10
    with pytest.raises(RefusedByDevice, match="after 3 attempts"):
        ch.read_power_state("i-0123456789abcdef0")
    assert throttling.seen.count("DescribeInstanceStatus") == 3


async def test_invoke_many_batches_instances_with_results_per_node(moto: Moto) -> None:
    ids = moto.run(6)
    ghost = "i-0123456789abcdef0"
    moto.client().terminate_instances(InstanceIds=[ids[5]])
    moto.client().stop_instances(InstanceIds=ids[:4])
    nodes = {f"w{i}": (iid, "replaceable") for i, iid in enumerate(ids)}
    nodes["ghost"] = (ghost, "replaceable")
    dep = deployment(moto.url, nodes)
    async with PowerHost(dep) as host:
        ch = host.channel("aws")
        assert isinstance(ch, EC2Channel)
        ch.api_calls.clear()
        results = await host.invoke_many(list(nodes), Verb.POWER_ON, reason="batch")
        assert ch.api_calls == {"describe_instance_status": 1, "start_instances": 1}
    for i in range(4):
        assert results[f"w{i}"].detail == "stopped -> pending"  # type: ignore[union-attr]
    assert results["w4"].detail == "already running"  # type: ignore[union-attr]
    # unknown at discovery: every verb withheld, with the id named; a channel failure
    # (exit 1), not the rule's refusal
    assert isinstance(results["ghost"], RefusedByDevice)
    assert "could not be discovered" in str(results["ghost"])
    assert f"instance {ghost} does not exist" in str(results["ghost"])
    # terminated before discovery: power-on withheld by the rule, not sent
    assert isinstance(results["w5"], NotOffered)
    assert moto.state(ids[5]) == "terminated"


async def test_invoke_batch_splits_by_batch_size_and_refuses_per_instance(moto: Moto) -> None:
    ids = moto.run(5)
    moto.client().terminate_instances(InstanceIds=[ids[0]])
    ch = channel(moto.url, batch_size=2)
    moto.client().stop_instances(InstanceIds=ids[1:])
    ghost = "i-0123456789abcdef0"
    outcomes = ch.invoke_batch(Verb.POWER_ON, [*ids, ghost])
    # the last batch holds the unknown id: its fast read fails, the filtered read does not
    assert ch.api_calls == {
        "describe_instance_status": 3, "describe_instances": 1, "start_instances": 3,
    }
    assert isinstance(outcomes[0], RefusedByDevice)
    assert "terminated instance cannot be started" in str(outcomes[0])
    assert [o.detail for o in outcomes[1:5]] == ["stopped -> pending"] * 4  # type: ignore[union-attr]
    assert isinstance(outcomes[5], RefusedByDevice)
    assert f"instance {ghost} does not exist" in str(outcomes[5])
    ch.invoke_batch(Verb.SHUTDOWN, ids)
    assert [moto.state(i) for i in ids[1:]] == ["stopped"] * 4


async def test_a_role_is_assumed_through_sts(moto: Moto) -> None:
    role = "arn:aws:iam::123456789012:role/powerplane"
    ch = channel(moto.url, role_arn=role)
    (iid,) = moto.run()
    assert ch.read_power_state(iid).state is PowerState.ON
    assert ch.read_power_state(iid).state is PowerState.ON
    assert ch.api_calls["assume_role"] == 1
    ch._expires = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)  # about to expire
    assert ch.read_power_state(iid).state is PowerState.ON
    assert ch.api_calls["assume_role"] == 2
    ch.close()


@pytest.mark.parametrize(
    ("state", "reading", "detail"),
    [
        ("running", PowerState.ON, ""),
        ("stopped", PowerState.OFF, ""),
        ("terminated", PowerState.OFF, "terminated"),
        ("pending", PowerState.UNKNOWN, "in transition (pending)"),
        ("stopping", PowerState.UNKNOWN, "in transition (stopping)"),
        ("shutting-down", PowerState.UNKNOWN, "in transition (shutting-down)"),
        ("hibernating", PowerState.UNKNOWN, "unrecognised instance state 'hibernating'"),
    ],
)
def test_instance_states_read_as_on_off_or_unknown(
    state: str, reading: PowerState, detail: str
) -> None:
    got = reading_for_state(state)
    assert (got.state, got.detail) == (reading, detail)


async def test_no_secret_reaches_a_log_line_even_at_debug(
    moto: Moto, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("botocore", "boto3"):
        logging.getLogger(name).setLevel(logging.NOTSET)  # as in a fresh process
    caplog.set_level(logging.DEBUG)
    (iid,) = moto.run()
    ch = channel(moto.url, role_arn="arn:aws:iam::123456789012:role/powerplane")
    ch.shutdown(iid)
    temporary = ch._client._request_signer._credentials  # the assumed role's keys
    assert temporary.secret_key and temporary.token
    for secret in (SECRET_VALUE, temporary.secret_key, temporary.token):
        assert secret not in caplog.text
    assert "stop_instances" in str(ch.api_calls)


async def test_the_default_credential_chain_and_a_profile_are_used_when_no_keys_are_given(
    moto: Moto, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (iid,) = moto.run()
    bare = {"region": "us-east-1", "endpoint_url": moto.url}
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEFAULTCHAIN0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
    ch = EC2Channel("aws", EC2Config.model_validate(bare))
    assert ch.read_power_state(iid).state is PowerState.ON
    assert ch._client._request_signer._credentials.access_key == "AKIADEFAULTCHAIN0000"

    creds = tmp_path / "credentials"
    creds.write_text("[ops]\naws_access_key_id = AKIAPROFILE000000000\n"
                     "aws_secret_access_key = from-a-profile\n", encoding="utf-8")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    ch = EC2Channel("aws", EC2Config.model_validate({**bare, "profile": "ops"}))
    assert ch.read_power_state(iid).state is PowerState.ON
    assert ch._client._request_signer._credentials.access_key == "AKIAPROFILE000000000"


async def test_a_missing_profile_is_authentication_failed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    cfg = EC2Config.model_validate({"region": "us-east-1", "profile": "absent",
                                    "endpoint_url": f"http://127.0.0.1:{free_port()}"})
    with pytest.raises(AuthenticationFailed, match="ProfileNotFound"):
        EC2Channel("aws", cfg).read_power_state("i-0123456789abcdef0")


# -- at most once across a timeout ------------------------------------------------------------
def test_the_ec2_type_declares_gated_sends_its_address_and_timeouts() -> None:
    from powerplane import Address, Timeouts
    from powerplane_cloud.plugin import EC2

    cfg = EC2Config.model_validate({"region": "us-east-1"})
    assert EC2.gated_sends is True
    assert EC2.address_for(cfg) == Address("endpoint_url", scheme="http")
    assert EC2.address_for(cfg).config_overrides("127.0.0.1", 9) == {  # type: ignore[union-attr]
        "endpoint_url": "http://127.0.0.1:9"}
    assert EC2.timeouts_of(cfg) == Timeouts(connect_s=30, read_s=30)
    assert set(EC2.secret_fields()) == {"access_key_id", "secret_access_key", "session_token"}


def test_every_verb_attempt_passes_about_to_send_right_before_it_leaves(
    moto: Moto, throttling: ThrottlingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powerplane_cloud.ec2 as ec2_module

    (iid,) = moto.run()
    ch = channel(throttling.url)
    gates: list[list[str]] = []
    monkeypatch.setattr(ec2_module, "about_to_send", lambda: gates.append(list(throttling.seen)))
    throttling.throttle["StopInstances"] = 1
    assert ch.shutdown(iid).detail == "running -> stopping"
    # reads pass no gate; each StopInstances attempt (the throttled one, the retry) passes
    # it with nothing of that attempt sent yet
    assert gates == [["DescribeInstanceStatus"],
                     ["DescribeInstanceStatus", "StopInstances"]]


def test_a_closed_gate_sends_nothing(
    moto: Moto, throttling: ThrottlingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powerplane_cloud.ec2 as ec2_module
    from powerplane import ChannelTimeout

    (iid,) = moto.run()
    ch = channel(throttling.url)

    def closed() -> None:
        raise ChannelTimeout("the host gave up on this call before the request left")

    monkeypatch.setattr(ec2_module, "about_to_send", closed)
    for verb in (ch.reboot, ch.shutdown, ch.terminate):
        with pytest.raises(ChannelTimeout, match="before the request left"):
            verb(iid)
    outcomes = ch.invoke_batch(Verb.SHUTDOWN, [iid])
    assert isinstance(outcomes[0], ChannelTimeout)
    assert set(throttling.seen) == {"DescribeInstanceStatus"}
    assert moto.state(iid) == "running"


@pytest.mark.slow  # waits out a 1 s read timeout
def test_a_verb_whose_answer_never_comes_is_outcome_unknown_and_sent_once(
    moto: Moto, throttling: ThrottlingProxy
) -> None:
    from powerplane import ChannelTimeout, OutcomeUnknown

    (iid,) = moto.run()
    ch = channel(throttling.url, timeouts={"connect_s": 2, "read_s": 1})
    throttling.hang["StopInstances"] = 1
    with pytest.raises(OutcomeUnknown, match="may have been applied") as err:
        ch.shutdown(iid)
    assert "ReadTimeoutError" in str(err.value)
    assert throttling.seen.count("StopInstances") == 1  # never sent twice
    assert moto.state(iid) == "stopped"  # it was applied
    # the same silence on a read is a plain timeout: nothing was changed
    throttling.hang["DescribeInstanceStatus"] = 1
    with pytest.raises(ChannelTimeout) as read_err:
        ch.read_power_state(iid)
    assert not isinstance(read_err.value, OutcomeUnknown)


@pytest.mark.slow  # waits out a 1 s read timeout
async def test_through_the_host_a_lost_answer_is_outcome_unknown(
    moto: Moto, throttling: ThrottlingProxy
) -> None:
    from powerplane import OutcomeUnknown

    (iid,) = moto.run()
    dep = parse_config({
        "channels": {"aws": ec2_channel_config(throttling.url,
                                               timeouts={"connect_s": 2, "read_s": 1})},
        "nodes": {"w1": {"classification": "replaceable",
                         "channels": [{"channel": "aws", "target": iid}]}},
        "limits": {"timeout_s": 60},
    })
    async with PowerHost(dep) as host:
        throttling.hang["RebootInstances"] = 1
        with pytest.raises(OutcomeUnknown):
            await host.invoke("w1", Verb.REBOOT, reason="lost answer")
    assert throttling.seen.count("RebootInstances") == 1
