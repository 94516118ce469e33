"""``powerplane new-plugin NAME``: write a plugin distribution that passes the suite.

The generated distribution has a pyproject with the ``powerplane`` entry point, a config
model, a channel type, a stand-in in-memory device client (the one file a vendor
replaces with calls to the real API), and tests that run the conformance suite against
it. Out of the box every check passes, is skipped, or is NOT TESTED with a reason.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from string import Template

__all__ = ["write_plugin"]

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MAX_NAME = 64
"""Longest plugin name (the folder, the distribution and the package derive from it)."""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "powerplane-$name"
version = "0.1.0"
description = "powerplane channel type '$name'"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["powerplane>=0.1", "pydantic>=2.7"]

[project.optional-dependencies]
test = ["powerplane-conformance>=0.1", "pytest>=8"]

[project.entry-points.powerplane]
$name = "$pkg.plugin"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
$pkg = ["py.typed"]
"""

README = """\
# powerplane-$name

A powerplane channel type `$name`.

    pip install -e '.[test]'
    pytest tests                          # the conformance suite, on the stand-in device
    powerplane plugins                    # shows '$name' once installed

`src/$pkg/device.py` is a stand-in, in-memory device. Replace its methods with calls to
your device's API, keep the errors mapped in `channel.py`, then run the suite against
real hardware:

    powerplane conformance --target target.yaml --report results.json --junit junit.xml
"""

INIT = '''\
"""powerplane-$name: the '$name' channel type."""

from __future__ import annotations

__version__ = "0.1.0"
'''

PLUGIN = '''\
"""Registers the '$name' channel type (entry point group ``powerplane``)."""

from __future__ import annotations

from collections.abc import Callable

from powerplane import ChannelType, hookimpl

from $pkg.channel import ${cls}Channel, parse_target
from $pkg.config import ${cls}Config

__all__ = ["register_channel_types"]

CHANNEL_TYPE = ChannelType(
    name="$name",
    config=${cls}Config,
    factory=${cls}Channel,
    target=parse_target,
    description="$name power channel",
)


@hookimpl
def register_channel_types(register: Callable[[ChannelType], None]) -> None:
    """Register the '$name' channel type."""
    register(CHANNEL_TYPE)
'''

CONFIG = '''\
"""The config keys of a '$name' channel (beside ``type: $name``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from powerplane import SecretRef

__all__ = ["${cls}Config"]


class ${cls}Config(BaseModel):
    """Config of a '$name' channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str = "memory://default"
    """Where the device answers (for the stand-in device: any name)."""
    username: str = "admin"
    """The user the channel logs in as."""
    password: SecretRef | None = None
    """The password, as a reference ({env: NAME} or {file: PATH}), never inline."""
    timeout_s: float = Field(10.0, gt=0)
    """Bound on one call to the device, in seconds."""
    machines: dict[str, Literal["on", "off"]] = Field(default_factory=dict)
    """Stand-in device only: its machines and their initial power state."""
    device_password: SecretRef | None = None
    """Stand-in device only: the password it accepts (none: it accepts any)."""
'''

DEVICE = '''\
"""A stand-in, in-memory device. Replace these methods with calls to your device's API.

Devices are shared by endpoint, as real ones are: two sessions to one endpoint see the
same machines.
"""

from __future__ import annotations

import threading

__all__ = ["DeviceAuthError", "DeviceClient", "DeviceError", "DeviceNotFound"]

_devices: dict[str, dict[str, str]] = {}
_lock = threading.Lock()


class DeviceError(Exception):
    """Anything the device (or the library that talks to it) raises."""


class DeviceAuthError(DeviceError):
    """The device rejected the credentials."""


class DeviceNotFound(DeviceError):
    """The device has no such machine."""


class DeviceClient:
    """One session to the device."""

    def __init__(
        self, endpoint: str, machines: dict[str, str], password: str | None,
        accepts: str | None,
    ) -> None:
        with _lock:
            self._machines = _devices.setdefault(endpoint, dict(machines))
        self._password = password
        self._accepts = accepts

    def _login(self) -> None:
        if self._accepts is not None and self._password != self._accepts:
            raise DeviceAuthError("401 Unauthorized")

    def power_state(self, machine: str) -> str:
        """``on`` or ``off``."""
        self._login()
        if machine not in self._machines:
            raise DeviceNotFound(f"404 {machine}")
        return self._machines[machine]

    def power(self, machine: str, action: str) -> None:
        """``on``, ``off`` or ``cycle``."""
        self._login()
        if machine not in self._machines:
            raise DeviceNotFound(f"404 {machine}")
        with _lock:
            self._machines[machine] = "off" if action == "off" else "on"

    def close(self) -> None:
        """Log out."""
'''

