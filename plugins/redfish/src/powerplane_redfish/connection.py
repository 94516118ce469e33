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

One transport rule for every auth mode (:func:`tls_context`):

- TLS: both kinds verify with one :class:`ssl.SSLContext` built the same way, once per
  session. ``verify: <path>``: that CA bundle. ``verify: true``: the system CA store as
  OpenSSL finds it (:func:`ssl.create_default_context`: OpenSSL's default CA file and
  directory, which ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` replace), never the ``certifi``
  bundle; ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE`` are not read. ``verify: false``:
  nothing is verified.
- Proxies: none. ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` are not
  read (nor ``~/.netrc``): a BMC sits on a management network and is reached directly.
  The direct client never reads them; sushy's requests session has ``trust_env`` off.

When a call fails in a way that puts the connection in doubt (unreachable, timeout, TLS,
authentication, an answer that makes no sense) the session is dropped and logged out, best
effort; the next call logs in again. A refusal of one request (an HTTP 4xx/5xx with the
BMC's words) keeps it.

A refused login is not tried again: until a call of the connection has passed the BMC's
authentication, its calls go one at a time (the first alone proves the credentials or
meets the refusal), and once the BMC refused them (an
:class:`~powerplane.AuthenticationFailed`) every call of the connection fails with that
error at once, sending nothing, for :data:`REFUSED_LOGIN_S` (the host remembers it longer,
per endpoint: ``manners.lockout_s``). With basic authentication every request is a login,
so a batch discovery of 50 systems with a wrong password is one request, not 50.

sushy's re-login after a 401 on a session (the BMC expired or deleted it: sushy logs in
again and repeats the request once) is counted (:attr:`Connection.relogins`) and bounded
the same way: one re-login per :data:`RELOGIN_WINDOW_S`. A re-login the BMC refuses (the
password changed meanwhile) is that refused login: the connection, and the host for
``manners.lockout_s``, fail at once with it. A session lost again within the window is not
logged in again: the call fails with :class:`~powerplane.AuthenticationFailed` saying so,
remembered the same way (a BMC that keeps ending sessions is asked for no more of them).

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
pool). One private name is used: the connector's requests session (``Connector._session``;
sushy offers no public way to reach it or to hand it a TLS context), on which ``trust_env``
is turned off and an HTTPS adapter with the session's TLS context is mounted (requests'
public ``Session.mount`` and ``HTTPAdapter.init_poolmanager`` / ``cert_verify``, which its
documentation offers for subclassing). That relies on sushy's connector keeping those names,
methods and keyword arguments and on ``server_side_retries`` also bounding transport
attempts, so ``sushy`` is pinned to ``>=5.14,<6`` (the range tested) in this distribution's
``pyproject.toml``, and ``tests/test_redfish_sushy_shape.py`` fails on a sushy whose shape
differs.
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
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from powerplane import (
    AuthenticationFailed,
    ChannelError,
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

__all__ = ["Connection", "DirectSession", "Session", "tls_context"]

log = logging.getLogger("powerplane_redfish")

M = TypeVar("M", bound="BaseModel")

IDLE_CONNECTIONS = 4
"""Kept-alive connections the direct client keeps for reuse by GETs (the host's default
``limits.per_endpoint``)."""


REFUSED_LOGIN_S = 60.0
"""How long a connection fails at once after the BMC refused its credentials."""

RELOGIN_WINDOW_S = 60.0
"""After a re-login following a 401 on a session, how long a second one is refused."""


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
        self._proven = False
        self._proving = threading.Lock()
        """Held by the one call in flight until the credentials were proven."""
        self._refused: tuple[float, AuthenticationFailed] | None = None
        self.relogins = 0
        """How many times sushy logged in again after a 401 on a live session (each also
        counted in :attr:`logins`); at most one per :data:`RELOGIN_WINDOW_S`."""
        self._relogged: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def _open(self) -> Session:
        password = self.config.password.reveal()
        session: Session
        if self.config.auth is AuthMode.BASIC:
            session = DirectSession(self.config, password)
        else:
            session = _SushySession(self.config, password, self._relogin)
        self.logins += 1
        return session

    def _relogin(self) -> None:
        """Before sushy logs in again after a 401 on a session: count it; refuse (raise
        :class:`~powerplane.AuthenticationFailed`, nothing sent) a second one within
        :data:`RELOGIN_WINDOW_S`."""
        now = time.monotonic()
        with self._lock:
            if self._closed:
                raise ChannelError("the channel was closed; nothing was sent",
                                   channel=self.channel)
            last, self._relogged = self._relogged, now
            if last is None or now - last >= RELOGIN_WINDOW_S:
                self.relogins += 1
                self.logins += 1
                return
        raise AuthenticationFailed(
            f"the BMC ended the Redfish session again (HTTP 401) {now - last:.0f} s after a "
            f"re-login; not logging in again within {RELOGIN_WINDOW_S:g} s (a BMC that "
            "keeps ending sessions, or credentials it no longer accepts); nothing was sent",
            channel=self.channel)

    def _current(self) -> Session:
        with self._lock:
            if self._closed:
                raise ChannelError("the channel was closed; nothing was sent",
                                   channel=self.channel)
            refused = self._refused
            if refused is not None:
                if time.monotonic() - refused[0] < REFUSED_LOGIN_S:
                    raise AuthenticationFailed(
                        f"{refused[1].message} (the BMC refused these credentials; not "
                        "tried again, nothing was sent)", channel=self.channel)
                self._refused = None
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
    def use(self, target: object, action: str | None = None, *,
            proves: bool = True) -> Iterator[Session]:
        """The session for one call; library errors come out mapped.

        ``proves``: a call that ends well proves the credentials (False: a read of what the
        BMC serves to anyone, such as the service root under basic authentication).

        A mapped error other than a refusal drops the session (and logs it out).
        """
        proving = not self._proven and self._proving.acquire()
        session: Session | None = None
        try:
            session = self._current()
            yield session
            if proves:
                self._proven = True
        except Exception as exc:
            if not isinstance(exc, (*handled(), AuthenticationFailed)):
                raise
            raise self._failed(exc, session, target, action) from exc
        finally:
            if proving:
                self._proving.release()

    def post_reset(self, target: object, path: str, reset_type: str) -> None:
        """POST one ``ComputerSystem.Reset``: at most once, on a fresh connection, gated.

        :func:`powerplane.about_to_send` is passed right before the request is written (it
        raises, and nothing is sent, once the host has given up on the call). A failure
        after the request may have left is :class:`~powerplane.OutcomeUnknown`.
        """
        action = f"ResetType={reset_type}"
        session: Session | None = None
        sending = False
        proving = not self._proven and self._proving.acquire()
        try:
            session = self._current()
            about_to_send()
            sending = True
            session.post(path, {"ResetType": reset_type})
            self._proven = True
        except Exception as exc:
            if not isinstance(exc, (*handled(), AuthenticationFailed)):
                raise
            mapped = self._failed(exc, session, target, action)
            if sending and not isinstance(mapped, RefusedByDevice | OutcomeUnknown) and (
                request_may_have_left(exc)
            ):
                raise OutcomeUnknown(mapped.message, channel=self.channel,
                                     target=target) from exc
            raise mapped from exc
        finally:
            if proving:
                self._proving.release()

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
        if isinstance(mapped, AuthenticationFailed):
            with self._lock:
                if self._refused is None:
                    self._refused = (time.monotonic(), mapped)
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

    def __init__(self, config: RedfishConfig, password: str) -> None:
        url = urllib.parse.urlsplit(config.endpoint)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._verify = config.verify
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
            self._context = tls_context(self._verify)
        return self._context


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The client TLS context for ``verify``, the one rule of every auth mode.

    ``True``: the system CA store as OpenSSL finds it (:func:`ssl.create_default_context`;
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` replace OpenSSL's default file and directory). A
    path: that CA bundle (``~`` expanded; a directory: a CA path). ``False``: no
    verification.
    """
    if verify is False:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if verify is True:
        return ssl.create_default_context()
    where = Path(verify).expanduser()
    if where.is_dir():
        return ssl.create_default_context(capath=str(where))
    return ssl.create_default_context(cafile=str(where))


# -- sushy (session and auto authentication) -------------------------------------------------
class _SushySession:
    """One sushy root (a Redfish session login, or sushy's choice under ``auto``) and its
    connector; sushy is imported here, on first use. TLS is :func:`tls_context`'s, as for
    :class:`DirectSession`, and no proxy is used."""

    def __init__(self, config: RedfishConfig, password: str,
                 relogin: Callable[[], None] = lambda: None) -> None:
        import sushy
        from sushy import auth as sushy_auth

        user = config.username
        base: Any = (sushy_auth.SessionAuth if config.auth is AuthMode.SESSION
                     else sushy_auth.SessionOrBasicAuth)

        class _Counted(base):  # type: ignore[misc]
            """sushy's auth, asking ``relogin`` before each re-login after a 401 (sushy's
            connector calls ``refresh_session`` only then; raising refuses it)."""

            def refresh_session(self) -> None:
                if self.can_refresh_session():
                    relogin()
                super().refresh_session()

        auth: Any = _Counted(username=user, password=password)
        tls = tls_context(config.verify) if config.verify is not False else None
        verify = tls is not None
        conn = _connector_class()(
            config.endpoint,
            tls=tls,
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
    from requests.adapters import HTTPAdapter
    from sushy import connector as sushy_connector
    from sushy import exceptions as sushy_exc

    class _TLSAdapter(HTTPAdapter):
        """HTTPS with one given TLS context: its CAs only, never requests' own bundle."""

        def __init__(self, context: ssl.SSLContext) -> None:
            self._context = context  # before the base class builds its pool manager
            super().__init__()

        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = self._context
            super().init_poolmanager(*args, **kwargs)

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            """Verification as the context says (requests would add certifi's bundle)."""
            super().cert_verify(conn, url, False, cert)
            conn.cert_reqs = "CERT_REQUIRED"

    class _Connector(sushy_connector.Connector):  # type: ignore[misc]
        """sushy's connector, minus its retry of a POST on vendor "not ready" messages,
        plus one retry of a GET on a connection the BMC closed; verified with ``tls`` (a
        context from :func:`tls_context`; None with ``verify=False``), no proxy."""

        def __init__(self, url: str, *args: Any, tls: ssl.SSLContext | None = None,
                     **kwargs: Any) -> None:
            super().__init__(url, *args, **kwargs)
            session = self._session  # requests.Session: sushy's private name, pinned
            session.trust_env = False  # no proxy, CA bundle or netrc from the environment
            if tls is not None:
                session.mount("https://", _TLSAdapter(tls))

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
                return super().get(path, *args, **kwargs)
            except sushy_exc.ConnectionError as exc:
                if not connection_dropped(exc):
                    raise
                log.info("GET %s: the BMC closed the connection without answering; "
                         "retrying once on a fresh connection", path)
                self.forget_idle()
            return super().get(path, *args, **kwargs)

        def post(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """POST on a fresh connection, once."""
            self.forget_idle()
            return super().post(path, *args, **kwargs)

        def patch(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """PATCH on a fresh connection, once."""
            self.forget_idle()
            return super().patch(path, *args, **kwargs)

        def put(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """PUT on a fresh connection, once."""
            self.forget_idle()
            return super().put(path, *args, **kwargs)

        def delete(self, path: str = "", *args: Any, **kwargs: Any) -> Any:
            """DELETE on a fresh connection, once."""
            self.forget_idle()
            return super().delete(path, *args, **kwargs)

    return _Connector


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
