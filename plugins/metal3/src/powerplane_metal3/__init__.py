"""powerplane-metal3: the ``metal3`` channel, power through Metal3's ``BareMetalHost`` objects.

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

Modules: :mod:`.plugin` (the ``metal3`` channel type and the deployment check
``metal3.guard``, registered through the ``powerplane`` entry point), :mod:`.config` (the
channel's keys and its target ``NAMESPACE/NAME`` or ``{node: NAME}``), :mod:`.hosts` (what a
BareMetalHost object says: capabilities, reading, its BMC address, which node it serves),
:mod:`.channel`, :mod:`.errors` (the mapping into powerplane's tree), :mod:`.guard` (direct
BMC channels for hosts a BareMetalHost manages) and :mod:`.nodes` (a deployment's nodes
from the BareMetalHosts). The stand-in operator the tests use is
:mod:`powerplane_metal3.testing.operator`.

**Shared with powerplane-kubernetes, not moved.** This distribution is for those who power
machines through Metal3; it depends on ``powerplane-kubernetes`` for the Kubernetes API
access every Kubernetes-facing part of powerplane speaks the same way, so that there is one
of each: the connection keys and their loading (``powerplane_kubernetes.config.ApiAccess``,
the base of :class:`Metal3ChannelConfig`; ``secrets.environment_kubeconfig``), the client
(``client.KubeApi``, ``client.custom_resource``) and the reading of an API server's answer
(``errors.answer_of``). Its tests run the stand-in operator on the same test API server
(``powerplane_kubernetes.testing.apiserver.KubeApiServer``). **Moved here**: everything that
is about BareMetalHosts (the channel, its config and target, the error mapping, the guard,
the nodes, the stand-in operator and the tests), so ``powerplane-kubernetes`` no longer
registers the ``metal3`` channel type or the ``metal3.guard`` check and never imports this
package; the type is registered once, by this distribution.

Layers (the import contract ``metal3-layers`` in the workspace's ``pyproject.toml``), top
first: ``plugin``; ``guard | nodes | testing``; ``channel``; ``config | errors | hosts``. The
contract ``kubernetes-without-metal3`` keeps powerplane-kubernetes from importing this
package.

Every name below is imported on first use (:func:`powerplane.lazy_exports`), so plugin
discovery (which imports ``powerplane_metal3.plugin``) imports neither lightkube nor httpx2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_metal3.channel import Metal3Channel
    from powerplane_metal3.config import Metal3ChannelConfig, Metal3Target, parse_target
    from powerplane_metal3.errors import map_error

__version__ = "0.1.0"

__all__ = [
    "Metal3Channel",
    "Metal3ChannelConfig",
    "Metal3Target",
    "map_error",
    "parse_target",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Metal3Channel": ".channel",
    "Metal3ChannelConfig": ".config",
    "Metal3Target": ".config",
    "map_error": ".errors",
    "parse_target": ".config",
})
