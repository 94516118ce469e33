"""The ``NodeMaintenance`` object: what was asked (spec) and what the machine did (status).

The spec holds the request (node, intent, reason, who asked, the pre-flight snapshot the
requester saw) and the later requests a person adds (return to service, abandon). The
status holds the phase, conditions, the power dispatch records, refusal numbers, the last
error and a timestamped history of every transition.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from powerplane.authority.identity import Identity

__all__ = [
    "ACTIVE_PHASES",
    "TERMINAL_PHASES",
    "AbandonRequest",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "Dispatch",
    "DispatchOutcome",
    "Evidence",
    "Intent",
    "MaintenanceSpec",
    "MaintenanceStatus",
    "NodeMaintenance",
    "Phase",
    "Preflight",
    "QuorumNumbers",
    "Resolution",
    "ReturnRequest",
    "Transition",
    "set_condition",
    "utcnow",
]


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


class Intent(str, Enum):
    """How far a maintenance goes."""

    CORDON = "cordon"
    """Mark the node unschedulable and park at ``Cordoned`` until returned."""
    DRAIN = "drain"
    """Cordon, then evict every pod; park at ``Drained`` until returned."""
    REBOOT = "reboot"
    """Cordon, evacuate storage, drain, reboot, and return once the node is ready again."""
    SHUTDOWN = "shutdown"
    """Cordon, evacuate storage, drain, shut down; park at ``PoweredOff`` until returned."""

    def __str__(self) -> str:
        return self.value

    @property
    def powers(self) -> bool:
        """Whether this intent dispatches a power verb."""
        return self in (Intent.REBOOT, Intent.SHUTDOWN)


class Phase(str, Enum):
    """Where a maintenance stands."""

    PENDING = "Pending"
    """Recorded by its requester (an object with no status yet), not yet admitted by the
    executor: admission (the node's lock, the policy, the guard, the ceremony, the power
    offer) makes it ``Requested`` or ``Refused``."""
    REQUESTED = "Requested"
    """Accepted, nothing done yet."""
    CORDONED = "Cordoned"
    """The node is unschedulable (storage evacuation runs here for reboot and shutdown)."""
    DRAINING = "Draining"
    """Pods are being evicted; PDB refusals are waited on, up to the drain deadline."""
    DRAINED = "Drained"
    """No pod is left; the power verb is dispatched from here (at most once)."""
    REBOOTING = "Rebooting"
    """The reboot was dispatched; waiting for the node to be ready again."""
    POWERED_OFF = "PoweredOff"
    """The shutdown was accepted (``poweredOffAt``); parks until returned."""
    RETURNING = "Returning"
    """Bringing the node back: power-on if needed, uncordon, end evacuation."""
    COMPLETE = "Complete"
    """Back in service (terminal)."""
    REFUSED = "Refused"
    """A safety rule refused it before anything was done (terminal)."""
    FAILED = "Failed"
    """It could not go on; ``lastError`` says why (terminal)."""

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        """Whether no transition leaves this phase."""
        return self in TERMINAL_PHASES


TERMINAL_PHASES = frozenset({Phase.COMPLETE, Phase.REFUSED, Phase.FAILED})
ACTIVE_PHASES = frozenset(set(Phase) - TERMINAL_PHASES)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ConditionType(str, Enum):
    """What a condition is about (the key of ``status.conditions``)."""

    ABANDONED = "Abandoned"
    AUTHORIZED = "Authorized"
    """Whether the policy still allows the requester the maintenance's action (checked
    again before every act: a right removed after the request holds it)."""
    AWAITING_POWER_ON = "AwaitingPowerOn"
    AWAITING_RESOLUTION = "AwaitingResolution"
    """A dispatch's outcome cannot be told from evidence: a person must resolve it."""
    CORDONED = "Cordoned"
    DISPATCH_INDETERMINATE = "DispatchIndeterminate"
    DRAINED = "Drained"
    EVACUATED = "Evacuated"
    EVACUATION_PAUSED = "EvacuationPaused"
    MACHINE_READS_ON = "MachineReadsOn"
    """After a shutdown, the readback window closed with the machine reading ``on``."""
    NODE_READY = "NodeReady"
    PORT_ERROR = "PortError"
    POWER_OFF_CONFIRMED = "PowerOffConfirmed"
    POWER_OFFERED = "PowerOffered"
    QUORUM_GUARD = "QuorumGuard"
    REBOOT_OBSERVED = "RebootObserved"
    """Whether the boot marker showed that the machine rebooted."""
    SAFETY_HOLD = "SafetyHold"
    STATUS_REGRESSED = "StatusRegressed"
    """The status contradicted the dispatch ledger (a dispatch lost, a "not applied" no
    evidence recorded): parked for a person, nothing sent (:mod:`.ledger`)."""

    def __str__(self) -> str:
        return self.value