CHANNEL = '''\
"""The '$name' channel: capabilities, verbs, readback, every device error mapped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from powerplane import (
    Acceptance,
    AuthenticationFailed,
    CapabilitySet,
    ChannelError,
    Reading,
    RefusedByDevice,
    Source,
    Verb,
    require,
)
from powerplane.errors import ChannelTimeout

from $pkg.config import ${cls}Config
from $pkg.device import DeviceAuthError, DeviceClient, DeviceError, DeviceNotFound

__all__ = ["${cls}Channel", "parse_target"]

T = TypeVar("T")


def parse_target(raw: Any) -> str:
    """A '$name' target is a machine name."""
    if not isinstance(raw, str) or not raw:
        raise ValueError("expected a machine name (a non-empty string)")
    return raw


class ${cls}Channel:
    """One configured '$name' channel."""

    def __init__(self, name: str, config: ${cls}Config) -> None:
        self.name = name
        self.config = config
        password = config.password.reveal() if config.password else None
        accepts = config.device_password.reveal() if config.device_password else None
        self._client = DeviceClient(config.endpoint, dict(config.machines), password, accepts)
        self._caps = CapabilitySet.of(
            graceful=[Verb.REBOOT, Verb.SHUTDOWN, Verb.POWER_ON],
            source=Source.DISCOVERED,
            detail="$name device",
        )

    def endpoint(self, target: str) -> str:
        return self.config.endpoint

    async def _io(self, target: str, fn: Callable[[], T]) -> T:
        """One device call, bounded, with every device error mapped (never a secret shown)."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn), self.config.timeout_s)
        except TimeoutError as exc:
            raise ChannelTimeout(f"no answer within {self.config.timeout_s:g} s",
                                 channel=self.name, target=target) from exc
        except DeviceAuthError as exc:
            raise AuthenticationFailed("credentials rejected", channel=self.name,
                                       target=target) from exc
        except DeviceNotFound as exc:
            raise RefusedByDevice(f"no such machine {target!r}", channel=self.name,
                                  target=target) from exc
        except DeviceError as exc:
            raise ChannelError(f"device error: {type(exc).__name__}", channel=self.name,
                               target=target) from exc

    async def capabilities(self, target: str) -> CapabilitySet:
        await self._io(target, lambda: self._client.power_state(target))
        return self._caps

    async def reboot(self, target: str) -> Acceptance:
        require(self._caps, Verb.REBOOT, self.name)
        await self._io(target, lambda: self._client.power(target, "cycle"))
        return Acceptance()

    async def shutdown(self, target: str) -> Acceptance:
        require(self._caps, Verb.SHUTDOWN, self.name)
        await self._io(target, lambda: self._client.power(target, "off"))
        return Acceptance()

    async def power_on(self, target: str) -> Acceptance:
        require(self._caps, Verb.POWER_ON, self.name)
        await self._io(target, lambda: self._client.power(target, "on"))
        return Acceptance()

    async def terminate(self, target: str) -> Acceptance:
        require(self._caps, Verb.TERMINATE, self.name)
        raise AssertionError("unreachable: terminate is not advertised")

    async def read_power_state(self, target: str) -> Reading:
        state = await self._io(target, lambda: self._client.power_state(target))
        return Reading.on() if state == "on" else Reading.off()

    async def close(self) -> None:
        self._client.close()
'''

