"""The network negatives built from what a channel type declares, with no ``negative:``
hints: its address (``ChannelType(address=...)``), its ``SecretRef`` fields and its
``timeouts: Timeouts`` field. A hint or a derived config the channel's model rejects is
never FAIL: a hint is checked when the target is loaded (exit 2 naming it), a config
derived from the declarations alone is NOT TESTED with the reason; a transport nothing
declares is NOT TESTED too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_lineproto import DECLARED_ADDRESS, DeclaredLineConfig, LineChannel
from conformance_targets import messages, outcome

from powerplane import (
    CapabilitySet,
    ChannelTimeout,
    ChannelType,
    Reading,
    Unreachable,
    hookimpl,
)
from powerplane.errors import ConfigError
from powerplane.plugins import registry
from powerplane_conformance.api import RunSummary
from powerplane_conformance.hints import set_path

NEGATIVES = ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT", "WRONG_CREDENTIALS_REJECTED",
             "SECRET_NOT_DISCLOSED")


@pytest.fixture
def declared_target(
    lineproto_peer: tuple[int, str], tmp_path: Path
) -> Callable[..., dict[str, Any]]:
    port, password = lineproto_peer
    secret = tmp_path / "password"
    secret.write_text(password, encoding="utf-8")

    def make(negative: dict[str, Any] | None = None, **channel: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {"nodes": ["n1"], "allow_destructive": False}
        if negative is not None:
            conf["negative"] = {"dev": negative}
        return {
            "channels": {"dev": {"type": "lineproto-declared", "address": f"127.0.0.1:{port}",
                                 "password": {"file": str(secret)}, **channel}},
            "nodes": {"n1": {"channels": [{"channel": "dev", "target": "m1"}]}},
            "conformance": conf,
        }

    return make


def test_every_negative_passes_from_declarations_alone(
    run: Callable[..., RunSummary], declared_target: Callable[..., dict[str, Any]]
) -> None:
    """Address (and its transport), secret and timeouts all derived: no hints at all; the
    silent server ends within the short Timeouts the suite sets."""
    summary = run(declared_target())
    for ident in NEGATIVES:
        assert outcome(summary, ident) == {"pass"}, (ident, messages(summary, ident))


def test_a_hint_still_overrides(
    run: Callable[..., RunSummary], declared_target: Callable[..., dict[str, Any]]
) -> None:
    summary = run(declared_target({"timeout_s": 0.5, "transport": "tcp"}))
    for ident in NEGATIVES:
        assert outcome(summary, ident) == {"pass"}, (ident, messages(summary, ident))


def test_a_udp_address_gets_udp_fakes(
    run: Callable[..., RunSummary], declared_target: Callable[..., dict[str, Any]]
) -> None:
    """Told the device is UDP, the suite points it at UDP fakes: a TCP channel then finds
    a closed TCP port at the UDP closed port (nothing listens there on either)."""
    summary = run(declared_target({"transport": "udp"}))
    assert outcome(summary, "CLOSED_PORT_UNREACHABLE") == {"pass"}
    # a UDP silent server does not accept TCP: the TCP channel is refused, not held
    assert outcome(summary, "SILENT_SERVER_TIMEOUT") == {"fail"}
    assert "Unreachable" in messages(summary, "SILENT_SERVER_TIMEOUT")


def test_an_invalid_hint_is_exit_2_naming_each_hint(
    run: Callable[..., RunSummary], declared_target: Callable[..., dict[str, Any]]
) -> None:
    """Hinted keys the channel's model does not have: caught when the target is loaded,
    each at its hint's path, before any check runs (no FAIL, no results)."""
    with pytest.raises(ConfigError) as err:
        run(declared_target({"address_key": "no_such_key", "timeout_key": "nor_this",
                             "secret_key": "nor_that"}))
    said = {p.path: p.message for p in err.value.problems}
    assert set(said) == {f"conformance.negative.dev.{hint}"
                         for hint in ("address_key", "timeout_key", "secret_key")}
    assert "no_such_key: no such key" in said["conformance.negative.dev.address_key"]
    assert "is invalid for channel type lineproto-declared" in \
        said["conformance.negative.dev.timeout_key"]


def test_a_channel_type_without_an_address_is_not_tested_with_the_reason(
    run: Callable[..., RunSummary],
) -> None:
    from conformance_targets import sim_target

    summary = run(sim_target({}, conformance={"negative": {}}))
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT"):
        assert outcome(summary, ident) == {"not_tested"}
        assert "declares no network address" in messages(summary, ident)


def test_set_path_reaches_nested_and_starred_secrets() -> None:
    raw = {"auth": {"password": "a", "user": "u"}, "feeds": {"x": {"community": "c"},
                                                             "y": {"community": "d"}}}
    ref = {"env": "E"}
    assert set_path(raw, "auth.password", ref) == {"auth": {"password": ref, "user": "u"}}
    assert set_path(raw, "feeds.*.community", ref) == {
        "feeds": {"x": {"community": ref}, "y": {"community": ref}}}
    assert set_path(raw, "token", ref) == {}  # not configured: nothing to replace
    assert raw["auth"]["password"] == "a"  # the original is left alone


