"""What a plugin registers beside channel types: port types, policy types, deployment checks.

The descriptors the hooks take (:mod:`powerplane.hookspecs`) and the registry keeps
(:mod:`powerplane.plugins`), in the seam layer so both name them without naming the layers
that build and run what they describe:

* :class:`PortType`, the generic lifecycle port type; :mod:`powerplane.lifecycle.ports`
  narrows it to ``ClusterType``, ``StorageType`` and ``StoreType`` (public in
  :mod:`powerplane.lifecycle`), whose factories take a ``PortContext`` or a
  ``StoreContext``;
* :class:`PolicyType` (``policy: {type: name, ...}``), whose factory takes the config and a
  :class:`~powerplane.authority.policy.PolicyContext` and returns a
  :class:`~powerplane.authority.policy.Policy`; and :data:`BASE_DIR`, the key under which
  its config model is given the deployment file's folder;
* :class:`DeploymentCheck`, whose check takes the validated
  :class:`~powerplane.config.Deployment`.

What a factory or a check is given comes from a layer above this one, so it is typed
``Any`` here (a plugin types its own factory fully; the descriptor accepts it). The public
home of ``PolicyType`` and ``DeploymentCheck`` is :mod:`powerplane`.
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from powerplane.errors import ConfigProblem

__all__ = ["BASE_DIR", "OWNER", "DeploymentCheck", "PolicyType", "PortType"]

ConfigT = TypeVar("ConfigT", bound=BaseModel)
PortT = TypeVar("PortT")


@dataclass(frozen=True)
class PortType(Generic[ConfigT, PortT]):
    """A lifecycle port type a plugin registers: its ``type:`` name, config model, factory.

    ``config`` must declare ``type`` as ``Literal[name]``; a mismatch is a registration
    error (the plugin fails to load, the others still load). A plugin registers one of the
    subclasses (``ClusterType``, ``StorageType``, ``StoreType``), each in its own hook.
    """

    port: ClassVar[str] = ""
    """The ``lifecycle:`` key a port type of this class serves (``cluster``, ``storage``,
    ``store``), set by each subclass: the registry takes a port type in its own hook only."""

    name: str
    """The ``type:`` value in ``lifecycle.<port>``."""
    config: type[ConfigT]
    """The pydantic model of the port's keys, ``type`` included."""
    factory: Callable[[ConfigT, Any], PortT]
    """Builds the port from the validated config and the context."""
    description: str = ""
    """One line for people."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a port type needs a non-empty name")
        if not (isinstance(self.config, type) and issubclass(self.config, BaseModel)):
            raise TypeError(f"port type {self.name!r}: config must be a pydantic model")
        field = self.config.model_fields.get("type")
        if field is None or typing.get_args(field.annotation) != (self.name,):
            raise TypeError(f"port type {self.name!r}: config {self.config.__name__} must "
                            f"declare type: Literal[{self.name!r}]")
        if not callable(self.factory):
            raise TypeError(f"port type {self.name!r}: factory must be callable")


@dataclass(frozen=True)
class PolicyType(Generic[ConfigT]):
    """A policy type a plugin registers (``register_policy_types``): ``policy: {type:
    name, ...}`` validated by ``config`` (a pydantic model with ``type: Literal[name]``)
    and built by ``factory(config, PolicyContext)``, which returns a ``Policy``.

    A model may read files at validation (the ``local`` type reads its roles file then, so
    a roles file that cannot be loaded is exit 2 at load, never "allow"); it is given the
    deployment file's folder in the validation context under :data:`BASE_DIR`.
    """

    name: str
    config: type[ConfigT]
    factory: Callable[[ConfigT, Any], Any]
    """``factory(config, PolicyContext) -> Policy``."""
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"policy type name {self.name!r} must be letters, digits, - or _")


BASE_DIR = "powerplane.base_dir"
"""Key of the validation context holding the deployment file's folder (a ``Path``)."""

OWNER = "powerplane.deployment_owner"
"""Key of the validation context holding the uid that owns the deployment file (absent: it
did not come from a file): a file the section names that grants power (a roles file) must
be owned by root or by that same user (:func:`powerplane.files.trust_problems`)."""


@dataclass(frozen=True)
class DeploymentCheck:
    """A check of a whole deployment that loading cannot make: a plugin registers one with
    ``register_deployment_checks`` (``register(DeploymentCheck(name, check))``).

    ``check(deployment)`` is awaited by ``powerplane check``
    (:func:`~powerplane.config.check_config`) and by :meth:`powerplane.PowerHost.start`,
    never by :func:`~powerplane.config.load_config` (loading makes no network call). It is
    given the validated :class:`~powerplane.config.Deployment` and returns its problems,
    each a :class:`~powerplane.errors.ConfigProblem` naming its dotted path (none: nothing
    found); any problem is a :class:`~powerplane.errors.ConfigError`, exit 2. A check that
    has nothing to ask for this deployment returns ``[]`` at once, without a request; one
    that cannot ask now (a service unreachable) raises a
    :class:`~powerplane.errors.PowerplaneError` that is not a ``ConfigError`` (a
    ``ChannelError``): ``powerplane check`` fails with it (exit 1), a host's start warns
    and goes on. The hook that registers a check is called without the plugin's other
    hooks, so build it cheaply: import what the check needs when it runs.
    """

    name: str
    """A unique name, shown by ``powerplane plugins`` (``metal3.guard``)."""
    check: Callable[[Any], Awaitable[list[ConfigProblem]]]
    """``async check(deployment: Deployment) -> list[ConfigProblem]``."""
    description: str = ""
