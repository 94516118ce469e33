"""Every pyghmi exception, IPMI completion code and RMCP+ status text maps into the tree."""

from __future__ import annotations

import inspect
import socket
import struct

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


# IPMI 2.0 table 13-15, RMCP+ and RAKP message status codes: the class each must map to
SPEC_RMCP_STATUS: dict[int, type[ChannelError]] = {
    0x01: RefusedByDevice,       # insufficient resources to create a session
    0x02: ProtocolError,         # invalid session ID
    0x03: ProtocolError,         # invalid payload type
    0x04: ProtocolError,         # invalid authentication algorithm
    0x05: ProtocolError,         # invalid integrity algorithm
    0x06: ProtocolError,         # no matching authentication payload
    0x07: ProtocolError,         # no matching integrity payload
    0x08: ProtocolError,         # inactive session ID
    0x09: AuthenticationFailed,  # invalid role
    0x0A: AuthenticationFailed,  # unauthorized role or privilege level requested
    0x0B: RefusedByDevice,       # insufficient resources to create a session at the role
    0x0C: AuthenticationFailed,  # invalid name length
    0x0D: AuthenticationFailed,  # unauthorized name
    0x0E: AuthenticationFailed,  # unauthorized GUID
    0x0F: AuthenticationFailed,  # invalid integrity check value
    0x10: ProtocolError,         # invalid confidentiality algorithm
    0x11: ProtocolError,         # no cipher suite match with proposed security algorithms
    0x12: ProtocolError,         # illegal or unrecognized parameter
}


def test_pyghmi_knows_exactly_the_spec_status_codes() -> None:
    assert set(constants.rmcp_codes) == set(SPEC_RMCP_STATUS)


@pytest.mark.parametrize("suffix", ["", " in RAKP2", " reported in RAKP4"])
@pytest.mark.parametrize("code", sorted(SPEC_RMCP_STATUS))
def test_every_rmcp_status_text_maps(code: int, suffix: str) -> None:
    text = constants.rmcp_codes[code] + suffix
    err = mapped(pyghmi_exceptions.IpmiException(text), stage="login")
    assert type(err) is SPEC_RMCP_STATUS[code], (code, text, err)
    # the status is named by its code (pyghmi words 0x06 like 0x07: same class either way)
    assert f"status 0x{code:02X}" in str(err) or code == 0x06, err
    assert "IpmiException" not in str(err) and "unexpected" not in str(err), err


@pytest.mark.parametrize("code", [0x00, 0x13, 0x42, 0xFF])
def test_an_unassigned_rmcp_status_is_a_protocol_error_naming_it(code: int) -> None:
    err = mapped(pyghmi_exceptions.IpmiException(f"Unrecognized RMCP code {code}"),
                 stage="login")
    assert type(err) is ProtocolError and f"0x{code:02X}" in str(err), err


@pytest.mark.parametrize("exc", [
    IndexError("bytearray index out of range"), struct.error("unpack requires a buffer of 4 bytes"),
    KeyError(7), TypeError("'NoneType' object is not subscriptable"),
    pyghmi_exceptions.IpmiException(None), pyghmi_exceptions.IpmiException(),
])
@pytest.mark.parametrize("stage", ["probe", "login", "command"])
def test_python_internals_never_reach_the_message(exc: BaseException, stage: str) -> None:
    err = mapped(exc, stage=stage)
    assert type(err) is ProtocolError, err
    for internal in ("bytearray", "unpack", "NoneType", "IpmiException", "None", "KeyError",
                     "IndexError"):
        assert internal not in str(err), err


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
