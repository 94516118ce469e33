"""``powerplane.testing.JsonHttpServer``: what the Redfish mockup and PDU servers rely on."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from powerplane.testing import (
    HttpReply,
    HttpRequest,
    JsonHttpServer,
    issue_cert,
    json_error,
    make_ca,
)

TIMEOUT = 10.0


def _tree(root: Path) -> Path:
    (root / "Systems" / "1").mkdir(parents=True)
    (root / "index.json").write_text(json.dumps({"Name": "root"}))
    (root / "Systems" / "index.json").write_text(
        json.dumps({"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]}))
    (root / "Systems" / "1" / "index.json").write_text(json.dumps({"PowerState": "On"}))
    (root.parent / "secret").mkdir()
    (root.parent / "secret" / "index.json").write_text(json.dumps({"leak": True}))
    return root


def _call(server: JsonHttpServer, method: str, path: str, body: Any = None,
          headers: dict[str, str] | None = None, timeout: float = TIMEOUT,
          context: ssl.SSLContext | None = None) -> tuple[int, Any, http.client.HTTPResponse]:
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=timeout,
                                           context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None), resp
    finally:
        conn.close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _tree(tmp_path / "mockup")


@pytest.fixture
def server(tree: Path) -> Iterator[JsonHttpServer]:
    with JsonHttpServer(tree, prefix="/redfish/v1") as srv:
        yield srv


def test_a_directory_tree_is_served_under_its_prefix(server: JsonHttpServer) -> None:
    assert _call(server, "GET", "/redfish/v1")[:2] == (200, {"Name": "root"})
    assert _call(server, "GET", "/redfish/v1/")[:2] == (200, {"Name": "root"})
    status, body, resp = _call(server, "GET", "/redfish/v1/Systems/1?$expand=.")
    assert (status, body) == (200, {"PowerState": "On"})
    assert resp.getheader("Content-Type") == "application/json"
    assert server.endpoint == f"http://127.0.0.1:{server.port}"


def test_what_is_not_in_the_tree_is_404_and_other_methods_405(server: JsonHttpServer) -> None:
    status, body, _ = _call(server, "GET", "/redfish/v1/Nothing")
    assert status == 404 and body == json_error(404, "/redfish/v1/Nothing does not exist")
    assert _call(server, "GET", "/redfish/v1/../secret")[0] == 404  # never outside the root
    assert _call(server, "GET", "/other")[0] == 404  # outside the prefix
    assert _call(server, "DELETE", "/redfish/v1/Systems/1")[0] == 405


def test_a_mapping_of_documents_wins_over_the_directory(tree: Path) -> None:
    docs = {"/redfish/v1/Systems/1/": {"PowerState": "Off"}, "/extra": [1, 2]}
    with JsonHttpServer(tree, docs, prefix="/redfish/v1") as srv:
        assert _call(srv, "GET", "/redfish/v1/Systems/1")[:2] == (200, {"PowerState": "Off"})
        assert _call(srv, "GET", "/extra")[:2] == (200, [1, 2])
        srv.set_resource("/extra", None)
        assert _call(srv, "GET", "/extra")[0] == 404
    with JsonHttpServer(resources={"/": {"only": "dict"}}) as srv:
        assert _call(srv, "GET", "/")[:2] == (200, {"only": "dict"})


def test_a_post_route_changes_what_later_gets_see(server: JsonHttpServer) -> None:
    seen: list[HttpRequest] = []

    def reset(request: HttpRequest) -> HttpReply:
        seen.append(request)
        want = request.json({}).get("PowerState")
        if want not in ("On", "Off"):
            return server.reply_error(400, f"bad PowerState {want!r}")
        server.resource("/redfish/v1/Systems/1")["PowerState"] = want
        return HttpReply(204, headers={"X-Done": "yes"})

    server.route("POST", lambda p: p.endswith("/Actions/Reset"), reset)
    server.route("PATCH", "/redfish/v1/Systems/1/", lambda r: HttpReply(200, r.json()))
    status, body, resp = _call(server, "POST", "/redfish/v1/Systems/1/Actions/Reset",
                               {"PowerState": "Off"})
    assert (status, body, resp.getheader("X-Done")) == (204, None, "yes")
    assert _call(server, "GET", "/redfish/v1/Systems/1")[1] == {"PowerState": "Off"}
    assert _call(server, "POST", "/redfish/v1/Systems/1/Actions/Reset", {"PowerState": "X"}
                 )[:2] == (400, json_error(400, "bad PowerState 'X'"))
    assert _call(server, "PATCH", "/redfish/v1/Systems/1", {"a": 1})[:2] == (200, {"a": 1})
    assert seen[0].path == "/redfish/v1/Systems/1/Actions/Reset"
    assert seen[0].headers.get("content-length") == "21"  # looked up by name, any case


def test_a_guard_answers_before_every_route(tree: Path) -> None:
    good = "Basic " + base64.b64encode(b"admin:pw").decode()

    def guard(request: HttpRequest) -> HttpReply | None:
        if request.path == "/redfish/v1" or request.headers.get("Authorization") == good:
            return None
        return HttpReply(401, {"error": "who are you"})

    with JsonHttpServer(tree, prefix="/redfish/v1", guard=guard) as srv:
        srv.route("POST", "/redfish/v1/Systems/1", lambda r: HttpReply(204))
        assert _call(srv, "GET", "/redfish/v1")[0] == 200
        assert _call(srv, "GET", "/redfish/v1/Systems/1")[0] == 401
        assert _call(srv, "POST", "/redfish/v1/Systems/1")[0] == 401
        assert _call(srv, "POST", "/redfish/v1/Systems/1",
                     headers={"Authorization": good})[0] == 204


def test_every_request_is_counted_by_method_and_path(server: JsonHttpServer) -> None:
    _call(server, "GET", "/redfish/v1")
    _call(server, "GET", "/redfish/v1/Systems/1?x=1")
    _call(server, "POST", "/redfish/v1/Systems/1")
    assert server.requests == [("GET", "/redfish/v1"), ("GET", "/redfish/v1/Systems/1"),
                               ("POST", "/redfish/v1/Systems/1")]
    assert server.count() == 3
    assert server.count("GET") == 2
    assert server.count("get", "/redfish/v1/Systems/1/") == 1
    assert server.count(path="/redfish/v1/Systems/1") == 2


@pytest.mark.parametrize(("drop_with", "error"), [("close", http.client.RemoteDisconnected),
                                                  ("reset", ConnectionResetError)])
def test_drop_next_closes_without_an_answer_and_is_counted(
    tree: Path, drop_with: Any, error: type[BaseException]
) -> None:
    with JsonHttpServer(tree, prefix="/redfish/v1", drop_with=drop_with) as srv:
        srv.drop_next(1)
        with pytest.raises(error):
            _call(srv, "GET", "/redfish/v1")
        assert _call(srv, "GET", "/redfish/v1")[0] == 200
        assert srv.dropped == 1
        assert srv.requests == [("GET", "/redfish/v1"), ("GET", "/redfish/v1")]


def test_a_route_that_answers_none_drops_the_request(server: JsonHttpServer) -> None:
    server.route("*", "/redfish/v1/Systems/1", lambda r: None)
    with pytest.raises(http.client.RemoteDisconnected):
        _call(server, "POST", "/redfish/v1/Systems/1")
    assert server.dropped == 1


def test_keep_alive_holds_the_connection_then_drops_the_next_request(tree: Path) -> None:
    with JsonHttpServer(tree, prefix="/redfish/v1", keep_alive=1) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
        try:
            conn.request("GET", "/redfish/v1", headers={"Connection": "close"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.version == 11
            resp.read()
            assert not resp.will_close  # kept open although the client asked to close
            conn.request("GET", "/redfish/v1/Systems/1")
            with pytest.raises(http.client.RemoteDisconnected):
                conn.getresponse()
        finally:
            conn.close()
        assert srv.dropped == 1
        assert srv.requests == [("GET", "/redfish/v1"), ("GET", "/redfish/v1/Systems/1")]
        assert _call(srv, "GET", "/redfish/v1")[0] == 200  # a fresh connection is answered


def test_a_delay_holds_the_answer_after_the_request_was_handled(server: JsonHttpServer) -> None:
    handled: list[str] = []

    def slow(request: HttpRequest) -> HttpReply:
        handled.append(request.path)
        return HttpReply(204, delay_s=30)

    server.route("POST", "/redfish/v1/Systems/1", slow)
    with pytest.raises(TimeoutError):
        _call(server, "POST", "/redfish/v1/Systems/1", timeout=0.5)
    assert handled == ["/redfish/v1/Systems/1"]  # handled (and counted) when it arrived
    server.delay = lambda r: 30.0 if r.method == "GET" and "Systems" in r.path else 0.0
    with pytest.raises(TimeoutError):
        _call(server, "GET", "/redfish/v1/Systems/1", timeout=0.5)
    assert _call(server, "GET", "/redfish/v1")[0] == 200


def test_tls_from_make_ca_and_issue_cert(tree: Path, tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "tls", "http-test")
    cert = issue_cert(ca, tmp_path / "tls")
    with JsonHttpServer(tree, prefix="/redfish/v1", tls=cert) as srv:
        assert srv.endpoint == f"https://127.0.0.1:{srv.port}"
        # a client that connects and never completes the handshake holds up nobody else
        with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT):
            trusted = ssl.create_default_context(cafile=str(ca.cert))
            assert _call(srv, "GET", "/redfish/v1", context=trusted)[:2] == (
                200, {"Name": "root"})
        with pytest.raises(ssl.SSLCertVerificationError):
            _call(srv, "GET", "/redfish/v1", context=ssl.create_default_context())


def test_stop_closes_the_port_and_is_idempotent(tree: Path) -> None:
    srv = JsonHttpServer(tree, prefix="/redfish/v1").start()
    port = srv.port
    srv.stop()
    srv.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
