"""The Talos mock: a grpclib ``machine.MachineService`` with mutual TLS, for tests and demos.

Run it with ``python -m powerplane_talos.testing --port P --certs DIR``. It simulates
machines (:mod:`~powerplane_talos.testing.machines`), rejects clients without a
certificate from its CA, injects faults through a control hook
(:mod:`~powerplane_talos.testing.control`), and writes a matching talosconfig.
:mod:`powerplane_talos.testing.talosctl` is a stand-in ``talosctl`` TEST TOOL that calls it.
It is not Talos.
"""

from __future__ import annotations

from powerplane_talos.testing.control import MockControl
from powerplane_talos.testing.machines import Fault, Simulation

__all__ = ["Fault", "MockControl", "Simulation"]
