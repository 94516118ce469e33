"""Outlets: how a target names them, what one reads, and what a PDU driver offers.

A target is the set of outlets that feed one machine. On the channel's own PDU::

    {outlets: [3, 4]}

and, for a machine on A and B feeds, outlets on other PDUs of the same channel
(declared under the channel's ``feeds``)::

    {outlets: [3], feeds: {b: [3]}}

Every verb acts on every outlet of the target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from powerplane import PowerplaneError
from powerplane_pdu.profiles import OutletState

__all__ = [
    "MAIN",
    "OutletReading",
    "OutletRef",
    "OutletTarget",
    "PduDriver",
    "parse_target",
]

OutletId = int | str
"""An outlet number (SNMP) or id (Redfish, e.g. ``A1``)."""

MAIN = ""
"""Feed name of the channel's own PDU."""


@dataclass(frozen=True, order=True)
class OutletRef:
    """One outlet: the feed (PDU) it is on and its number or id."""

    feed: str
    outlet: OutletId

    def label(self, channel: str) -> str:
        """``rack-a/3`` for the channel's own PDU, ``rack-a.b/3`` for feed ``b``."""
        pdu = channel if self.feed == MAIN else f"{channel}.{self.feed}"
        return f"{pdu}/{self.outlet}"


@dataclass(frozen=True)
class OutletTarget:
    """A parsed target: the outlets of one machine, in config order. Hashable."""

    outlets: tuple[OutletRef, ...]

    def by_feed(self) -> dict[str, list[OutletId]]:
        """Outlets grouped by feed, order kept."""
        groups: dict[str, list[OutletId]] = {}
        for ref in self.outlets:
            groups.setdefault(ref.feed, []).append(ref.outlet)
        return groups

    def __str__(self) -> str:
        return ", ".join(
            str(r.outlet) if r.feed == MAIN else f"{r.feed}/{r.outlet}" for r in self.outlets
        )


@dataclass(frozen=True)
class OutletReading:
    """What one outlet reads: its state, its load where metered, and whether it is locked."""

    state: OutletState
    load: float | None = None
    """Load in the driver's unit (``unit``), or None where the outlet is not metered."""
    unit: str = "W"
    locked: bool = False
    """The PDU refuses to switch this outlet (Redfish ``PowerControlLocked``)."""
    detail: str = ""


def _outlet_list(raw: Any, where: str) -> list[OutletId]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: expected a non-empty list of outlet numbers or ids")
    out: list[OutletId] = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, int | str) or item in ("", 0):
            raise ValueError(f"{where}: {item!r} is not an outlet number or id")
        if isinstance(item, int) and item < 1:
            raise ValueError(f"{where}: outlet numbers start at 1, got {item}")
        out.append(item)
    return out


def parse_target(raw: Any) -> OutletTarget:
    """Parse ``{outlets: [...], feeds: {name: [...]}}``; raise ``ValueError`` in plain words."""
    if not isinstance(raw, Mapping):
        raise ValueError("expected {outlets: [N, ...]} (and optionally feeds: {NAME: [N, ...]})")
    unknown = set(raw) - {"outlets", "feeds"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                         "expected outlets and feeds")
    refs: list[OutletRef] = []
    if "outlets" in raw:
        refs += [OutletRef(MAIN, o) for o in _outlet_list(raw["outlets"], "outlets")]
    feeds = raw.get("feeds", {})
    if not isinstance(feeds, Mapping):
        raise ValueError("feeds: expected a mapping of feed name to outlet list")
    for name, outlets in feeds.items():
        if not isinstance(name, str) or not name:
            raise ValueError("feeds: feed names are non-empty strings")
        refs += [OutletRef(name, o) for o in _outlet_list(outlets, f"feeds.{name}")]
    if not refs:
        raise ValueError("a PDU target names at least one outlet")
    if len(set(refs)) != len(refs):
        raise ValueError("an outlet is listed twice")
    return OutletTarget(tuple(refs))


class PduDriver(Protocol):
    """One PDU reached over one protocol. Every method is async and maps its errors."""

    endpoint: str
    """The device address, for per-endpoint limits and messages."""
    requests: int
    """Requests sent so far (for benchmarks)."""
    settle_s: float
    """How long a switched outlet may take to read back its new state."""

    async def switch(
        self, outlets: Sequence[OutletId], on: bool
    ) -> dict[OutletId, PowerplaneError | None]:
        """Switch every outlet on or off; per outlet, None or the error."""
        ...

    async def read(
        self, outlets: Sequence[OutletId]
    ) -> dict[OutletId, OutletReading | PowerplaneError]:
        """Read every outlet; per outlet, its reading or the error."""
        ...

    async def close(self) -> None:
        """Release sessions and sockets."""
        ...
