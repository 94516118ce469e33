"""Every Compute / Keystone status and every httpx failure maps into powerplane's tree."""

from __future__ import annotations

import inspect

import httpx
import pytest

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_cloud.openstack_errors import api_message, map_status, map_transport

SID = "9168b536-cd40-4630-b43f-b259807c6e87"


def response(status: int, body: object = None) -> httpx.Response:
    return httpx.Response(status, json=body) if body is not None else httpx.Response(status)


@pytest.mark.parametrize(
    ("status", "mapped"),
    [
        (400, RefusedByDevice), (401, AuthenticationFailed), (403, AuthenticationFailed),
        (404, RefusedByDevice), (409, RefusedByDevice), (413, RefusedByDevice),
        (429, RefusedByDevice), (500, RefusedByDevice), (502, Unreachable),
        (503, Unreachable), (504, Unreachable), (418, ProtocolError),
    ],
)
def test_statuses_map_to_their_class(status: int, mapped: type) -> None:
    err = map_status(response(status, {"fault": {"code": status, "message": "nova said"}}),
                     channel="os", target=SID, what="os-stop")
    assert type(err) is mapped
    assert "nova said" in str(err) or status == 418


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


def test_no_httpx_error_is_left_unmapped() -> None:
    classes = [c for _, c in inspect.getmembers(httpx, inspect.isclass)
               if issubclass(c, httpx.HTTPError)]
    assert len(classes) > 15
    for cls in classes:
        exc = cls.__new__(cls)
        assert isinstance(map_transport(exc, channel="os", target=SID, what="x"), ChannelError)
