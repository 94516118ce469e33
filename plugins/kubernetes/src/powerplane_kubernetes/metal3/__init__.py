"""The ``metal3`` channel: power through Metal3's ``BareMetalHost`` objects.

On a cluster run by Metal3 the baremetal-operator owns power: ``spec.online`` is the source
of truth and the operator re-applies it (metal3-io/baremetal-operator#790), so a verb sent
straight to the host's BMC is undone. This channel asks the operator instead:

* power-on / shutdown: ``spec.online`` true / false, a JSON merge patch naming the
  ``resourceVersion`` the capability decision was read at (:mod:`.channel`);
* reboot: the phased reboot annotation ``reboot.metal3.io/powerplane-<id>`` (a key per
  requester, as Metal3 documents), ``{"mode": "soft"}`` or ``{"mode": "hard"}``, removed by
  this channel once the operator reports the host off;
* readback: ``status.poweredOn``, and the provisioning state and operational status
  (:mod:`.hosts`).

Modules: :mod:`.config` (the channel's keys and its target ``NAMESPACE/NAME`` or
``{node: NAME}``), :mod:`.hosts` (what a BareMetalHost object says: capabilities, reading,
its BMC address, which node it serves), :mod:`.channel`, :mod:`.errors` (the mapping into
powerplane's tree), :mod:`.guard` (direct BMC channels for hosts a BareMetalHost manages)
and :mod:`.nodes` (a deployment's nodes from the BareMetalHosts). The stand-in operator the
tests use is :mod:`powerplane_kubernetes.testing.metal3`.
"""
