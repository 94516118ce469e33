"""The Talos mock: a grpclib ``machine.MachineService`` with mutual TLS, for tests and demos.

Run it with ``python -m powerplane_talos.mock --port P --certs DIR``. It simulates
machines (:mod:`~powerplane_talos.mock.machines`), rejects clients without a
certificate from its CA, injects faults through a control hook
(:mod:`~powerplane_talos.mock.control`), and writes a matching talosconfig.
:mod:`powerplane_talos.mock.talosctl` is a stand-in ``talosctl`` TEST TOOL that calls it.
It is not Talos.
"""

from __future__ import annotations

from powerplane_talos.mock.control import MockControl
from powerplane_talos.mock.machines import Fault, Simulation

__all__ = ["Fault", "MockControl", "Simulation"]
