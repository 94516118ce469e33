"""The old home of the Talos mock, kept so ``python -m powerplane_talos.mock`` and imports
of ``powerplane_talos.mock`` go on working: everything lives in
:mod:`powerplane_talos.testing` now."""

from __future__ import annotations

from powerplane_talos.testing import Fault, MockControl, Simulation

__all__ = ["Fault", "MockControl", "Simulation"]
