"""The Redfish resources this plugin reads, declared (DSP0268), sushy-style but honest.

Only the properties the channel uses are declared; every other property of a body is
ignored. The rule throughout: **absent means none, never all**. A ``#ComputerSystem.Reset``
action without ``ResetType@Redfish.AllowableValues`` has :attr:`ResetAction.allowable_values`
``None`` (the service said nothing), never "every reset type" (sushy's fallback); a system
without ``PowerState`` has :attr:`ComputerSystem.power_state` ``None``, read back as unknown.

A body that does not fit (a ``PowerState`` that is a number, an ``Actions`` that is a list)
fails :func:`parse` with :class:`InvalidResource`, which the channel reports as a
:class:`~powerplane.ProtocolError` naming the resource and the property. The boot evidence
(``LastResetTime``, ``BootProgress``) is the one exception: a value that is not usable
evidence there is kept as ``None`` (no marker), since a boot marker only ever claims less.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "ActionInfo",
    "ActionParameter",
    "BootProgress",
    "ComputerSystem",
    "InvalidResource",
    "Manager",
    "ODataRef",
    "ResetAction",
    "SystemActions",
    "SystemLinks",
    "parse",
]

RESET_ACTION = "#ComputerSystem.Reset"
"""The name of the reset action in a ComputerSystem's ``Actions``."""


class _Resource(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class ODataRef(_Resource):
    """A link to another resource: ``{"@odata.id": "/redfish/v1/Managers/1"}``."""

    odata_id: str = Field(alias="@odata.id")
    """The linked resource's path."""


class ResetAction(_Resource):
    """The ``#ComputerSystem.Reset`` action of a system: where to POST, what it accepts."""

    target: str | None = None
    """The path a reset is POSTed to; ``None``: the action has no target (nothing to send)."""
    allowable_values: list[str] | None = Field(None, alias="ResetType@Redfish.AllowableValues")
    """The ``ResetType`` values the service advertises here; ``None``: it advertises none
    here (look at :attr:`action_info`), never "all of them"."""
    action_info: str | None = Field(None, alias="@Redfish.ActionInfo")
    """The path of an :class:`ActionInfo` resource describing the parameters, if any."""


class SystemActions(_Resource):
    """A system's ``Actions``."""

    reset: ResetAction | None = Field(None, alias=RESET_ACTION)
    """The reset action; ``None``: the system offers no reset."""


class BootProgress(_Resource):
    """A system's ``BootProgress`` (ComputerSystem v1_13_0)."""

    last_state: str | None = Field(None, alias="LastState")
    """The last boot stage reached (``OSRunning``, ``OSBootStarted``, ``None``, ...)."""
    last_state_time: str | None = Field(None, alias="LastStateTime")
    """When :attr:`last_state` was last updated, as published; ``None`` when absent."""

    @field_validator("last_state", "last_state_time", mode="before")
    @classmethod
    def _not_a_string_is_none(cls, value: Any) -> Any:
        return value if isinstance(value, str) else None


class SystemLinks(_Resource):
    """A system's ``Links``."""

    managed_by: list[ODataRef] = Field(default_factory=list, alias="ManagedBy")
    """The managers (BMCs) of the system, first the one that answers; empty when absent."""


class ComputerSystem(_Resource):
    """A ``ComputerSystem`` resource (``/redfish/v1/Systems/<id>``)."""

    odata_id: str | None = Field(None, alias="@odata.id")
    """Its own path."""
    power_state: str | None = Field(None, alias="PowerState")
    """``On``, ``Off``, ``PoweringOn``, ``PoweringOff``, ``Paused``; ``None`` when absent."""
    actions: SystemActions = Field(default_factory=SystemActions, alias="Actions")
    """Its actions; without ``Actions`` it has none."""
    links: SystemLinks = Field(default_factory=SystemLinks, alias="Links")
    """Its links; without ``Links`` it has none."""
    manufacturer: str | None = Field(None, alias="Manufacturer")
    """The manufacturer, as published."""
    model: str | None = Field(None, alias="Model")
    """The product name, as published."""
    serial_number: str | None = Field(None, alias="SerialNumber")
    """The serial number, as published."""
    bios_version: str | None = Field(None, alias="BiosVersion")
    """The BIOS or firmware version of the system, as published."""
    last_reset_time: str | None = Field(None, alias="LastResetTime")
    """When the system last came out of a reset (v1_12_0), as published; ``None`` when
    absent or not a string (no usable boot evidence)."""
    boot_progress: BootProgress | None = Field(None, alias="BootProgress")
    """The boot progress (v1_13_0); ``None`` when absent or not an object."""

    @field_validator("last_reset_time", mode="before")
    @classmethod
    def _time_not_a_string_is_none(cls, value: Any) -> Any:
        return value if isinstance(value, str) else None

    @field_validator("boot_progress", mode="before")
    @classmethod
    def _progress_not_an_object_is_none(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None


class ActionParameter(_Resource):
    """One parameter of an :class:`ActionInfo`."""

    name: str = Field(alias="Name")
    """The parameter's name (``ResetType``)."""
    allowable_values: list[str] | None = Field(None, alias="AllowableValues")
    """The values the service accepts for it; ``None``: it lists none (never "all")."""
    required: bool | None = Field(None, alias="Required")
    """Whether the action needs it."""


class ActionInfo(_Resource):
    """An ``ActionInfo`` resource: the parameters of an action (``@Redfish.ActionInfo``)."""

    parameters: list[ActionParameter] = Field(default_factory=list, alias="Parameters")
    """The action's parameters; empty when absent."""

    def reset_types(self) -> list[str] | None:
        """The ``AllowableValues`` of the ``ResetType`` parameter; ``None`` where there is
        no such parameter or it lists none."""
        for param in self.parameters:
            if param.name == "ResetType":
                return param.allowable_values
        return None


class Manager(_Resource):
    """A ``Manager`` resource (the BMC, ``/redfish/v1/Managers/<id>``)."""

    firmware_version: str | None = Field(None, alias="FirmwareVersion")
    """The manager's firmware version, as published."""
    model: str | None = Field(None, alias="Model")
    """The manager's product name, as published."""


class InvalidResource(ValueError):
    """A body that is not the resource it should be (the channel: a ProtocolError)."""


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], body: Any, where: str) -> M:
    """``body`` (the JSON GET from ``where``) as ``model``; :class:`InvalidResource` if not.

    The message names the resource and each property that does not fit, never the
    values (they are the device's).
    """
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'the body'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)[:5]
        )
        raise InvalidResource(f"{where} is not a valid {model.__name__} ({problems})") from None
