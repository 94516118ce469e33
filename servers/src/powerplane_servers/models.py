"""The API's request and response bodies (pydantic: the OpenAPI document is made of them).

Request bodies forbid unknown fields: a body naming an actor (``actor``, ``requestedBy``)
is refused (422), because the actor is the authenticated identity, never a field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

IntentName = Literal["cordon", "drain", "reboot", "shutdown"]


class CeremonyBody(BaseModel):
    """What a person supplies for the ceremony ladder (ADR 0034 § 5)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", max_length=2000, description="why; meets the reason policy")
    confirmNode: str | None = Field(None, max_length=253, description="the node name, typed")
    ackPreflight: bool = Field(False, description="the pre-flight impact acknowledged")
    hazardReason: str | None = Field(
        None, max_length=2000,
        description="a typed reason for consuming the last of the quorum margin")
    onBehalfOf: str | None = Field(
        None, max_length=200, description="recorded beside the identity; authorizes nothing")


class MaintenanceCreate(CeremonyBody):
    node: str = Field(..., min_length=1, max_length=253)
    intent: IntentName


class PreflightRequest(CeremonyBody):
    node: str = Field(..., min_length=1, max_length=253)
    intent: IntentName


class ReturnBody(CeremonyBody):
    machineOn: bool = Field(False, description="a person confirms the machine is on")


class ResolveBody(CeremonyBody):
    applied: bool = Field(..., description="the verb took effect (true) or not (false)")


class ActionState(BaseModel):
    offered: bool = Field(description="the power rule offers it (cordon and drain: always)")
    withheldReason: str | None = Field(description="why the rule withholds it")
    allowed: bool = Field(description="the policy allows THIS caller to request it")
    rule: str = Field(description="the policy rule that decided")


class MaintenanceRef(BaseModel):
    name: str
    phase: str


class Server(BaseModel):
    name: str
    site: str | None
    labels: dict[str, str]
    classification: str
    channels: list[str]
    offers: dict[str, dict[str, Any]] = Field(
        description="per verb: {offered, channel, graceful} or {offered: false, cause, reason}")
    discoveredAt: str | None = Field(description="when the offers' capabilities were discovered")
    actions: dict[str, ActionState] = Field(description="cordon, drain, reboot, shutdown")
    maintenance: MaintenanceRef | None


class ServerDetail(Server):
    history: list[dict[str, Any]]
    readings: list[dict[str, Any]] = Field(
        description="the evidence taken for this node's maintenances (never an ambient read)")


class ServerPage(BaseModel):
    items: list[Server]
    total: int
    offset: int
    limit: int


class Whoami(BaseModel):
    user: str
    groups: list[str]
    via: str
    csrfToken: str | None = None


class Maintenance(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    node: str
    intent: str
    phase: str
    conditions: dict[str, dict[str, Any]]
    powerOffConfirmed: dict[str, Any] | None = Field(
        description="status True/False/Unknown, reason, message and what the status means")
    requestedBy: str
    reason: str
    terminal: bool
    history: list[dict[str, Any]]
    resourceVersion: int


class MaintenancePage(BaseModel):
    items: list[Maintenance]
    total: int


class Preflight(BaseModel):
    model_config = ConfigDict(extra="allow")

    node: str
    intent: str
    action: str
    accepted: bool = Field(description="the request would be accepted once its ceremony is "
                                       "complete")
    refusal: dict[str, Any] | None = Field(
        description="why it would be refused (with quorum: members, ready, quorum, margin)")
    hazard: bool
    preflight: dict[str, Any] | None
    ceremony: list[dict[str, Any]]
    ceremonyComplete: bool


class AuditEntry(BaseModel):
    at: str
    actor: str
    groups: list[str]
    via: str
    onBehalfOf: str | None
    action: str
    outcome: str
    rule: str
    reason: str
    node: str
    maintenance: str
    source: str
    detail: str


class TrailVerification(BaseModel):
    """One trail checked as ``powerplane audit verify`` checks it."""

    trail: str = Field(description="which trail (the audit file, the lifecycle store)")
    intact: bool
    records: int | None = Field(
        None, description="records in the trail (to a reader of every node it names)")
    firstBad: int | None = Field(None, description="the position of the first bad entry")
    problem: str | None = Field(None, description="what is wrong with it")
    checkpoints: int = Field(0, description="signed checkpoints verified")
    sealed: bool = Field(False, description="checked against the deployment's audit key")
    summary: str = Field("", description="the verification in one line")


class AuditVerification(BaseModel):
    """Whether the trail verifies: every trail intact, or the first bad entry of each."""

    intact: bool
    trails: list[TrailVerification]


class AuditPage(BaseModel):
    items: list[AuditEntry]
    total: int
    offset: int
    limit: int
    verification: AuditVerification
