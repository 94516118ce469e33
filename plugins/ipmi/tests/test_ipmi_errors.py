"""Every pyghmi exception, IPMI completion code and RMCP+ status text maps into the tree."""

from __future__ import annotations

import inspect
import socket

import pyghmi.exceptions as pyghmi_exceptions
import pytest
from pyghmi.ipmi.private import constants

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    Unreachable,
)
from powerplane_ipmi.errors import (
    COMPLETION_CODES,
    CompletionCodeError,
    NoAnswer,
    PolicyRefused,
    map_error,
)


def mapped(exc: BaseException, **kw: object) -> ChannelError:
    return map_error(exc, channel="c", target="t", **kw)  # type: ignore[arg-type]


def test_every_pyghmi_exception_class_maps_to_a_channel_error() -> None:
    classes = [c for _, c in inspect.getmembers(pyghmi_exceptions, inspect.isclass)
               if issubclass(c, BaseException)]
    assert len(classes) >= 8
    for cls in classes:
        try:
            exc = cls("boom")
        except TypeError:
            exc = cls()
        assert isinstance(mapped(exc), ChannelError), cls


@pytest.mark.parametrize("code", sorted(COMPLETION_CODES))
def test_every_completion_code_is_a_refusal_with_its_words(code: int) -> None:
    err = mapped(CompletionCodeError("Get Chassis Status", code))
    want = ChannelTimeout if code == 0xC3 else RefusedByDevice
    assert type(err) is want and f"0x{code:02X}" in str(err)


def test_completion_codes_cover_pyghmis_table() -> None:
    assert set(constants.ipmi_completion_codes) - {0, 0xFFFF} <= set(COMPLETION_CODES)


@pytest.mark.parametrize("code", sorted(constants.rmcp_codes))
def test_every_rmcp_status_text_maps(code: int) -> None:
    text = constants.rmcp_codes[code]
    err = mapped(pyghmi_exceptions.IpmiException(text), stage="login")
    assert isinstance(err, (AuthenticationFailed, RefusedByDevice, ProtocolError,
                            ChannelTimeout)), (code, text)


def test_the_classes_that_matter() -> None:
    ipmi = pyghmi_exceptions.IpmiException
    assert type(mapped(ipmi("Incorrect password provided"))) is AuthenticationFailed
    assert type(mapped(ipmi("Invalid RAKP4 integrity code (wrong Kg?)"))) is \
        AuthenticationFailed
    assert type(mapped(ipmi("Unauthorized name in RAKP2"))) is AuthenticationFailed
    assert type(mapped(ipmi("Unauthorized role or privilege level requested in RAKP2"))) is \
        AuthenticationFailed
    assert type(mapped(ipmi("Insufficient resources to create new session"))) is \
        RefusedByDevice
    assert type(mapped(ipmi("No Cipher suite match with proposed security algorithms"))) is \
        ProtocolError
    assert type(mapped(ipmi("timeout"), stage="login")) is ChannelTimeout
    assert type(mapped(ConnectionRefusedError())) is Unreachable
    assert type(mapped(socket.gaierror(-2, "Name or service not known"))) is Unreachable
    assert type(mapped(NoAnswer("x"))) is ChannelTimeout
    assert type(mapped(PolicyRefused("suite 0"))) is ProtocolError


def test_after_a_chassis_command_left_every_failure_is_outcome_unknown() -> None:
    for exc in (NoAnswer("x"), TimeoutError(), pyghmi_exceptions.IpmiException("timeout"),
                CompletionCodeError("chassis power up", 0xC3), RuntimeError("dropped")):
        assert type(mapped(exc, sent=True)) is OutcomeUnknown, exc
    # an answered refusal is not: the BMC said no
    assert type(mapped(CompletionCodeError("chassis soft-off", 0xCC), sent=True)) is \
        RefusedByDevice


def test_the_user_name_and_secrets_are_scrubbed_from_pyghmi_texts() -> None:
    text = "Unauthorized role while requesting privelege level 3 for b'pp-ops-7'"
    err = mapped(pyghmi_exceptions.IpmiException(text), secrets=["pp-ops-7", "pw-1"])
    assert "pp-ops-7" not in str(err) and "<redacted>" in str(err)
