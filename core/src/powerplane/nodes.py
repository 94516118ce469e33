"""A deployment's nodes: where each stands, whether it is repairable, the channels that reach it.

:class:`NodeSpec` is what the authority (a policy decides per node), the rule and the host
name; :func:`~powerplane.config.parse_config` validates each node of the file into one,
its targets parsed by their channel types' parsers (given in the validation context under
:data:`TARGET_PARSERS`). Its public home is :mod:`powerplane`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["TARGET_PARSERS", "NodeChannelRef", "NodeSpec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeChannelRef(_Strict):
    """One of a node's channels, in preference order."""

    channel: str
    """Name of a channel under ``channels``."""
    target: Any = Field(None, validate_default=True)
    """The node as that channel addresses it (a system path, an address, outlets, an id)."""

    @field_validator("target")
    @classmethod
    def _parse_target(cls, value: Any, info: ValidationInfo) -> Any:
        """Parsed by the channel type's own parser when :func:`parse_config` validates the
        node (the parsers come in the validation context); else kept as written."""
        parsers = info.context.get(TARGET_PARSERS) if isinstance(info.context, dict) else None
        parser = parsers.get(info.data.get("channel")) if parsers else None
        if parser is None:
            return value
        try:
            return parser(value)
        except TypeError as exc:
            raise ValueError(str(exc)) from None


TARGET_PARSERS = "powerplane.target_parsers"
"""Key of the validation context that maps a channel name to its type's target parser."""


class NodeSpec(_Strict):
    """A node: where it is, whether it is repairable, and the channels that reach it."""

    site: str | None = None
    """The site the node stands in (for attended declarations)."""
    classification: Literal["repairable", "replaceable"] = "repairable"
    """``replaceable`` nodes may be terminated; ``repairable`` never."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels read by the simulated and none clusters."""
    channels: list[NodeChannelRef] = Field(default_factory=list)
    """The node's channels, most preferred first."""
