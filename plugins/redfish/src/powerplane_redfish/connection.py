"""One sushy root per BMC endpoint: created on first use, reused, logged out on close and errors.

A Redfish service allows few sessions, so a channel holds exactly one :class:`sushy.Sushy`
root (one login) for its endpoint and every node and call reuses it. When a call fails in a
way that puts the connection in doubt (unreachable, timeout, TLS, authentication, an answer
that makes no sense) the root is dropped and its session logged out, best effort; the next
call logs in again. A refusal of one request (an HTTP 4xx/5xx with the BMC's words) keeps it.

A reset is never retried: sushy's connector is built with one attempt per request (and
without its retry of a POST on vendor "not ready" messages), so a reset is sent at most once
and every failure surfaces within the configured timeouts. A GET answered 5xx is retried
once, at once.

Keep-alive: sushy asks for ``Connection: close``, but a BMC may keep the connection open
anyway and close it later without saying so; reusing it then fails with
``RemoteDisconnected`` (or a reset or broken pipe). A GET that meets that is retried once, at
once, on a fresh connection (idle pooled connections are dropped first). Every other request
(a reset, a login, a logout) is never retried and goes out on a fresh connection of its own,
so a stale kept-alive connection never fails it. A reset POST is sent right after
:func:`powerplane.about_to_send`, and if it fails after it may have left (a read timeout, a
connection closed before the answer) it is :class:`~powerplane.OutcomeUnknown`.

After :meth:`Connection.close` nothing is sent any more (a worker the host gave up on cannot
log in again or send a reset late).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import sushy
from pydantic import BaseModel
from sushy import auth as sushy_auth
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

from powerplane import (
    ChannelError,
    OutcomeUnknown,
    PowerplaneError,
    RefusedByDevice,
    about_to_send,
)
from powerplane_redfish.config import AuthMode, RedfishConfig
from powerplane_redfish.errors import (
    HANDLED,
    connection_dropped,
    map_error,
    request_may_have_left,
)
from powerplane_redfish.resources import parse

__all__ = ["Connection"]

log = logging.getLogger("powerplane_redfish")

M = TypeVar("M", bound=BaseModel)


class Connection:
    """The channel's one sushy root (and Redfish session) for its endpoint."""

    def __init__(self, channel: str, config: RedfishConfig) -> None:
        self.channel = channel
        self.config = config
        self._lock = threading.Lock()
        self._root: sushy.Sushy | None = None
        self._conn: _Connector | None = None
        self._auth: sushy_auth.AuthBase | None = None
        """The auth object the root was built with (kept here, never read back from sushy)."""
        self._closed = False
        self.logins = 0
        """How many times a root was created (a login, for a session service)."""

    # -- lifecycle ---------------------------------------------------------------------------
    def _make_auth(self, password: str) -> sushy_auth.AuthBase:
        user = self.config.username
        if self.config.auth is AuthMode.SESSION:
            return sushy_auth.SessionAuth(username=user, password=password)
        if self.config.auth is AuthMode.BASIC:
            return sushy_auth.BasicAuth(username=user, password=password)
        return sushy_auth.SessionOrBasicAuth(username=user, password=password)

    def _open(self) -> tuple[sushy.Sushy, _Connector, sushy_auth.AuthBase]:
        cfg = self.config
        password = cfg.password.reveal()
        conn = _Connector(
            cfg.endpoint,
            verify=cfg.verify,
            # One attempt per request: sushy retries transport errors (POSTs included)
            # unless told otherwise, which would break "a verb is sent at most once".
            # A GET answered 5xx is retried once, at once.
            server_side_retries=1,
            server_side_retries_delay=0,
            default_request_timeout=cfg.timeouts.read_s,
            connect_timeout=cfg.timeouts.connect_s,
        )
        auth = self._make_auth(password)
        try:
            root = sushy.Sushy(cfg.endpoint, verify=cfg.verify, auth=auth, connector=conn)
        except BaseException:
            _logout(auth)
            conn.close()
            raise
        self.logins += 1
        return root, conn, auth

    def _current(self) -> tuple[sushy.Sushy, _Connector]:
        with self._lock:
            if self._closed:
                raise ChannelError("the channel was closed; nothing was sent",
                                   channel=self.channel)
            if self._root is None or self._conn is None:
                self._root, self._conn, self._auth = self._open()
            return self._root, self._conn

    def drop(self, root: sushy.Sushy | None = None) -> None:
        """Log out and forget the root (only if it is still ``root``, when given)."""
        with self._lock:
            if self._root is None or (root is not None and root is not self._root):
                return
            auth, conn = self._auth, self._conn
            self._root = self._conn = self._auth = None
        _logout(auth)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Log out the session (if any) and close the HTTP session; send nothing after."""
        with self._lock:
            self._closed = True
        self.drop()

    # -- calls -------------------------------------------------------------------------------
    @contextmanager
    def use(
        self, target: object, action: str | None = None
    ) -> Iterator[tuple[sushy.Sushy, sushy_connector.Connector]]:
        """The root and connector for one call; library errors come out mapped.

        A mapped error other than a refusal drops the root (and logs its session out).
        """
        root: sushy.Sushy | None = None
        try:
            root, conn = self._current()
            yield root, conn
        except HANDLED as exc:
            raise self._failed(exc, root, target, action) from exc

    def post_reset(self, target: object, path: str, reset_type: str) -> None:
        """POST one ``ComputerSystem.Reset``: at most once, on a fresh connection, gated.

        :func:`powerplane.about_to_send` is passed right before the request is written (it
        raises, and nothing is sent, once the host has given up on the call). A failure
        after the request may have left is :class:`~powerplane.OutcomeUnknown`.
        """
        action = f"ResetType={reset_type}"
        root: sushy.Sushy | None = None
        sending = False
        try:
            root, conn = self._current()
            about_to_send()
            sending = True
            conn.post(path, data={"ResetType": reset_type})
        except HANDLED as exc:
            mapped = self._failed(exc, root, target, action)
            if sending and not isinstance(mapped, RefusedByDevice | OutcomeUnknown) and (
                request_may_have_left(exc)
            ):
                raise OutcomeUnknown(mapped.message, channel=self.channel,
                                     target=target) from exc
            raise mapped from exc

    def _failed(
        self, exc: BaseException, root: sushy.Sushy | None, target: object, action: str | None
    ) -> ChannelError:
        """``exc`` mapped; the root dropped (and its session logged out) unless a refusal."""
        mapped = map_error(
            exc,
            channel=self.channel,
            target=target,
            action=action,
            verify=self.config.verify,
            secrets=self._secrets(),
        )
        if not isinstance(mapped, RefusedByDevice):
            self.drop(root)
        return mapped

    def _secrets(self) -> tuple[str, ...]:
        try:
            return (self.config.password.reveal(),)
        except PowerplaneError:
            return ()

    def get_json(self, conn: sushy_connector.Connector, path: str) -> dict[str, Any]:
        """GET ``path`` and return its JSON object."""
        body = conn.get(path).json()
        if not isinstance(body, dict):
            raise ValueError(f"{path} is not a JSON object")
        return body

    def get_resource(self, conn: sushy_connector.Connector, path: str, model: type[M]) -> M:
        """GET ``path`` as the declared resource ``model``.

        A body that does not fit raises :class:`~powerplane_redfish.resources.InvalidResource`
        (a ``ValueError``: inside :meth:`use` it comes out as a ProtocolError, and the root
        is dropped, as after any answer that makes no sense).
        """
        return parse(model, self.get_json(conn, path), path)


class _Connector(sushy_connector.Connector):  # type: ignore[misc]
    """sushy's connector, minus its retry of a POST on vendor "not ready" messages, plus one
    retry of a GET on a connection the BMC closed."""

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


def _logout(auth: object) -> None:
    """Log a Redfish session out, best effort (a session-less auth does nothing)."""
    if not isinstance(auth, sushy_auth.AuthBase):
        return
    try:
        auth.close()
    except HANDLED as exc:
        log.warning("logging out of the Redfish session failed: %s", type(exc).__name__)
    finally:
        # Never try again from sushy's __del__ (at garbage collection, in any thread).
        if isinstance(auth, sushy_auth.SessionAuth) and auth.can_refresh_session():
            auth.reset_session_attrs()
