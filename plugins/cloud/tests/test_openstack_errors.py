"""Every Compute / Keystone status and every httpx failure maps into powerplane's tree.

Core's HTTP status rule is checked for every status 400..599 and the verb rule (a request
that may have left, then timed out or dropped, is OutcomeUnknown) for every httpx class.
"""

from __future__ import annotations

import inspect

import httpx
import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_cloud.errors import api_message, map_error, map_status, map_transport

SID = "9168b536-cd40-4630-b43f-b259807c6e87"


def response(status: int, body: object = None) -> httpx.Response:
    return httpx.Response(status, json=body) if body is not None else httpx.Response(status)


@pytest.mark.parametrize(
    ("status", "mapped"),
    [
        (400, RefusedByDevice), (401, AuthenticationFailed), (403, AuthenticationFailed),
        (404, RefusedByDevice), (409, RefusedByDevice), (413, RefusedByDevice),
        # core's rule: every 5xx and every other 4xx is the API refusing in its own words
        # (502-504 were Unreachable and 418 a ProtocolError before)
        (429, RefusedByDevice), (500, RefusedByDevice), (502, RefusedByDevice),
        (503, RefusedByDevice), (504, RefusedByDevice), (418, RefusedByDevice),
        (302, ProtocolError),
    ],
)
def test_statuses_map_to_their_class(status: int, mapped: type) -> None:
    err = map_status(response(status, {"fault": {"code": status, "message": "nova said"}}),
                     channel="os", target=SID, what="os-stop")
    assert type(err) is mapped
    assert "nova said" in str(err) or status == 302


@pytest.mark.parametrize("status", range(400, 600))
def test_the_http_status_rule_for_every_4xx_and_5xx(status: int) -> None:
    err = map_status(response(status, {"fault": {"code": status, "message": "nova said"}}),
                     channel="os", target=SID, what="os-stop")
    want = AuthenticationFailed if status in (401, 403) else RefusedByDevice
    assert type(err) is want, status
    assert "nova said" in str(err), status


def test_the_api_message_is_read_from_nova_and_keystone_bodies() -> None:
    assert api_message(response(404, {"itemNotFound": {
        "code": 404, "message": f"Instance {SID} could not be found."}})) == \
        f"Instance {SID} could not be found."
    assert api_message(response(401, {"error": {
        "code": 401, "title": "Unauthorized",
        "message": "The request you have made requires authentication."}})) == \
        "The request you have made requires authentication."
    assert api_message(httpx.Response(500, text="<html>oops</html>")) == \
        "Internal Server Error"


@pytest.mark.parametrize(
    ("exc", "mapped"),
    [
        (httpx.ConnectError("refused"), Unreachable),
        (httpx.ConnectTimeout("slow"), Unreachable),
        (httpx.ReadTimeout("slow"), ChannelTimeout),
        (httpx.WriteTimeout("slow"), ChannelTimeout),
        (httpx.PoolTimeout("slow"), ChannelTimeout),
        (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
         TLSVerificationFailed),
        (httpx.RemoteProtocolError("bad"), ProtocolError),
        (httpx.ReadError("reset"), Unreachable),
    ],
)
def test_transport_errors_map_to_their_class(exc: httpx.HTTPError, mapped: type) -> None:
    assert type(map_transport(exc, channel="os", target=SID, what="GET server")) is mapped


def _httpx_classes() -> list[type[httpx.HTTPError]]:
    return [c for _, c in inspect.getmembers(httpx, inspect.isclass)
            if issubclass(c, httpx.HTTPError)]


def test_no_httpx_error_is_left_unmapped() -> None:
    classes = _httpx_classes()
    assert len(classes) > 15
    for cls in classes:
        exc = cls.__new__(cls)
        assert isinstance(map_transport(exc, channel="os", target=SID, what="x"), ChannelError)
        assert isinstance(map_transport(exc, channel="os", target=SID, what="x", sent=True),
                          ChannelError)


NOTHING_LEFT = (httpx.ConnectTimeout, httpx.ConnectError, httpx.ProxyError, httpx.PoolTimeout,
                httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.TooManyRedirects,
                httpx.HTTPStatusError)
"""httpx classes raised before any byte of the request left (or never raised here)."""


def test_every_httpx_class_maps_precisely_for_a_verb() -> None:
    """Before the request left: as for a read. Once it may have left: OutcomeUnknown."""
    for cls in _httpx_classes():
        exc = cls.__new__(cls)
        exc.args = ("x",)
        verb = map_transport(exc, channel="os", target=SID, what="os-stop", sent=True)
        read = map_transport(exc, channel="os", target=SID, what="GET server")
        if issubclass(cls, NOTHING_LEFT):
            assert type(verb) is type(read), cls
            assert not isinstance(verb, OutcomeUnknown), cls
        else:
            assert type(verb) is OutcomeUnknown, cls
            assert not isinstance(read, OutcomeUnknown), cls


@pytest.mark.parametrize(
    ("exc", "read", "verb"),
    [
        (httpx.ReadTimeout("slow"), ChannelTimeout, OutcomeUnknown),
        (httpx.WriteTimeout("slow"), ChannelTimeout, OutcomeUnknown),
        (httpx.ReadError("reset"), Unreachable, OutcomeUnknown),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."),
         ProtocolError, OutcomeUnknown),
        (httpx.PoolTimeout("busy"), ChannelTimeout, ChannelTimeout),
        (httpx.ConnectError("refused"), Unreachable, Unreachable),
        (httpx.ConnectTimeout("slow"), Unreachable, Unreachable),
    ],
)
def test_read_and_verb_side_by_side(exc: httpx.HTTPError, read: type, verb: type) -> None:
    assert type(map_error(exc, channel="os", target=SID, operation="GET server")) is read
    assert type(map_error(exc, channel="os", target=SID, operation="os-stop",
                          sent=True)) is verb
