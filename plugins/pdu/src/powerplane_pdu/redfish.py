"""The Redfish driver: one rack PDU's outlets over Redfish PowerDistribution (httpx, async).

Outlets live at ``/redfish/v1/PowerEquipment/RackPDUs/{pdu}/Outlets/{id}``. A switch
reads the outlet first and refuses, with the PDU's reason, an outlet whose
``PowerControlLocked`` is true; otherwise it posts ``#Outlet.PowerControl`` with
``PowerState`` ``On`` or ``Off`` (never ``PowerCycle``: a reboot is an explicit off then
on, so each write is idempotent). A read maps ``PowerStateInTransition`` to a transition
(unknown) and takes ``PowerWatts.Reading`` as the load where the outlet is metered.

The switching POST passes :func:`powerplane.about_to_send` first (nothing leaves after
the host gave up on the call); a timeout or a dropped connection once it may have left
is :class:`~powerplane.OutcomeUnknown`, never a plain failure. The channel reads every
switched outlet back.

Failures map by :func:`powerplane_pdu.errors.map_error` (the table, and core's one rule
for HTTP status codes: 401/403 ``AuthenticationFailed``, other 4xx and 5xx
``RefusedByDevice`` with the PDU's words). ``timeouts.connect_s`` bounds connecting (TCP,
TLS, a free pooled connection), ``timeouts.read_s`` each read and write.

Auth is HTTP basic on each request or one session (``X-Auth-Token``), deleted on close.
TLS is verified against the system store, a CA bundle, or not at all, as configured.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from typing import Any

import httpx

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    PowerplaneError,
    ProtocolError,
    RefusedByDevice,
    TLSVerificationFailed,
    Unreachable,
    about_to_send,
    status_error,
)
from powerplane_pdu.config import PduSpec
from powerplane_pdu.errors import map_error
from powerplane_pdu.outlets import OutletId, OutletReading
from powerplane_pdu.profiles import OutletState

__all__ = ["RedfishPdu"]

SESSIONS = "/redfish/v1/SessionService/Sessions"


def _redfish_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or ""
    error = body.get("error", {}) if isinstance(body, dict) else {}
    infos = error.get("@Message.ExtendedInfo") or []
    for info in infos:
        if isinstance(info, dict) and info.get("Message"):
            return str(info["Message"])
    return str(error.get("message") or response.reason_phrase or "")


class RedfishPdu:
    """One rack PDU driven over Redfish."""

    def __init__(self, channel: str, feed_label: str, spec: PduSpec) -> None:
        assert spec.endpoint is not None
        self.channel = channel
        self.label = feed_label
        self.spec = spec
        self.endpoint = spec.endpoint.rstrip("/")
        self.requests = 0
        self.settle_s = spec.settle_s
        self._client: httpx.AsyncClient | None = None
        self._token: str | None = None
        self._session_uri: str | None = None
        self._login_lock = asyncio.Lock()

    def _error(self, cls: type[ChannelError], message: str) -> ChannelError:
        return cls(f"{self.label} ({self.endpoint}): {message}", channel=self.channel)

    def outlet_path(self, outlet: OutletId) -> str:
        """The outlet's resource path."""
        return f"/redfish/v1/PowerEquipment/RackPDUs/{self.spec.rack_pdu}/Outlets/{outlet}"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            verify: bool | ssl.SSLContext = True
            if isinstance(self.spec.verify, str):
                verify = ssl.create_default_context(cafile=self.spec.verify)
            else:
                verify = self.spec.verify
            auth: httpx.BasicAuth | None = None
            if self.spec.auth == "basic" and self.spec.username and self.spec.password:
                auth = httpx.BasicAuth(self.spec.username, self.spec.password.reveal())
            self._client = httpx.AsyncClient(
                base_url=self.endpoint,
                verify=verify,
                auth=auth,
                timeout=httpx.Timeout(
                    connect=self.spec.timeouts.connect_s,
                    read=self.spec.timeouts.read_s,
                    write=self.spec.timeouts.read_s,
                    pool=self.spec.timeouts.connect_s,
                ),
                headers={"Accept": "application/json"},
            )
        return self._client

    async def _send(
        self, method: str, path: str, json: Any = None, *, switching: bool = False
    ) -> httpx.Response:
        """One request; ``switching``: it changes an outlet, so it passes the send gate and
        a timeout or drop after it may have left is :class:`OutcomeUnknown`."""
        client = self._http()
        headers = {"X-Auth-Token": self._token} if self._token else {}
        if switching:
            about_to_send()  # raises (nothing sent) once the host has given up on the call
        self.requests += 1
        try:
            return await client.request(method, path, json=json, headers=headers)
        except httpx.HTTPError as exc:
            cls = map_error(exc, switching=switching)
            raise self._error(cls, self._failure(cls, method, path, exc)) from exc

    def _failure(
        self, cls: type[ChannelError], method: str, path: str, exc: httpx.HTTPError
    ) -> str:
        """The message for a request that got no HTTP answer (no secret in it)."""
        t = self.spec.timeouts
        if cls is OutcomeUnknown:
            if isinstance(exc, httpx.TimeoutException):
                return f"{method} {path}: no answer within {t.read_s:g} s"
            return f"{method} {path}: connection lost ({type(exc).__name__})"
        if cls is ChannelTimeout and isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            return f"no connection within {t.connect_s:g} s"
        if cls is ChannelTimeout:
            return f"no answer within {t.read_s:g} s"
        if cls is TLSVerificationFailed:
            return "the PDU's TLS certificate did not verify"
        if cls is Unreachable:
            return "connection failed"
        return f"HTTP failure: {type(exc).__name__}"

    async def _login(self) -> None:
        async with self._login_lock:
            if self._token is not None:
                return
            assert self.spec.username is not None and self.spec.password is not None
            body = {"UserName": self.spec.username, "Password": self.spec.password.reveal()}
            response = await self._send("POST", SESSIONS, body)
            if response.status_code >= 400:
                cls = status_error(response.status_code)
                if cls is AuthenticationFailed:
                    raise self._error(
                        cls, f"session login rejected (HTTP {response.status_code})"
                    )
                raise self._error(
                    cls,
                    f"session login failed: HTTP {response.status_code} "
                    f"{_redfish_message(response)}",
                )
            token = response.headers.get("X-Auth-Token")
            if not token:
                raise self._error(ProtocolError, "session created without an X-Auth-Token")
            self._token = token
            self._session_uri = response.headers.get("Location")

    async def _call(
        self, method: str, path: str, json: Any = None, *, switching: bool = False
    ) -> httpx.Response:
        """A request with auth; a session is (re)opened once on 401 (a 401 was not applied)."""
        session = self.spec.auth == "session" and self.spec.username is not None
        if session and self._token is None:
            await self._login()
        response = await self._send(method, path, json, switching=switching)
        if response.status_code == 401 and session:
            self._token = None
            await self._login()
            response = await self._send(method, path, json, switching=switching)
        if response.status_code >= 400:
            cls = status_error(response.status_code)
            if cls is AuthenticationFailed:
                raise self._error(
                    cls,
                    f"credentials rejected: HTTP {response.status_code} "
                    f"{_redfish_message(response)}",
                )
            raise self._error(
                cls,
                f"{method} {path}: HTTP {response.status_code} {_redfish_message(response)}",
            )
        return response

    async def _outlet(self, outlet: OutletId) -> dict[str, Any]:
        response = await self._call("GET", self.outlet_path(outlet))
        try:
            body = response.json()
        except ValueError as exc:
            raise self._error(ProtocolError, f"outlet {outlet}: body is not JSON") from exc
        if not isinstance(body, dict):
            raise self._error(ProtocolError, f"outlet {outlet}: body is not an object")
        return body

    async def _switch_one(self, outlet: OutletId, on: bool) -> None:
        body = await self._outlet(outlet)
        if body.get("PowerControlLocked"):
            raise self._error(
                RefusedByDevice,
                f"outlet {outlet} is locked against power control (PowerControlLocked)",
            )
        action = body.get("Actions", {}).get("#Outlet.PowerControl", {})
        target = action.get("target") if isinstance(action, dict) else None
        if not isinstance(target, str):
            raise self._error(
                RefusedByDevice, f"outlet {outlet} does not offer #Outlet.PowerControl"
            )
        allowed = action.get("PowerState@Redfish.AllowableValues")
        want = "On" if on else "Off"
        if isinstance(allowed, list) and want not in allowed:
            raise self._error(
                RefusedByDevice,
                f"outlet {outlet} allows PowerState {', '.join(map(str, allowed))}, not {want}",
            )
        await self._call("POST", target, {"PowerState": want}, switching=True)

    async def switch(
        self, outlets: Sequence[OutletId], on: bool
    ) -> dict[OutletId, PowerplaneError | None]:
        """Switch every outlet, concurrently; per outlet None or its error."""

        async def one(outlet: OutletId) -> PowerplaneError | None:
            try:
                await self._switch_one(outlet, on)
            except ChannelError as exc:
                return exc
            return None

        results = await asyncio.gather(*(one(o) for o in outlets))
        return dict(zip(outlets, results, strict=True))

    async def read(
        self, outlets: Sequence[OutletId]
    ) -> dict[OutletId, OutletReading | PowerplaneError]:
        """Read every outlet, concurrently."""

        async def one(outlet: OutletId) -> OutletReading | PowerplaneError:
            try:
                body = await self._outlet(outlet)
            except ChannelError as exc:
                return exc
            return self._reading(outlet, body)

        results = await asyncio.gather(*(one(o) for o in outlets))
        return dict(zip(outlets, results, strict=True))

    def _reading(self, outlet: OutletId, body: dict[str, Any]) -> OutletReading:
        locked = bool(body.get("PowerControlLocked"))
        if body.get("PowerStateInTransition"):
            return OutletReading(OutletState.TRANSITION, None, "W", locked, "in transition")
        state = {"On": OutletState.ON, "Off": OutletState.OFF}.get(
            str(body.get("PowerState")), OutletState.UNKNOWN
        )
        load: float | None = None
        watts = body.get("PowerWatts")
        if isinstance(watts, dict) and isinstance(watts.get("Reading"), int | float):
            load = float(watts["Reading"])
        detail = "" if state is not OutletState.UNKNOWN else f"PowerState {body.get('PowerState')}"
        return OutletReading(state, load, "W", locked, detail)

    async def close(self) -> None:
        """Delete the session (if any) and close the client."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if self._token and self._session_uri:
                await client.delete(self._session_uri, headers={"X-Auth-Token": self._token})
        except httpx.HTTPError:
            pass
        finally:
            self._token = None
            await client.aclose()
