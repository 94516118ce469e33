"""The ``openstack`` channel: OpenStack Compute (Nova) through httpx, async.

=============  =====================================================  ==========
verb           request                                                graceful
=============  =====================================================  ==========
reboot         ``POST /servers/{id}/action {"reboot": {"type": ...}}`` SOFT: yes
shutdown       ``POST /servers/{id}/action {"os-stop": null}``         yes
power-on       ``POST /servers/{id}/action {"os-start": null}``        no
terminate      ``DELETE /servers/{id}``                                yes
readback       ``GET /servers/{id}``                                   --
=============  =====================================================  ==========

Tokens come from :mod:`powerplane_cloud.keystone`; a ``401`` renews the token once
and repeats the request once (a rejected request was not carried out). A rate
limited (``429``/``413``) GET or DELETE is retried with backoff; an action never is.
Every action POST and DELETE that leaves passes :func:`powerplane.about_to_send` right
before; a timeout or a dropped connection after that is :class:`~powerplane.OutcomeUnknown`
(:mod:`powerplane_cloud.errors`).

No boot marker: :meth:`OpenStackChannel.boot_marker` is always None (why: its docstring).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from typing import Any

import httpx

from powerplane import (
    Acceptance,
    Backoff,
    CapabilitySet,
    ConfigError,
    ProtocolError,
    Reading,
    Source,
    Verb,
    about_to_send,
    require,
)
from powerplane_cloud.config import OpenStackConfig
from powerplane_cloud.errors import THROTTLE_STATUSES, map_status, map_transport
from powerplane_cloud.keystone import Keystone

__all__ = ["POWER_STATES", "OpenStackChannel", "reading_for_server"]

POWER_STATES = {0: "NOSTATE", 1: "RUNNING", 3: "PAUSED", 4: "SHUTDOWN", 6: "CRASHED",
                7: "SUSPENDED"}
"""Nova's ``OS-EXT-STS:power_state`` values and their names."""

_GONE = frozenset({"DELETED", "SOFT_DELETED"})


def reading_for_server(server: dict[str, Any]) -> Reading:
    """The reading for a Compute ``server`` object."""
    status = str(server.get("status", ""))
    task = server.get("OS-EXT-STS:task_state")
    power = server.get("OS-EXT-STS:power_state")
    if task:
        return Reading.unknown(f"task in progress ({task}), status {status}")
    if status in _GONE:
        return Reading.off(status.lower())
    if isinstance(power, int):
        if power == 1:
            return Reading.on()
        if power == 4:
            return Reading.off()
        name = POWER_STATES.get(power, str(power))
        return Reading.unknown(f"power state {name}, status {status}")
    if status == "ACTIVE":
        return Reading.on()
    if status == "SHUTOFF":
        return Reading.off()
    return Reading.unknown(f"status {status or 'missing'}")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


