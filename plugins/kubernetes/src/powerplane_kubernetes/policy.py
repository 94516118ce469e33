"""The ``kubernetes`` policy type: each action is an RBAC verb, and the API server decides.

::

    policy:
      type: kubernetes
      kubeconfig: ./kubeconfig   # absent: in-cluster, else $KUBECONFIG, else ~/.kube/config
      context: admin@prod        # absent: the kubeconfig's current-context
      concurrency: 16            # SubjectAccessReviews in flight for one decision

Every action (:class:`~powerplane.authority.actions.Action`) is a verb on the virtual
resource ``servers`` of the API group ``powerplane.io`` (no such resource is served: RBAC
rules may name any resource), the resource name being the node. The verb is the action's
name without ``servers:`` (``reboot``, ``shutdown``, ``power-on``, ``cordon``,
``uncordon``, ``drain``, ``maintenance-abandon``, ``maintenance-resolve``, ``terminate``),
except ``servers:read``, which is ``get`` (RBAC's own word for reading one object). So
"allow reboot, deny shutdown" is an ordinary Role::

    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: rebooter}
    rules:
    - apiGroups: [powerplane.io]
      resources: [servers]
      verbs: [reboot]
      resourceNames: [node-1, node-2]   # absent: every node

:meth:`KubernetesPolicy.decide` asks the API server one review per node, at most
``concurrency`` at a time: about the client's own identity (a person's CLI asking for
itself: the user and groups a ``SelfSubjectReview`` gives, asked once) a
``SelfSubjectAccessReview`` (``POST
/apis/authorization.k8s.io/v1/selfsubjectaccessreviews``, which every authenticated user
may make through ``system:basic-user``); about anyone else (the executor and the Servers
gateway asking about a requester) a ``SubjectAccessReview`` (``POST
/apis/authorization.k8s.io/v1/subjectaccessreviews``) for the identity's user and groups
exactly as given, whose ``create`` is granted to those two only (it discloses anyone's
rights), and returns a :class:`~powerplane.authority.policy.Decision` whose rule quotes the
answer (``status.allowed``, ``status.denied``, ``status.reason``,
``status.evaluationError``). Nothing is cached: a grant removed after a request was made
refuses the next check. An API server that cannot answer is no decision: the error is a
:class:`PolicyUnavailable` (a :class:`~powerplane.lifecycle.TemporaryPortError`, exit 1,
tried again) for a timeout, a dropped connection, 408/409/429 or a 5xx, and a
:class:`~powerplane.lifecycle.PermanentPortError` for any other refusal (a 403: the asker
may not create SubjectAccessReviews); either way the act is not taken.

A wildcard rule (``cluster-admin``: ``apiGroups: ["*"], resources: ["*"], verbs: ["*"]``)
passes every verb on every node, as it passes everything else.

:meth:`KubernetesPolicy.who_am_i` asks a ``SelfSubjectReview``
(``authentication.k8s.io/v1``) who the API access authenticates as: the identity the
API server would put in ``request.userInfo`` (``via="kubernetes"``).

Nothing here imports lightkube until a policy is built and asked.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from powerplane import Decision, Identity, PolicyContext, PolicyType, StrictInt, Timeouts
from powerplane.lifecycle import Action, TemporaryPortError

if TYPE_CHECKING:
    from powerplane import NodeSpec
    from powerplane_kubernetes.client import KubeApi

__all__ = [
    "GROUP",
    "KUBERNETES_POLICY",
    "RESOURCE",
    "KubernetesPolicy",
    "KubernetesPolicyConfig",
    "PolicyUnavailable",
    "rbac_verb",
]

GROUP = "powerplane.io"
"""The API group of the virtual resource the actions are verbs on."""
RESOURCE = "servers"
"""The virtual resource; its resource names are the deployment's node names."""


def rbac_verb(action: Action) -> str:
    """The RBAC verb of ``action``: its name without ``servers:``; ``servers:read`` is
    ``get``."""
    return "get" if action is Action.READ else action.verb


class PolicyUnavailable(TemporaryPortError):
    """The API server could not answer a SubjectAccessReview now (the act is not taken)."""


