"""One session per BMC endpoint: created on first use, reused, logged out on close and errors.

A Redfish service allows few sessions, so a channel holds exactly one session object for its
endpoint and every node and call reuses it. Two kinds, by ``auth``:

- ``basic``: the direct client (:class:`DirectSession`), a small HTTP/1.1 client on the
  standard library's ``http.client`` and ``ssl``: every request carries the basic
  credentials, so there is nothing to log in or out and nothing is read before the first
  call (not even the service root). It makes the few requests the channel makes (GET of a
  resource as JSON, POST of a reset) and imports neither sushy nor requests, so a one-shot
  command pays for neither. No redirect is followed.
- ``session`` and ``auto``: one :class:`sushy.Sushy` root (one Redfish session login,
  re-authenticated by sushy when the service expires it; under ``auto`` sushy's fallback to
  basic authentication where the service offers no session), imported only then.

One transport rule for every auth mode (:func:`ca_bundle`, :data:`NO_PROXIES`):

- TLS: ``verify: <path>`` verifies against that CA bundle; ``verify: true`` against the
  system CA store as OpenSSL finds it (the file ``SSL_CERT_FILE`` names, else OpenSSL's
  default CA file; else the directory ``SSL_CERT_DIR`` names, else OpenSSL's default
  directory), never the ``certifi`` bundle, and ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``
  are not read; ``verify: false`` verifies nothing. Both kinds are handed the same resolved
  location (sushy as its ``verify`` path), so they trust exactly the same CAs.
- Proxies: none. ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` are not
  read: a BMC sits on a management network and is reached directly (the direct client
  never reads them; every request through sushy passes requests an explicit "no proxy").

When a call fails in a way that puts the connection in doubt (unreachable, timeout, TLS,
authentication, an answer that makes no sense) the session is dropped and logged out, best
effort; the next call logs in again. A refusal of one request (an HTTP 4xx/5xx with the
BMC's words) keeps it.

A reset is never retried, by either kind: one attempt per request, so a reset is sent at
most once and every failure surfaces within the configured timeouts. A GET answered 5xx is
retried once, at once.

Keep-alive: a BMC may keep a connection open and close it later without saying so;
reusing it then fails with ``RemoteDisconnected`` (or a reset or broken pipe). A GET that
meets that is retried once, at once, on a fresh connection (idle pooled connections are
dropped first). Every other request (a reset, a login, a logout) is never retried and goes
out on a fresh connection of its own, so a stale kept-alive connection never fails it. A
reset POST is sent right after :func:`powerplane.about_to_send`, and if it fails after it
may have left (a read timeout, a connection closed before the answer) it is
:class:`~powerplane.OutcomeUnknown`.

After :meth:`Connection.close` nothing is sent any more (a worker the host gave up on cannot
log in again or send a reset late).

sushy's connector, and why it is subclassed (``_Connector``): by default sushy retries a
request that failed in transport up to three times (a POST included) and retries a POST
answered with a vendor's "not ready" message (iDRAC ``SYS518``, iLO
``InvalidOperationForSystemState``), which would send a reset twice. The connector is built
with its public arguments (``server_side_retries=1``: one transport attempt, one retry of a
GET answered 5xx; ``server_side_retries_delay=0``; ``default_request_timeout`` and
``connect_timeout``), and its public methods are overridden: ``check_retry_on_exception``
answers never, ``get`` retries once on a connection the BMC dropped, ``post``/``patch``/
``put``/``delete`` go out on a fresh connection (``close()``, sushy's own, drops the idle
pool), and every method passes :data:`NO_PROXIES`. That relies on sushy's connector
methods keeping their names and keyword arguments and on ``server_side_retries`` also
bounding transport attempts, so ``sushy`` is pinned to ``>=5.14,<6`` (the range tested) in
this distribution's ``pyproject.toml``, and ``tests/test_redfish_sushy_shape.py`` fails on
a sushy whose shape differs.
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from powerplane import (
    ChannelError,
    ConfigError,
    OutcomeUnknown,
    PowerplaneError,
    RefusedByDevice,
    about_to_send,
)
from powerplane_redfish.config import AuthMode, RedfishConfig
from powerplane_redfish.errors import (
    ConnectFailed,
    HandshakeFailed,
    HTTPStatusError,
    connection_dropped,
    handled,
    map_error,
    request_may_have_left,
)
from powerplane_redfish.resources import parse

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["NO_PROXIES", "Connection", "DirectSession", "Session", "ca_bundle"]

log = logging.getLogger("powerplane_redfish")

M = TypeVar("M", bound="BaseModel")

IDLE_CONNECTIONS = 4
"""Kept-alive connections the direct client keeps for reuse by GETs (the host's default
``limits.per_endpoint``)."""


class Session(Protocol):
    """What a channel call uses: one logged-in Redfish service."""

    def get_json(self, path: str) -> dict[str, Any]:
        """GET ``path`` and return its JSON object (a ValueError if it is not one)."""
        ...

    def post(self, path: str, body: dict[str, Any]) -> None:
        """POST ``body`` as JSON to ``path``, once, on a fresh connection."""
        ...

    def service_root(self) -> dict[str, Any]:
        """The service root (``/redfish/v1/``), read at most once per session."""
        ...

    def close(self) -> None:
        """Log out (best effort) and close the connections."""
        ...


class Connection:
    """The channel's one session (a Redfish session, or basic credentials) for its endpoint."""

    def __init__(self, channel: str, config: RedfishConfig) -> None:
        self.channel = channel
        self.config = config
        self._lock = threading.Lock()
        self._session: Session | None = None
        self._closed = False
        self.logins = 0
        """How many times a session was created (a login, for a session service)."""

    # -- lifecycle ---------------------------------------------------------------------------
    def _open(self) -> Session:
        password = self.config.password.reveal()
        ca = ca_bundle(self.config.verify, self.channel)
        session: Session
        if self.config.auth is AuthMode.BASIC:
            session = DirectSession(self.config, password, ca)
        else:
            session = _SushySession(self.config, password, ca)
        self.logins += 1
        return session

    def _current(self) -> Session:
        with self._lock:
            if self._closed:
                raise ChannelError("the channel was closed; nothing was sent",
                                   channel=self.channel)
            if self._session is None:
                self._session = self._open()
            return self._session

    def drop(self, session: Session | None = None) -> None:
        """Log out and forget the session (only if it is still ``session``, when given)."""
        with self._lock:
            current = self._session
            if current is None or (session is not None and session is not current):
                return
            self._session = None
        current.close()

    def close(self) -> None:
        """Log out the session (if any) and close the connections; send nothing after."""
        with self._lock:
            self._closed = True
        self.drop()

    # -- calls -------------------------------------------------------------------------------
    @contextmanager
    def use(self, target: object, action: str | None = None) -> Iterator[Session]:
        """The session for one call; library errors come out mapped.

        A mapped error other than a refusal drops the session (and logs it out).
        """
        session: Session | None = None
        try:
            session = self._current()
            yield session
        except Exception as exc:
            if not isinstance(exc, handled()):
                raise
            raise self._failed(exc, session, target, action) from exc

    def post_reset(self, target: object, path: str, reset_type: str) -> None:
        """POST one ``ComputerSystem.Reset``: at most once, on a fresh connection, gated.

        :func:`powerplane.about_to_send` is passed right before the request is written (it
        raises, and nothing is sent, once the host has given up on the call). A failure
        after the request may have left is :class:`~powerplane.OutcomeUnknown`.
        """
        action = f"ResetType={reset_type}"
        session: Session | None = None
        sending = False
        try:
            session = self._current()
            about_to_send()
            sending = True
            session.post(path, {"ResetType": reset_type})
        except Exception as exc:
            if not isinstance(exc, handled()):
                raise
            mapped = self._failed(exc, session, target, action)
            if sending and not isinstance(mapped, RefusedByDevice | OutcomeUnknown) and (
                request_may_have_left(exc)
            ):
                raise OutcomeUnknown(mapped.message, channel=self.channel,
                                     target=target) from exc
            raise mapped from exc

    def _failed(
        self, exc: BaseException, session: Session | None, target: object, action: str | None
    ) -> ChannelError:
        """``exc`` mapped; the session dropped (and logged out) unless a refusal."""
        mapped = map_error(
            exc,
            channel=self.channel,
            target=target,
            action=action,
            verify=self.config.verify,
            secrets=self._secrets(),
        )
        if not isinstance(mapped, RefusedByDevice) and session is not None:
            self.drop(session)
        return mapped

    def _secrets(self) -> tuple[str, ...]:
        try:
            return (self.config.password.reveal(),)
        except PowerplaneError:
            return ()

    def get_resource(self, session: Session, path: str, model: type[M]) -> M:
        """GET ``path`` as the declared resource ``model``.

        A body that does not fit raises :class:`~powerplane_redfish.resources.InvalidResource`
        (a ``ValueError``: inside :meth:`use` it comes out as a ProtocolError, and the session
        is dropped, as after any answer that makes no sense).
        """
        return parse(model, session.get_json(path), path)


