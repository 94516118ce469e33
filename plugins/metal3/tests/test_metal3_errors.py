"""powerplane_metal3.errors: every row of the mapping table, and the channel's
errors against a real server that answers them (a closed port, a 403, a 500, a 404)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx2
import pytest
from metal3_peers import make_channel, metal3_cluster

from powerplane import (
    AuthenticationFailed,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    status_error,
)
from powerplane.testing import closed_port
from powerplane_metal3.config import parse_target
from powerplane_metal3.errors import map_error

pytestmark = pytest.mark.timeout(60)

_REQ = httpx2.Request("PATCH", "https://api.example/apis/metal3.io/v1alpha1")


def _status(code: int) -> httpx2.HTTPStatusError:
    response = httpx2.Response(code, request=_REQ, json={"kind": "Status", "code": code})
    return httpx2.HTTPStatusError(str(code), request=_REQ, response=response)


@pytest.mark.parametrize(("code", "cls"), [
    (401, AuthenticationFailed), (403, AuthenticationFailed), (404, RefusedByDevice),
    (409, RefusedByDevice), (422, RefusedByDevice), (429, RefusedByDevice),
    (500, RefusedByDevice), (503, RefusedByDevice),
])
def test_statuses(code: int, cls: type) -> None:
    assert status_error(code) is cls  # core's one rule, which the channel applies
    assert map_error(_status(code)) is cls
    assert map_error(_status(code), writing=True) is cls  # an answer: nothing unknown


def test_transport() -> None:
    tls = httpx2.ConnectError("x", request=_REQ)
    tls.__cause__ = ssl.SSLCertVerificationError("CERTIFICATE_VERIFY_FAILED")
    assert map_error(tls) is TLSVerificationFailed
    assert map_error(httpx2.ConnectError("refused", request=_REQ)) is Unreachable
    for cls in (httpx2.ConnectTimeout, httpx2.PoolTimeout):
        assert map_error(cls("t", request=_REQ), writing=True) is ChannelTimeout
    assert map_error(httpx2.ReadTimeout("t", request=_REQ)) is ChannelTimeout
    assert map_error(httpx2.ReadTimeout("t", request=_REQ), writing=True) is OutcomeUnknown
    assert map_error(httpx2.RemoteProtocolError("x", request=_REQ),
                     writing=True) is OutcomeUnknown
    assert map_error(httpx2.RemoteProtocolError("x", request=_REQ)) is ProtocolError
    assert map_error(ValueError("not JSON")) is ProtocolError
    with pytest.raises(ValueError):
        status_error(200)


async def test_the_channel_maps_what_the_api_server_answers(tmp_path: Path) -> None:
    with metal3_cluster() as (api, bmo):
        bmo.add_host("metal3", "h0")
        channel = make_channel(api.write_kubeconfig(tmp_path / "kubeconfig"))
        target = parse_target("metal3/h0")
        api.fail_requests("get", "metal3.io/v1alpha1/baremetalhosts", "500")
        with pytest.raises(RefusedByDevice, match="HTTP 500"):
            await channel.read_power_state(target)
        await channel.close()
    port = closed_port()
    kubeconfig = tmp_path / "closed"
    kubeconfig.write_text(
        (tmp_path / "kubeconfig").read_text().replace(api.url, f"http://127.0.0.1:{port}"))
    channel = make_channel(kubeconfig)
    with pytest.raises(Unreachable, match="reading BareMetalHost metal3/h0"):
        await channel.capabilities(target)
    await channel.close()