class KubernetesPolicyConfig(BaseModel):
    """``policy: {type: kubernetes}``: the API server's RBAC decides every action."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["kubernetes"]
    kubeconfig: str | None = None
    """A kubeconfig (relative: to the deployment file's folder); absent: the pod's service
    account in the cluster, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    context: str | None = Field(None, min_length=1)
    """The kubeconfig context; absent: its ``current-context``."""
    timeouts: Timeouts = Field(default_factory=lambda: Timeouts(connect_s=5, read_s=30))
    """Bounds on each SubjectAccessReview."""
    concurrency: StrictInt = Field(16, ge=1, le=256)
    """SubjectAccessReviews in flight at once for one decision over many nodes."""


def _quote(status: dict[str, Any]) -> str:
    """The API server's answer in words: ``allowed=true denied=false reason "..."``."""
    words = (f"allowed={'true' if status.get('allowed') else 'false'} "
             f"denied={'true' if status.get('denied') else 'false'}")
    reason = str(status.get("reason") or "")
    words += f" reason {reason!r}" if reason else " (no reason given)"
    error = str(status.get("evaluationError") or "")
    if error:
        words += f" evaluationError {error!r}"
    return words


class KubernetesPolicy:
    """Decides each action by a review per node (a SelfSubjectAccessReview about the
    client's own identity, else a SubjectAccessReview; see the module docstring)."""

    def __init__(self, api: KubeApi, *, concurrency: int = 16, where: str = "policy") -> None:
        self.api = api
        self.concurrency = concurrency
        self._me: Identity | None = None
        """This client's identity as the API server authenticates it (asked once)."""
        self.description = (f"Kubernetes RBAC ({where}): verbs on {RESOURCE}.{GROUP}, asked by "
                            "a SubjectAccessReview per node (a SelfSubjectAccessReview for "
                            "its own identity)")

    async def aclose(self) -> None:
        await self.api.aclose()

    async def own(self, identity: Identity) -> bool:
        """Whether ``identity`` is this client's own, as the API server authenticates it
        (its user and the same set of groups; asked once by a SelfSubjectReview)."""
        if self._me is None:
            self._me = await self.who_am_i()
        me = self._me
        return identity.user == me.user and set(identity.groups) == set(me.groups)

    async def review(self, identity: Identity, verb: str, node: str, *,
                     own: bool | None = None) -> dict[str, Any]:
        """One review: the answer's ``status`` (a dict). About this client's own identity
        (``own``; None: :meth:`own` asks) a SelfSubjectAccessReview, which every
        authenticated user may make (``system:basic-user``); about another (the
        executor's and the gateway's question about a requester) a SubjectAccessReview,
        whose ``create`` discloses anyone's rights and is granted to the executor and the
        gateway only."""
        if own is None:
            own = await self.own(identity)
        from lightkube.models.authorization_v1 import (
            ResourceAttributes,
            SelfSubjectAccessReviewSpec,
            SubjectAccessReviewSpec,
        )
        from lightkube.resources.authorization_v1 import (
            SelfSubjectAccessReview,
            SubjectAccessReview,
        )

        from powerplane_kubernetes.errors import map_error

        attributes = ResourceAttributes(group=GROUP, resource=RESOURCE, verb=verb, name=node)
        what = f"asking the API server whether {identity.user} may {verb} {RESOURCE}/{node}"
        try:
            review: SelfSubjectAccessReview | SubjectAccessReview
            if own:
                review = SelfSubjectAccessReview(spec=SelfSubjectAccessReviewSpec(
                    resourceAttributes=attributes))
            else:
                review = SubjectAccessReview(spec=SubjectAccessReviewSpec(
                    user=identity.user, groups=list(identity.groups),
                    resourceAttributes=attributes))
            answer = await self.api.client().create(review)
        except Exception as exc:  # every failure is mapped; none is an answer
            error = map_error(exc, what)
            if isinstance(error, TemporaryPortError):
                raise PolicyUnavailable(f"{error} (no decision: the act is not taken)") \
                    from None
            raise error from None
        status = answer.status.to_dict() if answer.status is not None else {}
        return dict(status)

    async def decide(
        self, identity: Identity, action: Action,
        nodes: Sequence[tuple[str, NodeSpec | None]],
    ) -> list[Decision]:
        verb = rbac_verb(action)
        bound = asyncio.Semaphore(self.concurrency)
        own = await self.own(identity) if nodes else False
        kind = "SelfSubjectAccessReview" if own else "SubjectAccessReview"

        async def one(node: str) -> Decision:
            async with bound:
                status = await self.review(identity, verb, node, own=own)
            rule = (f"the API server ({kind} of {verb} on "
                    f"{RESOURCE}.{GROUP} {node!r}) answered {_quote(status)}")
            return Decision(bool(status.get("allowed")) and not status.get("denied"),
                            action, identity, rule)

        tasks = [asyncio.ensure_future(one(node)) for node, _ in nodes]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:  # one failed: the others are not left running
                task.cancel()

    async def who_am_i(self) -> Identity:
        """Who the API access authenticates as (a SelfSubjectReview): user and groups as
        the API server puts them in ``request.userInfo``."""
        from lightkube.resources.authentication_v1 import SelfSubjectReview

        from powerplane_kubernetes.errors import map_error

        try:
            answer = await self.api.client().create(SelfSubjectReview())
        except Exception as exc:
            error = map_error(exc, "asking the API server who this client is "
                                  "(SelfSubjectReview)")
            if isinstance(error, TemporaryPortError):
                raise PolicyUnavailable(str(error)) from None
            raise error from None
        info = answer.status.userInfo if answer.status is not None else None
        if info is None or not info.username:
            raise PolicyUnavailable("the API server's SelfSubjectReview named no user")
        return Identity(user=info.username, groups=tuple(info.groups or ()), via="kubernetes")


def _factory(config: KubernetesPolicyConfig, context: PolicyContext) -> KubernetesPolicy:
    from powerplane_kubernetes.client import KubeApi
    from powerplane_kubernetes.config import ApiAccess
    from powerplane_kubernetes.secrets import environment_kubeconfig

    source = context.source
    config_dir = Path(source).parent if source and not source.startswith("<") else None
    where = "policy"
    kubeconfig = config.kubeconfig
    if kubeconfig is None:  # as kubectl: in the cluster, else $KUBECONFIG, else ~/.kube/config
        found = environment_kubeconfig()
        if found is not None:
            kubeconfig = str(found)
            where = "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "~/.kube/config"
    access = ApiAccess(kubeconfig=kubeconfig, context=config.context, timeouts=config.timeouts)
    api = KubeApi(access, config_dir, where=where,
                  context_where="policy.context" if config.context else None)
    return KubernetesPolicy(api, concurrency=config.concurrency, where=where)


KUBERNETES_POLICY: PolicyType[KubernetesPolicyConfig] = PolicyType(
    "kubernetes", KubernetesPolicyConfig, _factory,
    description="Kubernetes RBAC: each action a verb on servers.powerplane.io (resource name "
                "= the node), decided by a SubjectAccessReview per node (a SelfSubjectAccessReview "
                "for the client's own identity), never cached")
"""The ``kubernetes`` policy type, registered by :mod:`powerplane_kubernetes.plugin`."""