def _json_object(body: Any, path: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError(f"{path} is not a JSON object")
    return body


# -- the direct client (basic authentication) ------------------------------------------------
class DirectSession:
    """Basic authentication over ``http.client``: GET as JSON, POST once, nothing else.

    Timeouts: ``timeouts.connect_s`` bounds the TCP connect and the TLS handshake,
    ``timeouts.read_s`` every read once the request was written. A failure before the
    request was written is :class:`~powerplane_redfish.errors.ConnectFailed` or
    :class:`~powerplane_redfish.errors.HandshakeFailed` (nothing was sent); an answer other
    than 2xx is :class:`~powerplane_redfish.errors.HTTPStatusError`.
    """

    def __init__(self, config: RedfishConfig, password: str, ca: str | None = None) -> None:
        """``ca``: the CA bundle file or directory to verify against (:func:`ca_bundle`);
        None verifies nothing."""
        url = urllib.parse.urlsplit(config.endpoint)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._ca = ca
        self._connect_s = config.timeouts.connect_s
        self._read_s = config.timeouts.read_s
        token = base64.b64encode(f"{config.username}:{password}".encode()).decode("ascii")
        self._headers = {
            "Authorization": f"Basic {token}",
            "Accept": "application/json",
            "OData-Version": "4.0",
            "User-Agent": "powerplane-redfish",
        }
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._context: ssl.SSLContext | None = None
        self._root: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"DirectSession({self._host}:{self._port})"  # never the credentials

    # -- the session protocol ----------------------------------------------------------------
    def get_json(self, path: str) -> dict[str, Any]:
        """GET ``path``: once more at once if answered 5xx or dropped on a kept-alive
        connection; its body as a JSON object."""
        status, body = self._get(path)
        if status >= 500:
            log.info("GET %s: answered %d; retrying once", path, status)
            status, body = self._get(path)
        if not 200 <= status < 300:
            raise HTTPStatusError("GET", path, status, body)
        return _json_object(json.loads(body), path)

    def post(self, path: str, body: dict[str, Any]) -> None:
        """POST on a fresh connection, once; any 2xx is accepted."""
        status, answer = self._exchange("POST", path, json.dumps(body).encode(), reuse=False)
        if not 200 <= status < 300:
            raise HTTPStatusError("POST", path, status, answer)

    def service_root(self) -> dict[str, Any]:
        """``GET /redfish/v1/``, once."""
        if self._root is None:
            self._root = self.get_json("/redfish/v1/")
        return self._root

    def close(self) -> None:
        """Close the idle connections (basic authentication has no session to log out)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- plumbing ----------------------------------------------------------------------------
    def _get(self, path: str) -> tuple[int, bytes]:
        try:
            return self._exchange("GET", path, None, reuse=True)
        except (ConnectFailed, HandshakeFailed):
            raise
        except OSError as exc:
            if not connection_dropped(exc):
                raise
            log.info("GET %s: the BMC closed the connection without answering; "
                     "retrying once on a fresh connection", path)
            self.close()
        return self._exchange("GET", path, None, reuse=False)

    def _exchange(
        self, method: str, path: str, body: bytes | None, *, reuse: bool
    ) -> tuple[int, bytes]:
        """One request and its whole answer. ``reuse``: on an idle kept-alive connection if
        there is one, given back after; else on a fresh connection, closed after."""
        conn = self._take_idle() if reuse else None
        if conn is None:
            conn = self._connect()
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        if not reuse:
            headers["Connection"] = "close"
        try:
            conn.request(method, self._prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read()
        except BaseException:
            conn.close()
            raise
        if reuse and not response.will_close:
            self._give_back(conn)
        else:
            conn.close()
        return response.status, answer

    def _take_idle(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        """A new connection, TCP and TLS set up within ``connect_s``; reads then bounded by
        ``read_s``."""
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._connect_s)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {self._host}:{self._port}") from exc
        if self._https:
            try:
                sock = self._tls().wrap_socket(sock, server_hostname=self._host)
            except OSError as exc:  # ssl.SSLError is an OSError
                sock.close()
                raise HandshakeFailed(f"TLS with {self._host}:{self._port} failed") from exc
        sock.settimeout(self._read_s)
        conn = http.client.HTTPConnection(self._host, self._port, timeout=self._read_s)
        conn.sock = sock  # set up here, so http.client never connects on its own
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = _tls_context(self._ca)
        return self._context


NO_PROXIES: dict[str, str | None] = {"http": None, "https": None, "all": None}
"""What every request through sushy passes as requests' ``proxies``: none, whatever the
environment says (requests drops the keys set to None after merging the environment's in,
so no proxy is selected). A copy per request: requests adds to the dict it is given."""


def ca_bundle(verify: bool | str, channel: str = "") -> str | None:
    """The CA bundle file (or directory) a ``verify`` value means, for every auth mode.

    A path: that bundle (``~`` expanded). ``True``: the system CA store as OpenSSL finds it
    (:func:`ssl.get_default_verify_paths`: ``SSL_CERT_FILE`` or OpenSSL's default CA file,
    else ``SSL_CERT_DIR`` or its default directory); a system without one is a
    :class:`~powerplane.ConfigError` naming the key. ``False``: None (nothing verified).
    """
    if verify is False:
        return None
    if verify is not True:
        return str(Path(verify).expanduser())
    paths = ssl.get_default_verify_paths()
    found = paths.cafile or paths.capath
    if not found:
        where = f"channels.{channel}.verify" if channel else "verify"
        raise ConfigError(
            f"{where}: true means the system CA store, and none was found (no "
            f"{paths.openssl_cafile_env} file, no {paths.openssl_cafile}, no "
            f"{paths.openssl_capath_env} directory, no {paths.openssl_capath}); "
            "set verify to the path of a CA bundle")
    return found


def _tls_context(ca: str | None) -> ssl.SSLContext:
    """The client TLS context verifying against ``ca`` (a bundle file or a CA directory);
    None: no verification."""
    if ca is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if Path(ca).is_dir():
        return ssl.create_default_context(capath=ca)
    return ssl.create_default_context(cafile=ca)


# -- sushy (session and auto authentication) -------------------------------------------------
class _SushySession:
    """One sushy root (a Redfish session login, or sushy's choice under ``auto``) and its
    connector; sushy is imported here, on first use. ``ca``: as for :class:`DirectSession`
    (handed to sushy as its ``verify`` path, so requests reads no CA variable of its own)."""

    def __init__(self, config: RedfishConfig, password: str, ca: str | None = None) -> None:
        import sushy
        from sushy import auth as sushy_auth

        user = config.username
        auth: Any
        if config.auth is AuthMode.SESSION:
            auth = sushy_auth.SessionAuth(username=user, password=password)
        else:
            auth = sushy_auth.SessionOrBasicAuth(username=user, password=password)
        verify: bool | str = ca if ca is not None else False
        conn = _connector_class()(
            config.endpoint,
            verify=verify,
            # One attempt per request: sushy retries transport errors (POSTs included)
            # unless told otherwise, which would break "a verb is sent at most once".
            # A GET answered 5xx is retried once, at once.
            server_side_retries=1,
            server_side_retries_delay=0,
            default_request_timeout=config.timeouts.read_s,
            connect_timeout=config.timeouts.connect_s,
        )
        try:
            root = sushy.Sushy(config.endpoint, verify=verify, auth=auth, connector=conn)
        except BaseException:
            _logout(auth)
            conn.close()
            raise
        self._root, self._conn, self._auth = root, conn, auth
        """The auth object the root was built with (kept here, never read back from sushy)."""

    def get_json(self, path: str) -> dict[str, Any]:
        return _json_object(self._conn.get(path).json(), path)

    def post(self, path: str, body: dict[str, Any]) -> None:
        self._conn.post(path, data=body)

    def service_root(self) -> dict[str, Any]:
        body = self._root.json
        return body if isinstance(body, dict) else {}

    def close(self) -> None:
        _logout(self._auth)
        self._conn.close()


@functools.cache
def _connector_class() -> type[Any]:
    """:class:`_Connector`, defined once sushy is imported."""
    from sushy import connector as sushy_connector
    from sushy import exceptions as sushy_exc

    class _Connector(sushy_connector.Connector):  # type: ignore[misc]
        """sushy's connector, minus its retry of a POST on vendor "not ready" messages,
        plus one retry of a GET on a connection the BMC closed; no proxy on any request."""

        def check_retry_on_exception(self, exception_msg: object) -> bool:
            """Never: a refused reset is reported, not sent again."""
            return False

        def forget_idle(self) -> None:
            """Close the idle pooled connections, so the next request opens a fresh one.

            sushy's public :meth:`close` closes the HTTP session's connection pools; the
            session stays usable and opens fresh connections. A request in flight in another
            thread keeps its connection (it is closed, not pooled, when that request ends).
            """
            self.close()

        def get(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """GET; once more on a fresh connection when the BMC closed or reset the first."""
            try:
                return super().get(path, *args, **_direct(kwargs))
            except sushy_exc.ConnectionError as exc:
                if not connection_dropped(exc):
                    raise
                log.info("GET %s: the BMC closed the connection without answering; "
                         "retrying once on a fresh connection", path)
                self.forget_idle()
            return super().get(path, *args, **_direct(kwargs))

        def post(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """POST on a fresh connection, once."""
            self.forget_idle()
            return super().post(path, *args, **_direct(kwargs))

        def patch(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """PATCH on a fresh connection, once."""
            self.forget_idle()
            return super().patch(path, *args, **_direct(kwargs))

        def put(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """PUT on a fresh connection, once."""
            self.forget_idle()
            return super().put(path, *args, **_direct(kwargs))

        def delete(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """DELETE on a fresh connection, once."""
            self.forget_idle()
            return super().delete(path, *args, **_direct(kwargs))

    return _Connector


def _direct(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A request's keyword arguments for sushy, with no proxy (:data:`NO_PROXIES`)."""
    return {**kwargs, "proxies": dict(NO_PROXIES)}


def _logout(auth: object) -> None:
    """Log a Redfish session out, best effort (a session-less auth does nothing)."""
    from sushy import auth as sushy_auth

    if not isinstance(auth, sushy_auth.AuthBase):
        return
    try:
        auth.close()
    except Exception as exc:
        if not isinstance(exc, handled()):
            raise
        log.warning("logging out of the Redfish session failed: %s", type(exc).__name__)
    finally:
        # Never try again from sushy's __del__ (at garbage collection, in any thread).
        if isinstance(auth, sushy_auth.SessionAuth) and auth.can_refresh_session():
            auth.reset_session_attrs()
