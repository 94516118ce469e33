"""The SNMP driver: one PDU over SNMP v1, v2c or v3 (pysnmp 7, asyncio), per a vendor profile.

A switch writes explicit on or off values (never a vendor "reboot" command), so every
write is idempotent and safe to retry; all outlets of one request go in one SET (up to
``max_varbinds``), which SNMP applies all or nothing. Each SET passes
:func:`powerplane.about_to_send` first, so none leaves after the host gave up on the call.
A read is one GET of every outlet's status object, and load object where the profile
meters outlets. (The channel reads every switched outlet back; see ``channel``.)

``profile: auto`` reads ``sysObjectID`` and looks the product up
(:data:`~powerplane_pdu.profiles.PRODUCTS`); where the product id leaves several
candidates, each candidate's status object for outlet 1 is read (GET only, never a SET)
and the one candidate that answers is used. None or several answering is a
:class:`~powerplane.ConfigError` naming the candidates: set ``profile``.

Errors map into powerplane's tree by :func:`powerplane_pdu.errors.map_error` (the table is
in that module): no response -> ``ChannelTimeout`` (SNMP v1/v2c cannot tell a wrong
community from a host that is down: both are silent), but no response to a SET ->
``OutcomeUnknown`` (the SET left and may have been applied); a v3 digest, user or
decryption failure -> ``AuthenticationFailed``, an error status in the response ->
``RefusedByDevice``, a bad address -> ``Unreachable``. No message carries a community or key.
The per-request timeout is ``timeouts.read_s`` (SNMP is UDP: there is no connection, so
``timeouts.connect_s`` does not apply), ``retries`` retransmissions after the first.

Requests go through pysnmp's command generators (``pysnmp.entity.rfc3413.cmdgen``) with
numeric var-binds, below the high-level ``get_cmd``/``set_cmd``: those resolve every
var-bind through a MIB view, which attaches a pysmi MIB compiler to the engine's MIB
builder on first use (a LALR parser built per engine, about a second), although every OID
here is numeric and no response is looked up in a MIB. Each PDU keeps an engine of its
own: the engine's local configuration holds the credentials (pysnmp keys its v3 users by
user name, and re-adds a user whose keys changed, so two channels with one user name and
different keys must not share an engine), and its one UDP socket is released by
:meth:`SnmpPdu.close`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pysnmp.entity.engine import SnmpEngine
from pysnmp.entity.rfc3413.cmdgen import GetCommandGenerator, SetCommandGenerator
from pysnmp.error import PySnmpError
from pysnmp.hlapi.v3arch.asyncio.auth import CommunityData, UsmUserData
from pysnmp.hlapi.v3arch.asyncio.lcd import CommandGeneratorLcdConfigurator
from pysnmp.hlapi.v3arch.asyncio.transport import UdpTransportTarget
from pysnmp.proto.rfc1902 import Integer32, ObjectName, OctetString
from pysnmp.proto.rfc1905 import EndOfMibView, NoSuchInstance, NoSuchObject

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    ConfigError,
    ConfigProblem,
    OutcomeUnknown,
    PowerplaneError,
    ProtocolError,
    RefusedByDevice,
    Unreachable,
    about_to_send,
)
from powerplane_pdu import usm
from powerplane_pdu.config import PduSpec
from powerplane_pdu.errors import map_error
from powerplane_pdu.outlets import OutletId, OutletReading
from powerplane_pdu.profiles import PROFILES, OutletState, Profile, detect, get_profile

__all__ = ["SYS_OBJECT_ID", "SnmpPdu", "configure", "send"]

SYS_OBJECT_ID = "1.3.6.1.2.1.1.2.0"
"""SNMPv2-MIB::sysObjectID.0, read to detect the profile."""

_LCD = CommandGeneratorLcdConfigurator()
"""Writes one PDU's credentials and address into that PDU's own engine (cached per engine)."""


async def configure(
    engine: SnmpEngine, auth: CommunityData | UsmUserData, host: str, port: int,
    timeout_s: float, retries: int, context: str = "",
) -> str:
    """Write ``auth`` and the agent at ``host:port`` into ``engine``'s own configuration;
    the target address name to :func:`send` to. Raises ``PySnmpError`` for an address
    that does not resolve."""
    transport = await UdpTransportTarget.create((host, port), timeout=timeout_s,
                                                retries=retries)
    target, _ = _LCD.configure(engine, auth, transport, context)
    return str(target)


async def send(
    engine: SnmpEngine, target: str, context: str, op: str,
    var_binds: Sequence[tuple[ObjectName, Any]],
) -> tuple[Any, Any, Any, list[tuple[Any, Any]]]:
    """One GET or SET of numeric ``var_binds`` to ``target`` (a target address name
    configured in ``engine``): ``(error indication, error status, error index, var-binds)``.

    A GET's values are None (pysnmp sends a NULL). No MIB is consulted on the way out or
    back: OIDs are sent as given, values returned as decoded. A caller that stops waiting
    (cancellation) leaves the late answer unread.
    """
    future: asyncio.Future[tuple[Any, Any, Any, list[tuple[Any, Any]]]] = (
        asyncio.get_running_loop().create_future()
    )

    def done(_engine: Any, _handle: Any, indication: Any, status: Any, index: Any,
             binds: Any, _ctx: Any) -> None:
        if not future.done():
            future.set_result((indication, status, index, list(binds or ())))

    generator = GetCommandGenerator() if op == "get" else SetCommandGenerator()
    generator.send_varbinds(engine, target, None, OctetString(context), list(var_binds), done)
    return await future


class SnmpPdu:
    """One PDU driven over SNMP with one vendor profile."""

    def __init__(self, channel: str, feed_label: str, spec: PduSpec) -> None:
        assert spec.host is not None
        self.channel = channel
        self.label = feed_label
        self.spec = spec
        self.endpoint = f"snmp://{spec.host}:{spec.port}"
        self.requests = 0
        self.settle_s = spec.settle_s
        self._profile: Profile | None = (
            None if spec.profile == "auto" else get_profile(spec.profile)
        )
        self._engine: SnmpEngine | None = None
        self._target: str | None = None
        self._auth: CommunityData | UsmUserData | None = None
        self._lock = asyncio.Lock()

    # -- plumbing ------------------------------------------------------------------------
    def _error(self, cls: type[ChannelError], message: str) -> ChannelError:
        return cls(f"{self.label} ({self.endpoint}): {message}", channel=self.channel)

    def _auth_data(self) -> CommunityData | UsmUserData:
        if self._auth is None:
            spec = self.spec
            if spec.version in ("1", "2c"):
                assert spec.community is not None
                model = 0 if spec.version == "1" else 1
                self._auth = CommunityData(spec.community.reveal(), mpModel=model)
            else:
                assert spec.user is not None
                self._auth = UsmUserData(
                    spec.user,
                    authKey=spec.auth_key.reveal() if spec.auth_key else None,
                    privKey=spec.priv_key.reveal() if spec.priv_key else None,
                    authProtocol=usm.auth_protocol(spec.auth_protocol),
                    privProtocol=usm.priv_protocol(spec.priv_protocol),
                )
        return self._auth

    async def _setup(self) -> tuple[SnmpEngine, str]:
        """This PDU's engine and the name of its target in it, made on first use."""
        async with self._lock:
            if self._engine is None:
                self._engine = SnmpEngine()
            if self._target is None:
                spec = self.spec
                assert spec.host is not None
                try:
                    self._target = await configure(
                        self._engine, self._auth_data(), spec.host, spec.port,
                        spec.timeouts.read_s, spec.retries, spec.context,
                    )
                except PySnmpError as exc:
                    raise self._error(Unreachable, "cannot resolve the address") from exc
            return self._engine, self._target

    async def _request(
        self, op: str, oids: Sequence[str], value: int | None = None
    ) -> list[Any]:
        """One GET of ``oids``, or SET of each to ``value``; the response var-binds."""
        var_binds = [
            (ObjectName(oid), None if value is None else Integer32(value)) for oid in oids
        ]
        engine, target = await self._setup()
        if op == "set":
            about_to_send()  # raises (nothing sent) once the host has given up on the call
        self.requests += 1
        try:
            indication, status, index, binds = await send(
                engine, target, self.spec.context, op, var_binds
            )
        except PySnmpError as exc:
            raise self._error(
                map_error(exc), f"SNMP {op} failed: {type(exc).__name__}"
            ) from exc
        except OSError as exc:
            raise self._error(
                map_error(exc), f"network error: {exc.strerror or exc}"
            ) from exc
        if indication:
            raise self._indication(op, indication)
        if status:  # the agent answered with an error status: it refused
            name = status.prettyPrint() if hasattr(status, "prettyPrint") else str(status)
            where = ""
            if index and 0 < int(index) <= len(oids):
                where = f" at {oids[int(index) - 1]}"
            raise self._error(RefusedByDevice, f"SNMP {op} refused: {name}{where}")
        return binds

    def _indication(self, op: str, indication: Any) -> ChannelError:
        """The error for an error indication (its class from :func:`map_error`)."""
        cls = map_error(indication, switching=op == "set")
        tries = self.spec.retries + 1
        read_s = self.spec.timeouts.read_s
        if cls is OutcomeUnknown:
            message = (f"no SNMP response to the SET after {tries} attempt(s) of "
                       f"{read_s:g} s")
        elif cls is ChannelTimeout:
            hint = (
                "wrong community, host down or SNMP disabled"
                if self.spec.version != "3"
                else "host down or SNMP disabled"
            )
            message = (f"no SNMP response to {op} after {tries} attempt(s) of "
                       f"{read_s:g} s ({hint})")
        elif cls is AuthenticationFailed:
            message = f"SNMP credentials rejected ({indication})"
        else:
            message = f"SNMP {op} failed ({indication})"
        return self._error(cls, message)

    async def profile(self) -> Profile:
        """The profile in use; with ``auto``, detected once from ``sysObjectID``."""
        if self._profile is None:
            binds = await self._request("get", [SYS_OBJECT_ID])
            value = binds[0][1] if binds else None
            if value is None or isinstance(value, NoSuchObject | NoSuchInstance | EndOfMibView):
                raise self._error(ProtocolError, "the agent has no sysObjectID; set 'profile'")
            oid = value.prettyPrint()
            product = detect(oid)
            if product is None:
                raise self._error(
                    ProtocolError, f"sysObjectID {oid} matches no PDU profile; set 'profile'"
                )
            if not product.candidates:
                raise self._config_error(
                    f"sysObjectID {oid} is {product.what}: no profile drives it"
                )
            if product.ambiguous:
                self._profile = await self._probe(oid, product.what, product.candidates)
            else:
                self._profile = get_profile(product.candidates[0])
        return self._profile

    def _config_error(self, message: str) -> ConfigError:
        feed = self.label[len(self.channel) + 1 :] if self.label != self.channel else ""
        path = f"channels.{self.channel}" + (f".feeds.{feed}" if feed else "") + ".profile"
        valid = ", ".join(sorted(PROFILES))
        return ConfigError([ConfigProblem(
            path,
            f"profile auto: {self.endpoint}: {message}; set 'profile' to one of: {valid}",
        )])

    async def _probe(self, oid: str, what: str, candidates: tuple[str, ...]) -> Profile:
        """The one candidate whose outlet-1 status object answers a GET (read-only)."""
        answered: list[Profile] = []
        for name in candidates:
            candidate = get_profile(name)
            binds = await self._request("get", [candidate.oid(candidate.state_oid, 1)])
            raw = binds[0][1] if binds else None
            if raw is None or isinstance(raw, NoSuchObject | NoSuchInstance | EndOfMibView):
                continue
            try:
                int(raw)
            except (TypeError, ValueError):
                continue
            answered.append(candidate)
        listed = ", ".join(candidates)
        if len(answered) == 1:
            return answered[0]
        if not answered:
            raise self._config_error(
                f"sysObjectID {oid} is {what}; none of the candidate profiles ({listed}) "
                "answers its outlet status object"
            )
        raise self._config_error(
            f"sysObjectID {oid} is {what}; several candidate profiles answer their outlet "
            f"status objects ({', '.join(p.name for p in answered)}), so the table that "
            "switches cannot be told"
        )

    def _chunks(self, items: Sequence[Any], per: int = 1) -> list[Sequence[Any]]:
        size = max(1, self.spec.max_varbinds // per)
        return [items[i : i + size] for i in range(0, len(items), size)]

    async def _prepare(
        self, outlets: Sequence[OutletId], result: dict[OutletId, Any]
    ) -> tuple[list[int], Profile | None]:
        """The numbered outlets and the profile; failures for the rest go into ``result``.

        Returns no profile (with every outlet's error recorded) when there is nothing to
        ask or the profile cannot be had.
        """
        numbers = [o for o in outlets if isinstance(o, int)]
        for o in outlets:
            if not isinstance(o, int):
                result[o] = self._error(ProtocolError, f"SNMP outlets are numbers, not {o!r}")
        if not numbers:
            return numbers, None
        try:
            profile = await self.profile()
        except ChannelError as exc:
            result.update(dict.fromkeys(numbers, exc))
            return numbers, None
        known: list[int] = []
        for o in numbers:
            try:
                profile.index(o)
            except ValueError as exc:
                result[o] = self._error(ProtocolError, str(exc))
            else:
                known.append(o)
        return known, profile

    # -- the driver protocol -------------------------------------------------------------
    async def switch(
        self, outlets: Sequence[OutletId], on: bool
    ) -> dict[OutletId, PowerplaneError | None]:
        """Write on or off for every outlet, one SET per ``max_varbinds`` outlets."""
        result: dict[OutletId, PowerplaneError | None] = {}
        numbers, profile = await self._prepare(outlets, result)
        if profile is None or not numbers:
            return result
        oid, value = (
            (profile.on_oid, profile.on_value) if on else (profile.off_oid, profile.off_value)
        )
        for chunk in self._chunks(numbers):
            try:
                await self._request("set", [profile.oid(oid, o) for o in chunk], value)
            except RefusedByDevice as exc:
                if len(chunk) == 1:
                    result[chunk[0]] = exc
                    continue
                # Agents differ in whether a refused SET applied its other writes, and in
                # how well they point at the culprit: write each outlet alone to learn
                # its own outcome (explicit on/off writes are idempotent).
                for o in chunk:
                    try:
                        await self._request("set", [profile.oid(oid, o)], value)
                    except ChannelError as one:
                        result[o] = one
                    else:
                        result[o] = None
            except ChannelError as exc:
                result.update(dict.fromkeys(chunk, exc))
            else:
                result.update(dict.fromkeys(chunk))
        return result

    async def read(
        self, outlets: Sequence[OutletId], *, state_only: bool = False
    ) -> dict[OutletId, OutletReading | PowerplaneError]:
        """GET every outlet's status (and load where metered, unless ``state_only``: a
        readback after a switch needs the state alone, so twice the outlets fit a GET)."""
        result: dict[OutletId, OutletReading | PowerplaneError] = {}
        numbers, profile = await self._prepare(outlets, result)
        if profile is None or not numbers:
            return result
        load_oid = None if state_only else profile.load_oid
        per = 1 if load_oid is None else 2
        for chunk in self._chunks(numbers, per):
            oids: list[str] = []
            for o in chunk:
                oids.append(profile.oid(profile.state_oid, o))
                if load_oid is not None:
                    oids.append(profile.oid(load_oid, o))
            try:
                values = await self._request("get", oids)
            except ChannelError as exc:
                result.update(dict.fromkeys(chunk, exc))
                continue
            for i, o in enumerate(chunk):
                result[o] = self._reading(profile, o, values[i * per : (i + 1) * per])
        return result

    def _reading(
        self, profile: Profile, outlet: int, binds: list[Any]
    ) -> OutletReading | PowerplaneError:
        if len(binds) < 1:
            return self._error(ProtocolError, f"outlet {outlet}: no value in the response")
        raw = binds[0][1]
        if isinstance(raw, NoSuchObject | NoSuchInstance | EndOfMibView):
            return self._error(
                ProtocolError,
                f"outlet {outlet}: no such object (no such outlet, or not a "
                f"{profile.name} PDU)",
            )
        try:
            value = int(raw)
        except (TypeError, ValueError) as exc:
            return self._error(ProtocolError, f"outlet {outlet}: status is not an integer: {exc}")
        state = profile.state_of(value)
        load: float | None = None
        if profile.load_oid is not None and len(binds) > 1:
            raw_load = binds[1][1]
            if not isinstance(raw_load, NoSuchObject | NoSuchInstance | EndOfMibView):
                try:
                    load = int(raw_load) * profile.load_scale
                except (TypeError, ValueError):
                    load = None
        detail = "" if state is not OutletState.UNKNOWN else f"status value {value}"
        return OutletReading(state, load, profile.load_unit.value, False, detail)

    async def close(self) -> None:
        """Close the engine's socket; released when this returns."""
        engine, self._engine, self._target = self._engine, None, None
        if engine is not None:
            try:
                engine.close_dispatcher()
            except Exception:
                pass
            # asyncio closes a datagram socket on the loop's next pass
            await asyncio.sleep(0)