def test_the_transport_comes_from_the_address_or_the_hint() -> None:
    from powerplane import Address
    from powerplane_conformance.probing import _transport_of
    from powerplane_conformance.settings import NegativeHints

    none = NegativeHints()
    assert _transport_of(Address("endpoint"), none) == ("tcp", "")
    ipmi = Address(None, source="target", format="host:port", transport="udp")
    assert _transport_of(ipmi, none) == ("udp", "")
    assert _transport_of(ipmi, NegativeHints(transport="tcp")) == ("tcp", "")
    assert _transport_of(None, none) == ("tcp", "")  # a hinted address, as before


# -- a channel that cannot see power off reads the fakes as unknown, as it must ------------

class BlindLineChannel(LineChannel):
    """Cannot see power off: an unanswered read is ``unknown``, never an error (as Talos)."""

    async def capabilities(self, target: str) -> CapabilitySet:
        caps = await super().capabilities(target)
        return CapabilitySet(caps.verbs, caps.source, caps.detail, sees_power_off=False)

    async def read_power_state(self, target: str) -> Reading:
        try:
            return await super().read_power_state(target)
        except (Unreachable, ChannelTimeout) as exc:
            return Reading.unknown(f"no answer ({exc}): dark, or a network fault")


class _BlindPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="lineproto-blind", config=DeclaredLineConfig,
                             factory=BlindLineChannel, address=DECLARED_ADDRESS,
                             description="a line-protocol device that cannot see power off"))


@pytest.fixture
def blind_target(
    declared_target: Callable[..., dict[str, Any]],
) -> Iterator[Callable[[bool], dict[str, Any]]]:
    reg = registry()
    reg.add_module("conformance-blind", _BlindPlugin(), "tests", "0")

    def make(destructive: bool) -> dict[str, Any]:
        data = declared_target()
        data["channels"]["dev"]["type"] = "lineproto-blind"
        data["conformance"]["allow_destructive"] = destructive
        return data

    yield make
    reg.remove("conformance-blind")


def test_a_blind_channel_is_probed_with_a_verb_at_the_fake(
    run: Callable[..., RunSummary], blind_target: Callable[[bool], dict[str, Any]]
) -> None:
    """Its read of the fake is unknown, which is right; the verb sent to the fake shows
    the mapped error (never "the read succeeded" as a FAIL)."""
    summary = run(blind_target(True), pytest_args=["-k", "closed_port or silent_server"])
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT"):
        assert outcome(summary, ident) == {"pass"}, (ident, messages(summary, ident))


def test_a_blind_channel_read_only_is_not_tested_with_the_reason(
    run: Callable[..., RunSummary], blind_target: Callable[[bool], dict[str, Any]]
) -> None:
    summary = run(blind_target(False), pytest_args=["-k", "closed_port or silent_server"])
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT"):
        assert outcome(summary, ident) == {"not_tested"}, (ident, messages(summary, ident))
        assert "cannot see power off and reads the fake as unknown" in messages(summary, ident)
        assert "needs allow_destructive: true" in messages(summary, ident)
    assert summary.data["counts"]["fail"] == 0


# -- a target spelling the channel type's parser refuses asks no device -------------------

def _strict_target(raw: str) -> str:
    if not raw.isalnum():
        raise ValueError(f"target {raw!r}: letters and digits only")
    return raw


class _StrictTargetPlugin:
    @hookimpl
    def register_channel_types(self, register: Callable[[ChannelType[Any, Any]], None]) -> None:
        register(ChannelType(name="lineproto-strict", config=DeclaredLineConfig,
                             factory=LineChannel, address=DECLARED_ADDRESS,
                             target=_strict_target,
                             description="a line-protocol device with strict target names"))


def test_an_unknown_target_the_parser_refuses_is_not_tested_never_passed(
    run: Callable[..., RunSummary], declared_target: Callable[..., dict[str, Any]]
) -> None:
    """The derived unknown target (the node's target plus a suffix) is refused by the
    channel type's parser, so no request reaches the device: nothing about the device's
    answer was observed, and the check says so instead of passing."""
    reg = registry()
    reg.add_module("conformance-strict", _StrictTargetPlugin(), "tests", "0")
    try:
        data = declared_target()
        data["channels"]["dev"]["type"] = "lineproto-strict"
        summary = run(data, pytest_args=["-k", "unknown_target"])
    finally:
        reg.remove("conformance-strict")
    assert outcome(summary, "UNKNOWN_TARGET_ERROR") == {"not_tested"}
    text = messages(summary, "UNKNOWN_TARGET_ERROR")
    assert "rejects the derived target" in text and "unknown_target" in text
