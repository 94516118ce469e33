"""Fixtures of the ipmi plugin's tests: ipmi_sim and pyghmi's BMC simulator on loopback.

Tests that need ``ipmi_sim`` skip with the reason when it is not installed, except under
``CI`` (set by ``.ci/run``), where they fail: CI installs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ipmi_support import need_ipmi_sim

from powerplane_ipmi.peer import IpmiSim
from powerplane_ipmi.testing import PyghmiBmc


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[IpmiSim]:
    """A fresh ipmi_sim BMC (machine on), stopped by its handle afterwards."""
    need_ipmi_sim()
    with IpmiSim(tmp_path / "sim") as peer:
        yield peer


@pytest.fixture(scope="module")
def shared_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IpmiSim]:
    """One ipmi_sim BMC for a module's read-mostly tests."""
    need_ipmi_sim()
    with IpmiSim(tmp_path_factory.mktemp("shared-sim")) as peer:
        yield peer


@pytest.fixture
def pyghmi_bmc(tmp_path: Path) -> Iterator[PyghmiBmc]:
    """pyghmi's BMC simulator (a real BMC's privilege behaviour), in its own process."""
    with PyghmiBmc(tmp_path / "pyghmi") as peer:
        yield peer
