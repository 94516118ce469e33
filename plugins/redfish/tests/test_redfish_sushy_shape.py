"""The shape of sushy's connector that ``powerplane_redfish.connection`` relies on.

The connection subclasses :class:`sushy.connector.Connector` (its public methods, built with
its public arguments, and its requests session, ``_session``, for TLS and proxies) so that a
reset is sent at most once: stock sushy sends a POST again
when a vendor answers "not ready" (iDRAC ``SYS518``), and retries transport failures. The
distribution pins ``sushy>=5.14,<6``; these tests fail on a sushy whose shape differs: a
method or keyword argument renamed, the retry hook no longer consulted, or the retry gone
(then the override may be dropped).
"""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

from powerplane.testing import HttpReply, HttpRequest, JsonHttpServer
from powerplane_redfish.connection import _connector_class, tls_context
from powerplane_redfish.testing.mockup import redfish_error

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
NOT_READY = redfish_error("IDRAC.2.8.SYS518", "SYS518: iDRAC is not ready.")
KWARGS = {"server_side_retries": 1, "server_side_retries_delay": 0,
          "default_request_timeout": 10, "connect_timeout": 5}


@pytest.fixture
def server() -> Iterator[JsonHttpServer]:
    """POST /reset answers 400 "SYS518, not ready"; GET /flaky answers 500."""
    srv = JsonHttpServer(resources={})

    def not_ready(request: HttpRequest) -> HttpReply:
        return HttpReply(400, NOT_READY)

    def failing(request: HttpRequest) -> HttpReply:
        return HttpReply(500, redfish_error("Base.1.0.InternalError", "try later"))

    srv.route("POST", "/reset", not_ready)
    srv.route("GET", "/flaky", failing)
    with srv.start():
        yield srv


def test_sushy_is_pinned_and_the_installed_sushy_is_in_the_range() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert "sushy>=5.14,<6" in dependencies
    major, minor = (int(part) for part in version("sushy").split(".")[:2])
    assert major == 5 and minor >= 14


def test_the_connector_takes_the_arguments_and_has_the_methods_overridden() -> None:
    params = inspect.signature(sushy_connector.Connector.__init__).parameters
    assert {"url", "verify", *KWARGS} <= set(params)
    for name in ("get", "post", "patch", "put", "delete"):
        method = inspect.signature(getattr(sushy_connector.Connector, name)).parameters
        assert "path" in method
        assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in method.values()), name
    retry = inspect.signature(sushy_connector.Connector.check_retry_on_exception).parameters
    assert list(retry) == ["self", "exception_msg"]
    assert callable(sushy_connector.Connector.close)


def test_the_connector_keeps_its_requests_session_as_session() -> None:
    """The one private name: ``Connector._session``, a requests session (trust_env turned
    off, an HTTPS adapter mounted on it)."""
    import requests

    plain = sushy_connector.Connector("https://127.0.0.1:1", verify=True)
    assert isinstance(plain._session, requests.Session)
    ours = _connector_class()("https://127.0.0.1:1", tls=tls_context(True), verify=True)
    assert ours._session.trust_env is False
    assert type(ours._session.get_adapter("https://127.0.0.1:1")).__name__ == "_TLSAdapter"
    bare = _connector_class()("https://127.0.0.1:1", verify=False)
    assert bare._session.trust_env is False
    assert type(bare._session.get_adapter("https://127.0.0.1:1")).__name__ == "HTTPAdapter"


def _posts(server: JsonHttpServer, connector: sushy_connector.Connector) -> int:
    with pytest.raises(sushy_exc.BadRequestError):
        connector.post("/reset", data={"ResetType": "On"})
    connector.close()
    return sum(1 for method, path in server.requests if (method, path) == ("POST", "/reset"))


def test_stock_sushy_sends_a_not_ready_post_twice_so_the_override_is_needed(
    server: JsonHttpServer,
) -> None:
    assert _posts(server, sushy_connector.Connector(server.endpoint, **KWARGS)) == 2


def test_the_override_sends_a_not_ready_post_once(server: JsonHttpServer) -> None:
    assert _posts(server, _connector_class()(server.endpoint, **KWARGS)) == 1


def test_a_get_answered_5xx_is_tried_twice_with_one_server_side_retry(
    server: JsonHttpServer,
) -> None:
    connector = _connector_class()(server.endpoint, **KWARGS)
    with pytest.raises(sushy_exc.ServerSideError):
        connector.get("/flaky")
    connector.close()
    assert server.requests.count(("GET", "/flaky")) == 2
