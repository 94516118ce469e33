"""Who is asking, and whether they may: the test API server's authentication, impersonation,
RBAC authorization and reviews.

**Authentication.** A request is its bearer token's user (:meth:`AuthzServer.issue_token`,
or a kubeconfig's, :meth:`AuthzServer.write_kubeconfig`), with ``system:authenticated``
among its groups as the API server's authenticator adds it; a request with no token is
``system:anonymous`` in ``system:unauthenticated``; a token the server never issued, or
one that expired, is ``401 Unauthorized``. The cluster's admin is a token of its own: a
kubeconfig written with neither ``client`` nor ``user`` is ``kubernetes-admin`` in
``system:masters`` (as kubeadm's and kind's admin kubeconfig), which the API server allows
everything before any authorizer is asked; the harness's own seeding (``add_node``,
``add_rbac``, ...) is no request at all.

**Impersonation** (``Impersonate-User``, ``Impersonate-Group``): the request acts as the
user and groups named (``system:authenticated`` added unless ``system:unauthenticated``
is named, and a service account's groups where no group is named, as the impersonation
filter does), once the requester may ``impersonate`` ``users`` named by the user
(``serviceaccounts`` in its namespace for a service account) and ``groups`` named by each
group; else ``403 Forbidden`` in the API server's words, and nothing is done.
:attr:`RecordedRequest.user` is who the request acted as.

**Authorization** (``enforce_rbac=True``, the default): every request is authorized as
the acting user, with the verb, API group, resource and subresource
(``nodemaintenances/status``, ``pods/eviction``), namespace and name the request-info
resolver derives (:func:`.rbac.attributes`), by the RBAC authorizer over the stored
ClusterRoles, Roles and bindings (:class:`.rbac.RbacIndex`, rebuilt when one changes;
decisions remembered until then); a denial is ``403 Forbidden`` with the API server's
wording (:func:`.rbac.forbidden`). A fresh server holds the bootstrap roles a cluster
comes with: ``cluster-admin`` bound to ``system:masters``, ``system:basic-user``
(self reviews), ``system:discovery`` and ``system:public-info-viewer`` bound to the
authenticated (and the last to the unauthenticated).

**Reviews**, answered and never stored: a SubjectAccessReview by the same authorizer
(``system:masters`` allowed, then RBAC: ``status.allowed`` and the authorizer's reason), and
a SelfSubjectAccessReview so for the user the request acts as; a SelfSubjectReview with
the acting user and groups; a TokenReview of a token the server issued (``authenticated``,
its user and groups, ``spec.audiences`` echoed) or not (with the authenticator's words in
``status.error``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.base import ServerBase
from powerplane_kubernetes.testing.apiserver.common import RBAC_KINDS, Response, now, status
from powerplane_kubernetes.testing.apiserver.rbac import (
    PRIVILEGED_GROUP,
    RbacAttributes,
    RbacIndex,
    attributes,
    forbidden,
)

__all__ = ["ADMIN_USER", "ANONYMOUS", "AuthzServer", "Identity", "bootstrap_rbac"]

Identity = tuple[str, tuple[str, ...]]
"""A user and its groups."""
ANONYMOUS: Identity = ("system:anonymous", ("system:unauthenticated",))
ADMIN_USER = "kubernetes-admin"
"""The user of a kubeconfig written with neither ``client`` nor ``user``: the cluster's
admin, in ``system:masters``."""
_SA = "system:serviceaccount:"
_DECISIONS_KEPT = 100_000


def _crb(name: str, role: str, *groups: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": g} for g in groups]}


def _role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}


def bootstrap_rbac() -> list[dict[str, Any]]:
    """The roles and bindings a new cluster holds that this server's requests meet
    (``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``), in apply order."""
    info = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    return [
        _role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _crb("cluster-admin", "cluster-admin", PRIVILEGED_GROUP),
        _role("system:basic-user", [
            {"apiGroups": ["authorization.k8s.io"],
             "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
             "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
             "verbs": ["create"]}]),
        _crb("system:basic-user", "system:basic-user", "system:authenticated"),
        _role("system:discovery", [{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", *info],
            "verbs": ["get"]}]),
        _crb("system:discovery", "system:discovery", "system:authenticated"),
        _role("system:public-info-viewer", [{"nonResourceURLs": info, "verbs": ["get"]}]),
        _crb("system:public-info-viewer", "system:public-info-viewer",
             "system:authenticated", "system:unauthenticated"),
    ]


class AuthzServer(ServerBase):
    """Authentication, impersonation, RBAC and the reviews (see the module docstring)."""

    def _init_authz(self, *, enforce_rbac: bool, bootstrap: bool) -> None:
        self.enforce_rbac = enforce_rbac
        """Authorize every request by RBAC (False: every authenticated request passes,
        as the server did before it enforced; reviews still answer by RBAC)."""
        self.bootstrap = bootstrap
        """Store the bootstrap roles and bindings when the server starts."""
        self._users: dict[str, Identity] = {}  # "Bearer <token>" -> user, groups
        self._expiry: dict[str, float] = {}  # "Bearer <token>" -> wall-clock expiry
        self._acting_as: dict[int, Identity | Response] = {}  # by request, while served
        self._rbac: RbacIndex | None = None
        self._decisions: dict[tuple[Any, ...], tuple[bool, str]] = {}
        self._every_name: dict[tuple[Any, ...], bool] = {}
        self.admin_token = self.issue_token(ADMIN_USER, [PRIVILEGED_GROUP], client="")
        """The cluster admin's bearer token (``kubernetes-admin`` in ``system:masters``)."""

    def _started(self) -> None:
        super()._started()
        if self.bootstrap:
            self.add_rbac(*bootstrap_rbac())

    def _changed(self, resource: str) -> None:
        super()._changed(resource)
        if resource in _RBAC_RESOURCES:
            self._rbac = None
            self._decisions.clear()
            self._every_name.clear()

    # -- tokens and kubeconfigs --------------------------------------------------------------
    def write_kubeconfig(self, path: Path, *, context: str = "kmock",
                         client: str | None = None, user: str | None = None,
                         groups: Sequence[str] = ()) -> Path:
        """A kubeconfig file that reaches this server. With ``client`` (or ``user``), its
        user carries a bearer token of its own, so the requests made with it are recorded
        as that client's (:attr:`RecordedRequest.client`, ``user`` when no ``client`` is
        given); the token authenticates as ``user`` (default: the client's name) in
        ``groups`` (and ``system:authenticated``), as a SelfSubjectReview answers. With
        neither, the cluster admin's token (:data:`ADMIN_USER`, recorded as client "")."""
        name = client if client is not None else user
        token = self.admin_token if name is None else self.issue_token(
            user if user is not None else name, groups, client=name)
        url = self.url or (f"http://{self.host}:{self.port}" if self.port else "")
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "kmock", "cluster": {"server": url}}],
            "users": [{"name": "kmock", "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": "kmock", "user": "kmock"}}],
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    def issue_token(self, user: str, groups: Sequence[str] = (), *,
                    client: str | None = None, expires_in: float | None = None) -> str:
        """A bearer token that authenticates as ``user`` in ``groups`` (and
        ``system:authenticated``), as a service account token or an OIDC token the API
        server trusts would; its requests are recorded as ``client`` (default: ``user``).
        With ``expires_in`` (seconds, may be negative) it stops authenticating then."""
        token = uuid.uuid4().hex
        bearer = f"Bearer {token}"
        self._clients[bearer] = client if client is not None else user
        self._users[bearer] = (user, tuple(dict.fromkeys([*groups, "system:authenticated"])))
        if expires_in is not None:
            self._expiry[bearer] = time.time() + expires_in
        return token

    def grant(self, subject: str, *roles: Mapping[str, Any], kind: str = "") -> None:
        """Store ``roles`` (ClusterRoles and Roles, as ``operator manifests`` prints them)
        and bind each to ``subject``: a ClusterRoleBinding for a ClusterRole, a RoleBinding
        in its namespace for a Role, each named ``<role>:<subject>``. ``kind`` is ``User``
        (the default), ``Group``, or ``ServiceAccount`` (the default for a subject
        ``system:serviceaccount:NS:NAME``)."""
        if not kind:
            kind = "ServiceAccount" if subject.startswith(_SA) else "User"
        who: dict[str, str] = {"kind": kind, "name": subject}
        if kind == "ServiceAccount":
            ns, name = subject[len(_SA):].split(":") if subject.startswith(_SA) else \
                ("", subject)
            who = {"kind": kind, "name": name, "namespace": ns}
        else:
            who["apiGroup"] = "rbac.authorization.k8s.io"
        docs: list[Mapping[str, Any]] = []
        for role in roles:
            meta = role["metadata"]
            namespace = meta.get("namespace")
            binding: dict[str, Any] = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding" if role["kind"] == "Role" else "ClusterRoleBinding",
                "metadata": {"name": f"{meta['name']}:{subject}",
                             **({"namespace": namespace} if role["kind"] == "Role" else {})},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                            "name": meta["name"]},
                "subjects": [who]}
            docs += [role, binding]
        self.add_rbac(*docs)

    def _token_user(self, bearer: str) -> Identity | None:
        """The user of a bearer token the server issued and that has not expired."""
        found = self._users.get(bearer)
        expiry = self._expiry.get(bearer)
        if found is None or (expiry is not None and time.time() >= expiry):
            return None
        return found

    # -- who is asking -----------------------------------------------------------------------
    @staticmethod
    def _header(request: kmock.Request, name: str) -> list[str]:
        """Every value of one request header (kmock's dict keeps one; aiohttp's has all)."""
        raw = getattr(getattr(request, "_raw_request", None), "headers", None)
        if raw is not None and hasattr(raw, "getall"):
            return [str(v) for v in raw.getall(name, [])]
        return [str(v) for k, v in request.headers.items() if k.lower() == name.lower()]

    def _authenticate(self, request: kmock.Request) -> Identity | Response:
        """The token's user, anonymous without one, or ``401 Unauthorized``."""
        bearer = next((v for k, v in request.headers.items()
                       if k.lower() == "authorization"), "")
        if not bearer:
            return ANONYMOUS
        found = self._token_user(bearer)
        if found is None:
            return status(401, "Unauthorized", "Unauthorized")
        return found

    def _acting(self, request: kmock.Request) -> Identity | Response:
        """Who the request acts as (its token's user, or the one it impersonates), or the
        API server's refusal: 401 for a token it does not know or that expired, 403 where
        RBAC does not allow the impersonation."""
        found = self._authenticate(request)
        if isinstance(found, Response):
            return found
        user, groups = found
        as_user = self._header(request, "Impersonate-User")
        as_groups = self._header(request, "Impersonate-Group")
        if not as_user and not as_groups:
            return found
        if not as_user:
            return status(500, "InternalError", "Internal error occurred: requested "
                          f"{as_groups} without impersonating a user")
        wanted: list[RbacAttributes] = []
        if as_user[0].startswith(_SA) and as_user[0].count(":") == 3:
            ns, name = as_user[0][len(_SA):].split(":")
            wanted.append(RbacAttributes("impersonate", "", "serviceaccounts",
                                         namespace=ns, name=name))
            # a service account's groups are known, added where none are asked for
            extra = [] if as_groups else ["system:serviceaccounts",
                                          f"system:serviceaccounts:{ns}"]
        else:
            wanted.append(RbacAttributes("impersonate", "", "users", name=as_user[0]))
            extra = []
        wanted += [RbacAttributes("impersonate", "", "groups", name=g) for g in as_groups]
        for attrs in wanted:
            if not self.authorize(user, groups, attrs)[0]:
                return forbidden(user, attrs)
        unauthenticated = "system:unauthenticated" in as_groups
        every = tuple(dict.fromkeys([*as_groups, *extra, *(
            () if unauthenticated else ("system:authenticated",))]))
        return as_user[0], every

    def _identify(self, request: kmock.Request) -> Identity | Response:
        """:meth:`_acting` of a request being served, worked out once."""
        found = self._acting_as.get(id(request))
        if found is None:
            found = self._acting_as[id(request)] = self._acting(request)
        return found

    def _answered(self, request: kmock.Request) -> None:
        self._acting_as.pop(id(request), None)

    def _who(self, request: kmock.Request) -> Identity:
        """Who an admitted request acts as (:meth:`_acting` passed it)."""
        found = self._identify(request)
        return ANONYMOUS if isinstance(found, Response) else found

    def _user_of(self, request: kmock.Request) -> str:
        user = self._who(request)[0]
        return "" if user == ANONYMOUS[0] else user

    # -- may they ----------------------------------------------------------------------------
    def _rbac_index(self) -> RbacIndex:
        if self._rbac is None:
            self._rbac = RbacIndex({kind: self._raw(resource)
                                    for kind, resource in RBAC_KINDS.items()})
        return self._rbac

    def authorize(self, user: str, groups: Sequence[str], attrs: RbacAttributes | None,
                  *, method: str = "GET", path: str = "",
                  reason: bool = True) -> tuple[bool, str]:
        """The API server's decision for a user: ``system:masters`` allowed, then RBAC
        (a resource request's attributes, or, with ``attrs`` None, the ``path``). With
        ``reason`` False an allowed request may come without the authorizer's reason
        (what a request needs: a rule with no ``resourceNames`` allows every name, so the
        answer for a resource is kept once, not once per object)."""
        if PRIVILEGED_GROUP in groups:
            return True, ""
        if not reason and attrs is not None and attrs.name:
            unnamed = (user, tuple(groups), attrs.verb, attrs.group, attrs.resource,
                       attrs.subresource, attrs.namespace)
            every = self._every_name.get(unnamed)
            if every is None:
                if len(self._every_name) > _DECISIONS_KEPT:
                    self._every_name.clear()
                every = self._every_name[unnamed] = self._rbac_index().allows_every_name(
                    user, groups, attrs.as_review())
            if every:
                return True, ""
        found = (user, tuple(groups), attrs, method if attrs is None else "",
                 path if attrs is None else "")
        decided = self._decisions.get(found)
        if decided is None:
            if attrs is None:
                verb = {"HEAD": "get"}.get(method.upper(), method.lower())
                decided = self._rbac_index().authorize(user, groups, non_resource={
                    "verb": verb, "path": path})
            else:
                decided = self._rbac_index().authorize(user, groups, resource=attrs.as_review())
            if len(self._decisions) > _DECISIONS_KEPT:
                self._decisions.clear()
            self._decisions[found] = decided
        return decided

    def _authorized(self, request: kmock.Request,
                    who: Identity) -> tuple[RbacAttributes | None, Response | None]:
        """The request's RBAC attributes and, when the authorizer refuses it, the 403."""
        path = request.url.path
        attrs = attributes(str(request.method.value), path, request.params)
        if not self.enforce_rbac:
            return attrs, None
        allowed, why = self.authorize(who[0], who[1], attrs, method=str(request.method.value),
                                      path=path, reason=False)
        if allowed:
            return attrs, None
        return attrs, forbidden(who[0], attrs, method=str(request.method.value), path=path,
                                reason=why)

    # -- reviews -----------------------------------------------------------------------------
    def _review(self, request: kmock.Request) -> Any:
        """A SubjectAccessReview, answered by the server's authorizer (nothing is stored)."""
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return status(400, "BadRequest", "the body of the request was not an object")
        spec = body.get("spec") or {}
        what = 'SubjectAccessReview.authorization.k8s.io "" is invalid'
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            return status(422, "Invalid", f"{what}: spec.resourceAttributes: Invalid value: "
                          '"null": exactly one of nonResourceAttributes or '
                          "resourceAttributes must be specified")
        user, groups = str(spec.get("user") or ""), [str(g) for g in spec.get("groups") or []]
        if not user and not groups:
            return status(422, "Invalid", f'{what}: spec.user: Invalid value: "": at least '
                          "one of user or group must be specified")
        if PRIVILEGED_GROUP in groups:
            allowed, reason = True, ""
        elif resource is not None:
            allowed, reason = self._rbac_index().authorize(user, groups, resource=resource)
        else:
            allowed, reason = self._rbac_index().authorize(user, groups, non_resource=non_resource)
        result: dict[str, Any] = {"allowed": allowed}
        if reason:
            result["reason"] = reason
        out = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "metadata": {"creationTimestamp": None}, "spec": spec, "status": result}
        return Response(status=201, payload=out)

    def _self_access_review(self, request: kmock.Request) -> Any:
        """A SelfSubjectAccessReview: the authorizer's answer for the user and groups the
        request acts as (nothing is stored)."""
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return status(400, "BadRequest", "the body of the request was not an object")
        spec = body.get("spec") or {}
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            return status(422, "Invalid", 'SelfSubjectAccessReview.authorization.k8s.io "" is '
                          "invalid: spec.resourceAttributes: Invalid value: \"null\": exactly "
                          "one of nonResourceAttributes or resourceAttributes must be specified")
        user, groups = self._who(request)
        if PRIVILEGED_GROUP in groups:
            allowed, reason = True, ""
        elif resource is not None:
            allowed, reason = self._rbac_index().authorize(user, groups, resource=resource)
        else:
            allowed, reason = self._rbac_index().authorize(user, groups, non_resource=non_resource)
        result: dict[str, Any] = {"allowed": allowed}
        if reason:
            result["reason"] = reason
        out = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "metadata": {"creationTimestamp": None}, "spec": spec, "status": result}
        return Response(status=201, payload=out)

    def _self_review(self, request: kmock.Request) -> Any:
        """A SelfSubjectReview: who the request acts as (its token's user, or the user it
        impersonates)."""
        user, groups = self._who(request)
        out = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
               "metadata": {"creationTimestamp": now()},
               "status": {"userInfo": {"username": user, "groups": list(groups)}}}
        return Response(status=201, payload=out)

    def _token_review(self, request: kmock.Request) -> Any:
        """A TokenReview: the user and groups of ``spec.token`` when the server issued it
        and it has not expired (nothing is stored; the spec is answered as sent, as the API
        server does)."""
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return status(400, "BadRequest", "the body of the request was not an object")
        spec = dict(body.get("spec") or {})
        token = str(spec.get("token") or "")
        if not token:
            return status(422, "Invalid", 'TokenReview.authentication.k8s.io "" is invalid: '
                          'spec.token: Required value')
        bearer = f"Bearer {token}"
        found = self._token_user(bearer)
        result: dict[str, Any]
        if found is not None:
            result = {"authenticated": True,
                      "user": {"username": found[0], "groups": list(found[1])}}
            if spec.get("audiences"):
                result["audiences"] = list(spec["audiences"])
        elif bearer in self._users:
            result = {"authenticated": False, "error": "[invalid bearer token, token has "
                      "expired]"}
        else:
            result = {"authenticated": False, "error": "[invalid bearer token]"}
        out = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "metadata": {"creationTimestamp": None}, "spec": spec, "status": result}
        return Response(status=201, payload=out)

    def reviews(self) -> dict[str, Any]:
        """The review resources and their handlers (``POST`` only, never stored)."""
        return {_REVIEW: self._review, _SELF_ACCESS_REVIEW: self._self_access_review,
                _SELF_REVIEW: self._self_review, _TOKEN_REVIEW: self._token_review}


_RBAC_RESOURCES = frozenset(RBAC_KINDS.values())
_REVIEW = "authorization.k8s.io/v1/subjectaccessreviews"
_SELF_ACCESS_REVIEW = "authorization.k8s.io/v1/selfsubjectaccessreviews"
_SELF_REVIEW = "authentication.k8s.io/v1/selfsubjectreviews"
_TOKEN_REVIEW = "authentication.k8s.io/v1/tokenreviews"


def as_mapping(identity: Identity) -> Mapping[str, Any]:
    """An identity as ``request.userInfo`` holds it."""
    return {"username": identity[0], "groups": list(identity[1])}
