"""Verbs and capability sets: what a channel advertises for a target.

A capability set is plain, immutable data. It may advertise shutdown without
power-on (the Talos channel does): whether a shutdown is *offered* is decided by
the recoverability rule in :mod:`powerplane.recovery`, never by a channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

__all__ = ["CapabilitySet", "Source", "Verb"]


class Verb(str, Enum):
    """A power verb a channel may advertise and the host may offer."""

    REBOOT = "reboot"
    """Restart the machine: a sequenced OS restart (graceful) or a power cycle (hard)."""
    SHUTDOWN = "shutdown"
    """Take the machine down: a sequenced OS shutdown (graceful) or a power cut (hard)."""
    POWER_ON = "power-on"
    """Apply power / start the machine."""
    TERMINATE = "terminate"
    """Destroy the instance (cloud); offered only for nodes classified replaceable."""

    def __str__(self) -> str:
        return self.value

    # hash as the string it equals (Enum's default hashes the name, in Python)
    __hash__ = str.__hash__

    @property
    def method(self) -> str:
        """The channel method that carries this verb (``power-on`` -> ``power_on``)."""
        return self.value.replace("-", "_")

    @classmethod
    def parse(cls, text: str) -> Verb:
        """The verb named ``text`` (``power-on``, ``power_on`` and ``POWER_ON`` all work)."""
        norm = text.strip().lower().replace("_", "-")
        for verb in cls:
            if verb.value == norm:
                return verb
        valid = ", ".join(v.value for v in cls)
        raise ValueError(f"unknown verb {text!r}; expected one of: {valid}")


class Source(str, Enum):
    """Where a capability set came from."""

    DISCOVERED = "discovered"
    """Read from the device (for example Redfish ``ResetType@Redfish.AllowableValues``)."""
    DECLARED = "declared"
    """Stated by the operator in config, not confirmed by the device."""
    INTRINSIC = "intrinsic"
    """Fixed by the protocol itself (Talos can never power on; a PDU is always hard)."""


@dataclass(frozen=True)
class CapabilitySet:
    """Which verbs a channel advertises for one target, each graceful or hard.

    ``verbs`` maps each advertised verb to ``True`` (graceful: a sequenced OS
    shutdown or restart) or ``False`` (hard: a power cut). ``detail`` says in words
    how the set was obtained, or why it is empty ("service advertises no reset types").
    """

    verbs: Mapping[Verb, bool] = field(default_factory=dict)
    source: Source = Source.DISCOVERED
    detail: str = ""
    sees_power_off: bool = True
    """Whether readback can observe a machine as off (Talos cannot: a dark machine is silent)."""
    withheld: Mapping[Verb, str] = field(default_factory=dict)
    """Per verb not advertised: the channel's own reason and fix, in words (optional).

    ("GracefulRestart is not allowed by this BMC; it allows ForceRestart, PowerCycle: set
    reboot: force"). The rule puts it into the reason of the withheld verb.
    """

    def __post_init__(self) -> None:
        frozen = MappingProxyType({Verb(v): bool(g) for v, g in self.verbs.items()})
        object.__setattr__(self, "verbs", frozen)
        notes = MappingProxyType(
            {Verb(v): str(t) for v, t in self.withheld.items() if Verb(v) not in frozen and t}
        )
        object.__setattr__(self, "withheld", notes)
        key = (frozenset(frozen.items()), self.source, self.detail, self.sees_power_off,
               frozenset(notes.items()))
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    @classmethod
    def of(
        cls,
        graceful: Iterable[Verb] = (),
        hard: Iterable[Verb] = (),
        *,
        source: Source = Source.DISCOVERED,
        detail: str = "",
        sees_power_off: bool = True,
        withheld: Mapping[Verb, str] | None = None,
    ) -> CapabilitySet:
        """Build a set from the verbs that are graceful and those that are hard.

        A verb listed in both is graceful (the channel can do it gently).
        """
        verbs: dict[Verb, bool] = {Verb(v): False for v in hard}
        verbs.update({Verb(v): True for v in graceful})
        return cls(verbs, source, detail, sees_power_off, dict(withheld or {}))

    @classmethod
    def empty(cls, detail: str, source: Source = Source.DISCOVERED) -> CapabilitySet:
        """A set that advertises nothing, with the reason."""
        return cls({}, source, detail)

    def advertises(self, verb: Verb) -> bool:
        """Whether ``verb`` is advertised."""
        return verb in self.verbs

    def is_graceful(self, verb: Verb) -> bool:
        """Whether ``verb`` is advertised as graceful (False when hard or absent)."""
        return self.verbs.get(verb, False)

    def __iter__(self) -> Iterator[Verb]:
        return iter(sorted(self.verbs, key=list(Verb).index))

    def __len__(self) -> int:
        return len(self.verbs)

    def __contains__(self, verb: object) -> bool:
        return verb in self.verbs

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CapabilitySet):
            return NotImplemented
        return self is other or bool(self._key == other._key)  # type: ignore[attr-defined]

    def as_dict(self) -> dict[str, str]:
        """``{"reboot": "graceful", "power-on": "hard", ...}`` in verb order."""
        return {v.value: ("graceful" if self.verbs[v] else "hard") for v in self}