class OpenStackChannel:
    """One project of one OpenStack cloud."""

    def __init__(self, name: str, config: OpenStackConfig) -> None:
        self.name = name
        self.config = config
        self.keystone = Keystone(config, name)
        self._client: httpx.AsyncClient | None = None
        self._backoff = Backoff(config.backoff_base_s, config.backoff_max_s,
                                retries=config.throttle_retries)
        soft = config.reboot_type == "SOFT"
        self._caps = CapabilitySet.of(
            graceful=[Verb.SHUTDOWN, Verb.TERMINATE, *([Verb.REBOOT] if soft else [])],
            hard=[Verb.POWER_ON, *([] if soft else [Verb.REBOOT])],
            source=Source.INTRINSIC,
            detail=f"OpenStack Compute API: reboot {config.reboot_type}, os-stop, os-start, "
            "DELETE",
        )
        self.requests: Counter[str] = Counter()
        """Compute API requests sent, by what they were (``os-stop``, ``GET server``, ...)."""

    def endpoint(self, target: str) -> str:
        """The API every call of this channel reaches."""
        return self.config.compute_url or self.config.identity_url

    def _verify(self) -> bool | ssl.SSLContext:
        verify = self.config.verify
        if isinstance(verify, str):
            try:
                return ssl.create_default_context(cafile=verify)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"channels.{self.name}.verify: cannot load the CA bundle "
                                  f"({type(exc).__name__})") from exc
        return verify

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                verify=self._verify(),
                timeout=httpx.Timeout(self.config.timeouts.read_s,
                                      connect=self.config.timeouts.connect_s),
                headers={"Accept": "application/json", "User-Agent": "powerplane-cloud"},
            )
        return self._client

    async def _request(
        self, method: str, target: str, what: str, *, path: str = "",
        body: Any = None, retry: bool = False, verb: bool = False,
    ) -> httpx.Response:
        """One Compute request (repeated once on a 401 with a new token, and on a rate limit
        when ``retry``). ``verb``: state-changing; each sending passes
        :func:`powerplane.about_to_send` right before it leaves, and a timeout or dropped
        connection after that is :class:`~powerplane.OutcomeUnknown`."""
        client = self._http()
        token = await self.keystone.token(client)
        renewed = False
        attempt = 0
        while True:
            if verb:
                about_to_send()
            self.requests[what] += 1
            try:
                response = await client.request(
                    method,
                    f"{token.compute_url}/servers/{target}{path}",
                    json=body,
                    headers={"X-Auth-Token": token.value},
                )
            except httpx.HTTPError as exc:
                raise map_transport(exc, channel=self.name, target=target, what=what,
                                    sent=verb) from exc
            status = response.status_code
            if status == 401 and not renewed:
                token = await self.keystone.token(client, stale=token)
                renewed = True
                continue
            if status in THROTTLE_STATUSES and retry and attempt < self._backoff.retries:
                await asyncio.sleep(self._backoff.delay(attempt, _retry_after(response)))
                attempt += 1
                continue
            if status >= 400:
                raise map_status(response, channel=self.name, target=target, what=what)
            return response

    async def _server(self, target: str) -> dict[str, Any]:
        response = await self._request("GET", target, "GET server", retry=True)
        try:
            server = response.json()["server"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError("GET server: the answer has no server object",
                                channel=self.name, target=target) from exc
        if not isinstance(server, dict):
            raise ProtocolError("GET server: the answer has no server object",
                                channel=self.name, target=target)
        return server

    async def _action(self, target: str, what: str, body: dict[str, Any]) -> Acceptance:
        response = await self._request("POST", target, what, path="/action", body=body,
                                       verb=True)
        return Acceptance(f"{what} accepted ({response.status_code})")

    # -- the channel protocol ----------------------------------------------------------------
    async def capabilities(self, target: str) -> CapabilitySet:
        """The API's verbs, once the server is found; nothing for a deleted one."""
        server = await self._server(target)
        status = str(server.get("status", ""))
        if status in _GONE:
            return CapabilitySet.empty(f"server {target} is {status}")
        return self._caps

    async def reboot(self, target: str) -> Acceptance:
        require(self._caps, Verb.REBOOT, self.name)
        kind = self.config.reboot_type
        return await self._action(target, f"reboot {kind}", {"reboot": {"type": kind}})

    async def shutdown(self, target: str) -> Acceptance:
        require(self._caps, Verb.SHUTDOWN, self.name)
        return await self._action(target, "os-stop", {"os-stop": None})

    async def power_on(self, target: str) -> Acceptance:
        require(self._caps, Verb.POWER_ON, self.name)
        return await self._action(target, "os-start", {"os-start": None})

    async def terminate(self, target: str) -> Acceptance:
        require(self._caps, Verb.TERMINATE, self.name)
        response = await self._request("DELETE", target, "DELETE server", retry=True,
                                       verb=True)
        return Acceptance(f"delete accepted ({response.status_code})")

    async def read_power_state(self, target: str) -> Reading:
        return reading_for_server(await self._server(target))

    async def boot_marker(self, target: str) -> str | None:
        """None, always, without a request: the server object shows no value that changes
        per boot.

        ``OS-SRV-USG:launched_at`` is set by Nova's compute manager when the guest is
        spawned (build, rebuild, rescue, resize and its revert, unshelve), never on a
        SOFT or HARD reboot nor on ``os-start``; ``updated`` moves on any change of the
        server record, booted or not; ``OS-EXT-STS:power_state`` is a state, not a boot.
        A marker that stays the same across a reboot that happened would be read as "not
        rebooted" and the reboot sent again, so there is none. Evidence of a reboot must
        come from another source (the node's cluster boot id) or a person.
        """
        return None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