class ConditionStatus(str, Enum):
    """A condition's status, Kubernetes-style."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"

    def __str__(self) -> str:
        return self.value


class Condition(_Model):
    """One observed fact, Kubernetes-style: a type, a status, a reason and a message."""

    type: ConditionType
    """What the condition is about (``PowerOffConfirmed``, ``EvacuationPaused``, ...)."""
    status: ConditionStatus
    """``True``, ``False`` or ``Unknown``."""
    reason: str = ""
    """A CamelCase word for machines."""
    message: str = ""
    """A sentence for people."""
    last_transition: dt.datetime = Field(default_factory=utcnow, alias="lastTransitionTime")
    """When ``status`` last changed."""


class DispatchOutcome(str, Enum):
    """What became of a recorded dispatch."""

    ACCEPTED = "accepted"
    """The channel accepted the verb."""
    FAILED = "failed"
    """The channel or the rule refused it; it is never sent again."""
    UNKNOWN = "unknown"
    """No answer after the request may have left (the host's ``OutcomeUnknown``), or the
    runner stopped before recording an answer: settled by evidence, never resent blindly."""
    APPLIED = "applied"
    """Evidence (a changed boot marker, a readback) or a person showed the verb took effect."""
    NOT_APPLIED = "not-applied"
    """Evidence through the settle window (or a person) showed it did not take effect; a
    next attempt is recorded and sent."""
    INDETERMINATE = "indeterminate"
    """Nothing can show whether it took effect: the maintenance waits for a person
    (``maintenance resolve``)."""

    def __str__(self) -> str:
        return self.value

    @property
    def settled(self) -> bool:
        """Whether this outcome is final for its attempt (no more evidence is read)."""
        return self in (DispatchOutcome.ACCEPTED, DispatchOutcome.FAILED,
                        DispatchOutcome.APPLIED, DispatchOutcome.NOT_APPLIED)


class Evidence(_Model):
    """What could be observed of the machine, with the sources (before or after a send)."""

    boot_marker: str | None = Field(None, alias="bootMarker")
    """A value that changes on every boot (None: no source publishes one)."""
    boot_marker_source: str | None = Field(None, alias="bootMarkerSource")
    """Where the marker came from: a channel name, or ``cluster``."""
    power: str | None = None
    """The power reading (``on``, ``off``, ``unknown``); None when not read."""
    power_source: str | None = Field(None, alias="powerSource")
    """The channel that gave the reading."""
    sees_power: bool = Field(False, alias="seesPower")
    """Whether the dispatch's channel can see power off (a blind one cannot)."""
    taken_at: dt.datetime = Field(default_factory=utcnow, alias="takenAt")
    note: str = ""
    """What could not be read, in words."""

    def describe(self) -> str:
        """The evidence in words (for conditions and details)."""
        parts = []
        if self.boot_marker is not None:
            parts.append(f"boot marker {self.boot_marker} (from {self.boot_marker_source})")
        else:
            parts.append("no boot marker")
        if self.power is not None:
            src = f" (via {self.power_source})" if self.power_source else ""
            parts.append(f"power reads {self.power}{src}")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


class Dispatch(_Model):
    """One power verb, recorded before it is sent (at most once)."""

    verb: str
    """The power verb (``reboot``, ``shutdown``, ``power-on``)."""
    channel: str | None
    """The channel the offer named at dispatch."""
    attempt_id: str = Field(alias="attemptId")
    """A unique id of this attempt."""
    recorded_at: dt.datetime = Field(alias="recordedAt")
    """When the dispatch was persisted, before sending."""
    runner: str = ""
    """The runner that recorded it (``host/pid/nonce``): while that runner lives and the
    call may still be in flight, no other runner settles it."""
    outcome: DispatchOutcome | None = None
    """None until the outcome is recorded."""
    outcome_at: dt.datetime | None = Field(None, alias="outcomeAt")
    """When the outcome was recorded."""
    detail: str = ""
    """The channel's words, the error, or the evidence that settled it."""
    attempt: int = 1
    """1 for the first send of this verb; 2 after evidence (or a person) showed the first
    did not take effect."""
    before: Evidence | None = None
    """The evidence taken before sending (recorded with the dispatch, before it leaves)."""
    settle_started_at: dt.datetime | None = Field(None, alias="settleStartedAt")
    """When the current settle window began (evidence of non-application must hold
    through the whole window)."""
    settled_by: str = Field("", alias="settledBy")
    """``evidence``, ``runner`` (this runner learnt the answer) or ``person:<actor>``."""


class QuorumNumbers(_Model):
    """The quorum guard's numbers, as shown in a refusal or a hazard."""

    members: int
    """Control-plane members derived from labels."""
    ready: int
    """Members ready and not taken out by another maintenance."""
    quorum: int
    """Members needed: ``members // 2 + 1``."""
    margin: int
    """``ready - quorum`` before this action."""
    member: bool = False
    """Whether the node under maintenance is itself a member."""


class Preflight(_Model):
    """What the requester was shown before accepting."""

    pods: list[str] = Field(default_factory=list)
    """Pods on the node that a drain would evict."""
    pdbs: list[str] = Field(default_factory=list)
    """PodDisruptionBudgets that cover those pods."""
    quorum: QuorumNumbers | None = None
    """The quorum numbers at request time (None with no control plane declared)."""
    hazard: bool = False
    """Whether the action consumes the last of the quorum margin."""
    power: dict[str, Any] = Field(default_factory=dict)
    """The power offer for the intent's verb at request time."""
    storage: str = ""
    """What storage evacuation will do."""
    taken_at: dt.datetime = Field(default_factory=utcnow, alias="takenAt")
    """When the snapshot was taken."""


class ReturnRequest(_Model):
    """A person asked for the node back in service."""

    actor: str
    reason: str
    machine_confirmed: bool = Field(False, alias="machineConfirmed")
    """A person confirms the machine is powered back on (where power-on is not offered)."""
    at: dt.datetime = Field(default_factory=utcnow)


class AbandonRequest(_Model):
    """A person abandoned the maintenance; it goes back through ``Returning``."""

    actor: str
    reason: str
    at: dt.datetime = Field(default_factory=utcnow)


class Resolution(_Model):
    """A person settled a dispatch whose outcome evidence could not tell."""

    actor: str
    reason: str
    applied: bool
    """True: the verb took effect (move on); False: it did not (send it once more)."""
    attempt_id: str = Field(alias="attemptId")
    """The dispatch it settles."""
    at: dt.datetime = Field(default_factory=utcnow)


class MaintenanceSpec(_Model):
    """What was asked."""

    node: str
    intent: Intent
    reason: str
    requested_by: str = Field(alias="requestedBy")
    """The authenticated user who asked (never a name the requester typed)."""
    requester_groups: list[str] = Field(default_factory=list, alias="requesterGroups")
    """The authenticated groups of :attr:`requested_by`."""
    requested_via: str = Field("local", alias="requestedVia")
    """Who authenticated the requester: ``local``, ``kubernetes``, ``oidc``."""
    on_behalf_of: str | None = Field(None, alias="onBehalfOf")
    """Text the requester added ("for the night shift"): recorded, authorizes nothing."""
    ack_preflight: bool = Field(False, alias="ackPreflight")
    """The requester acknowledged the pre-flight impact (a creator that is not a person at
    a terminal supplies its ceremony here: the executor checks it at admission)."""
    confirm_node: str | None = Field(None, alias="confirmNode")
    """The node name as the requester typed it."""
    hazard_reason: str | None = Field(None, alias="hazardReason")
    """The typed reason for consuming the last of the quorum margin."""
    preflight: Preflight = Field(default_factory=Preflight)
    return_request: ReturnRequest | None = Field(None, alias="returnRequest")
    abandon: AbandonRequest | None = None
    resolutions: list[Resolution] = Field(default_factory=list)
    """Every resolution a person gave, in order."""

    @property
    def requester(self) -> Identity:
        """The identity that asked, as recorded."""
        return Identity(user=self.requested_by, groups=tuple(self.requester_groups),
                        via=self.requested_via, on_behalf_of=self.on_behalf_of)


class Transition(_Model):
    """One phase change, with when and why."""

    from_phase: Phase | None = Field(alias="from")
    to: Phase
    at: dt.datetime
    why: str = ""


class MaintenanceStatus(_Model):
    """What the machine did."""

    phase: Phase = Phase.REQUESTED
    conditions: dict[str, Condition] = Field(default_factory=dict)
    powered_off_at: dt.datetime | None = Field(None, alias="poweredOffAt")
    """When the channel accepted the shutdown (bounds the readback window)."""
    dispatches: list[Dispatch] = Field(default_factory=list)
    """Every power verb recorded, in order (the main verb, then a power-on at return)."""
    refusal: QuorumNumbers | None = None
    """Quorum numbers of a refusal or a hold."""
    refusal_reason: str = Field("", alias="refusalReason")
    """Why it was refused or is held."""
    hazard: bool = False
    """The action consumed the last of the quorum margin."""
    quorum: QuorumNumbers | None = None
    """The quorum numbers when the node was taken out of service."""
    last_error: str = Field("", alias="lastError")
    history: list[Transition] = Field(default_factory=list)
    cordoned: bool = False
    """Whether this maintenance cordoned the node (so returning uncordons it)."""
    preflight: Preflight | None = None
    """The pre-flight the executor took at admission, where the creator recorded none in
    its spec (a ``NodeMaintenance`` made by ``kubectl``)."""
    evacuation_started_at: dt.datetime | None = Field(None, alias="evacuationStartedAt")
    evacuation_ended: bool = Field(False, alias="evacuationEnded")
    drain_started_at: dt.datetime | None = Field(None, alias="drainStartedAt")
    power_wait_started_at: dt.datetime | None = Field(None, alias="powerWaitStartedAt")
    """When waiting for the node to come back began (reboot, power-on)."""


class NodeMaintenance(_Model):
    """One maintenance of one node (at most one active per node)."""

    name: str
    spec: MaintenanceSpec
    status: MaintenanceStatus = Field(default_factory=MaintenanceStatus)
    resource_version: int = Field(0, alias="resourceVersion")
    """Bumped by the store on every write (optimistic concurrency)."""
    created_at: dt.datetime = Field(default_factory=utcnow, alias="createdAt")

    @property
    def node(self) -> str:
        return self.spec.node

    @property
    def phase(self) -> Phase:
        return self.status.phase

    def dispatch_for(self, verb: str) -> Dispatch | None:
        """The latest recorded attempt of ``verb`` (a second only after non-application)."""
        found = None
        for d in self.status.dispatches:
            if d.verb == verb:
                found = d
        return found

    def condition(self, kind: str) -> Condition | None:
        return self.status.conditions.get(str(kind))

    def is_true(self, kind: str) -> bool:
        """Whether the condition ``kind`` is present with status True."""
        cond = self.condition(kind)
        return cond is not None and cond.status is ConditionStatus.TRUE

    def summary(self) -> dict[str, Any]:
        """The JSON shape of ``maintenance status -o json``."""
        refusal: dict[str, Any] = {}
        if self.status.refusal is not None or self.status.refusal_reason:
            refusal = {"reason": self.status.refusal_reason}
            if self.status.refusal is not None:
                refusal.update(self.status.refusal.model_dump())
        return {
            "name": self.name,
            "node": self.node,
            "intent": self.spec.intent.value,
            "phase": self.phase.value,
            "conditions": {
                k: c.model_dump(mode="json", by_alias=True)
                for k, c in self.status.conditions.items()
            },
            "refusal": refusal,
            "dispatches": len(self.status.dispatches),
            "dispatchRecords": [
                d.model_dump(mode="json", by_alias=True) for d in self.status.dispatches
            ],
            "poweredOffAt": (
                self.status.powered_off_at.isoformat() if self.status.powered_off_at else None
            ),
            "hazard": self.status.hazard,
            "quorum": self.status.quorum.model_dump() if self.status.quorum else None,
            "lastError": self.status.last_error,
            "awaitingResolution": (
                self.status.conditions[ConditionType.AWAITING_RESOLUTION.value].message
                if self.is_true(ConditionType.AWAITING_RESOLUTION) else None
            ),
            "machineReadsOn": self.is_true(ConditionType.MACHINE_READS_ON),
            "resolutions": [r.model_dump(mode="json", by_alias=True)
                            for r in self.spec.resolutions],
            "requestedBy": self.spec.requested_by,
            "requesterGroups": list(self.spec.requester_groups),
            "requestedVia": self.spec.requested_via,
            "onBehalfOf": self.spec.on_behalf_of,
            "reason": self.spec.reason,
            "abandoned": (
                {"by": self.spec.abandon.actor, "reason": self.spec.abandon.reason,
                 "at": self.spec.abandon.at.isoformat()}
                if self.spec.abandon is not None
                else None
            ),
            "history": [
                t.model_dump(mode="json", by_alias=True) for t in self.status.history
            ],
            "resourceVersion": self.resource_version,
        }


def set_condition(
    m: NodeMaintenance, kind: ConditionType, status: ConditionStatus | str,
    reason: str = "", message: str = "",
) -> None:
    """Set a condition; its transition time moves only when something changed."""
    if not isinstance(status, ConditionStatus):
        status = ConditionStatus(status)
    old = m.status.conditions.get(kind.value)
    if old is not None and (old.status, old.reason, old.message) == (status, reason, message):
        return
    m.status.conditions[kind.value] = Condition(
        type=kind, status=status, reason=reason, message=message, last_transition=utcnow()
    )