TESTS = '''\
"""The conformance suite against the '$name' channel type (on its stand-in device)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from powerplane_conformance import ConformanceSuite


class Test${cls}Conformance(ConformanceSuite):
    conformance_subjects = ("n1", "n2")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(cls, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        secret = tmp_path_factory.mktemp("secret") / "password"
        secret.write_text("change-me", encoding="utf-8")
        return {
            "channels": {
                "dev": {
                    "type": "$name",
                    "endpoint": f"memory://{uuid.uuid4().hex}",
                    "password": {"file": str(secret)},
                    "device_password": {"file": str(secret)},
                    "machines": {"m1": "on", "m2": "off"},
                },
            },
            "nodes": {
                "n1": {"channels": [{"channel": "dev", "target": "m1"}]},
                "n2": {"channels": [{"channel": "dev", "target": "m2"}]},
            },
            "conformance": {
                "nodes": ["n1", "n2"],
                "allow_destructive": True,
                "settle_timeout_s": 2,
                "expected_capabilities": {"dev": ["reboot", "shutdown", "power-on"]},
                "negative": {"dev": {"secret_key": "password"}},
            },
        }
'''

TARGET = """\
# A target file for `powerplane conformance --target target.yaml` against a real device.
channels:
  dev:
    type: $name
    endpoint: https://192.0.2.10
    password: {env: ${env}_PASSWORD}
nodes:
  node-1:
    channels: [{channel: dev, target: m1}]
conformance:
  nodes: [node-1]
  allow_destructive: false        # true: the suite may power the machine off and on
  settle_timeout_s: 60
  negative:
    dev: {secret_key: password, address_key: endpoint, address_format: "https://{host}:{port}",
          timeout_key: timeout_s}
"""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def write_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the distribution ``powerplane-NAME`` under ``directory``; returns its folder.

    Raises ``ValueError`` for a bad name or an existing folder.
    """
    if len(name) > MAX_NAME:
        raise ValueError(f"bad plugin name: {len(name)} characters, at most {MAX_NAME}")
    if not NAME_RE.match(name):
        raise ValueError(f"bad plugin name {name!r}: expected lower-case letters, digits and "
                         "single hyphens, starting with a letter (for example 'acme-bmc')")
    pkg = "powerplane_" + name.replace("-", "_")
    values = {"name": name, "pkg": pkg, "cls": _camel(name),
              "env": name.replace("-", "_").upper()}
    base = Path(directory)
    _check_dir(base)
    root = base / f"powerplane-{name}"
    if root.exists():
        raise ValueError(f"{root} already exists; choose another --dir or remove it")
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        f"src/{pkg}/__init__.py": INIT,
        f"src/{pkg}/py.typed": "",
        f"src/{pkg}/plugin.py": PLUGIN,
        f"src/{pkg}/config.py": CONFIG,
        f"src/{pkg}/device.py": DEVICE,
        f"src/{pkg}/channel.py": CHANNEL,
        "tests/test_conformance.py": TESTS,
        "target.yaml": TARGET,
    }
    try:
        base.mkdir(parents=True, exist_ok=True)
        root.mkdir()
    except OSError as exc:
        raise ValueError(f"cannot create {root}: {_reason(exc)}") from None
    try:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(Template(text).substitute(values), encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(root, ignore_errors=True)  # only the folder this call created
        raise ValueError(f"cannot write {root}: {_reason(exc)}") from None
    return root


def _reason(exc: OSError) -> str:
    return exc.strerror or os.strerror(exc.errno or errno.EIO)


def _check_dir(base: Path) -> None:
    """``--dir`` must be a writable directory, or a path that can become one."""
    probe = base
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "--dir" if probe == base else f"{probe} (in --dir {base})"
        raise ValueError(f"cannot create the plugin under {base}: {where} is not a directory")
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot create the plugin under {base}: {probe} is not writable")
