"""The simulators: core's in-memory stand-ins for the devices and systems powerplane drives.

* :mod:`powerplane.sim.channel`: the ``simulated`` channel type (machines, latency,
  limits, faults), core's own entry point;
* :mod:`powerplane.sim.machines`: a host's simulated machines, read from their own model;
* :mod:`powerplane.sim.cluster`: the ``simulated`` cluster (nodes, pods, PDBs);
* :mod:`powerplane.sim.storage`: the ``simulated`` storage (validated like Longhorn).

They are registered as built-ins like any plugin's types (:mod:`powerplane.builtins`),
and sit in the layer above the lifecycle: they import the ports they implement, and
nothing in :mod:`powerplane.lifecycle`, the host, the config or below imports them.
Importing this package imports none of them.
"""
