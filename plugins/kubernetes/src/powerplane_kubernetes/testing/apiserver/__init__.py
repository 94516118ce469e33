"""A Kubernetes API server for tests: kmock's emulator, refusing what a real one refuses.

kmock (``KubernetesEmulator``, by the author of kopf) serves the HTTP API on a loopback
port, keeps objects in memory (``kmock.objects``) and streams watches. It checks no
credentials, runs no admission and applies every write it is sent, so
:class:`KubeApiServer` answers every request itself, as a real API server does (``Status``
objects with the API server's reasons and wording), each concern in a module of its own:

* :mod:`.authz` -- **who is asking, and whether they may**: bearer tokens
  (:meth:`~KubeApiServer.write_kubeconfig`, :meth:`~KubeApiServer.issue_token`; a
  kubeconfig with neither ``client`` nor ``user`` is the cluster admin, ``system:masters``),
  impersonation, and **RBAC on every request** (``enforce_rbac=True``, the default): the
  verb, group, resource and subresource (``nodemaintenances/status``, ``pods/eviction``),
  namespace and name, authorized over the stored roles and bindings as Kubernetes' RBAC
  authorizer does (:mod:`.rbac`), a denial ``403`` in the API server's words; the
  bootstrap roles a cluster comes with; SubjectAccessReview, SelfSubjectAccessReview,
  SelfSubjectReview and TokenReview.
* :mod:`.admission` -- **the stored ValidatingAdmissionPolicies and their bindings**,
  evaluated (:mod:`.policies`: matching, subresources included only where a rule names
  them; :mod:`.cel`: cel-python's parser and functions, compiled once per policy), a denial
  ``403`` or ``422`` in the API server's words, an expression that fails failing closed and
  loudly; the Longhorn node webhook emulated.
* :mod:`.rest` -- **objects**: ``resourceVersion`` and conflicts, ``POST``, ``PUT``,
  ``PATCH`` (merge, JSON, strategic and server-side apply, :mod:`.patches`), the status
  subresource as a resource of its own, finalizers and ``deletionTimestamp``, lists with
  selectors, custom resources pruned and validated against their schema (:mod:`.crds`).
* :mod:`.watches` -- kmock's watch streams, and watches answered ``410`` or ended.
* :mod:`.faults` -- ``500``, ``429`` or a dropped connection, injected per verb and
  resource.
* :mod:`.kubelet` -- the world: nodes, pods, budgets, Longhorn, and evictions (the budgets
  decide; pods terminate at once or linger).
* :mod:`.base` -- the thread and loop the server runs in, its object store (each write
  announced to watches), its request log (:attr:`~KubeApiServer.requests`,
  :meth:`~KubeApiServer.request_counts`); :mod:`.emulator` -- kmock's private names it
  needs, in one place (pinned, ``kmock>=0.8,<0.9``; ``tests/test_kmock_shape.py`` checks
  them); :mod:`.server` -- the layers put together and the one reaction that routes.

The server runs its own event loop in a thread, so async and sync tests, and other
processes, reach it like any API server; world changes (:meth:`~KubeApiServer.add_node`,
:meth:`~KubeApiServer.set_pdb_allowed`, :meth:`~KubeApiServer.add_rbac`, ...) run in that
loop, need no identity and pass no admission. Only a real cluster shows what this server
does not do: see the distribution's README ("What only a real cluster proves").
"""

from __future__ import annotations

from powerplane_kubernetes.testing.apiserver.admission import Validator
from powerplane_kubernetes.testing.apiserver.authz import ADMIN_USER, bootstrap_rbac
from powerplane_kubernetes.testing.apiserver.common import (
    ADMISSION_KINDS,
    FAULTS,
    LONGHORN_NODES,
    LONGHORN_REPLICAS,
    MAINTENANCES,
    NODES,
    PDBS,
    PODS,
    RBAC_KINDS,
    REVIEWS,
    SECRETS,
    SELF_ACCESS_REVIEWS,
    SELF_REVIEWS,
    TOKEN_REVIEWS,
    RecordedRequest,
)
from powerplane_kubernetes.testing.apiserver.crds import (
    CrdInfo,
    openapi_to_jsonschema,
    prune,
)
from powerplane_kubernetes.testing.apiserver.rbac import (
    RbacAttributes,
    rbac_attributes,
    rbac_authorize,
)
from powerplane_kubernetes.testing.apiserver.server import KubeApiServer, free_port

__all__ = [
    "ADMIN_USER",
    "ADMISSION_KINDS",
    "FAULTS",
    "LONGHORN_NODES",
    "LONGHORN_REPLICAS",
    "MAINTENANCES",
    "NODES",
    "PDBS",
    "PODS",
    "RBAC_KINDS",
    "REVIEWS",
    "SECRETS",
    "SELF_ACCESS_REVIEWS",
    "SELF_REVIEWS",
    "TOKEN_REVIEWS",
    "CrdInfo",
    "KubeApiServer",
    "RbacAttributes",
    "RecordedRequest",
    "Validator",
    "bootstrap_rbac",
    "free_port",
    "openapi_to_jsonschema",
    "prune",
    "rbac_attributes",
    "rbac_authorize",
]
