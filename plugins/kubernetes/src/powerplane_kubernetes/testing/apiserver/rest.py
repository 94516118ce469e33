"""Objects over REST, as the API server serves them: reads, lists, creates, updates
(``PUT`` and every ``PATCH``), deletes, on a resource and on its ``status`` subresource.

* **resourceVersion**: every object carries one (one counter for the server), stamped on
  every write; a ``PUT`` whose ``metadata.resourceVersion`` is stale is ``409 Conflict``
  ("the object has been modified; please apply your changes to the latest version and try
  again"), one without it ``422 Invalid``; a ``PATCH`` naming a stale one is 409 too; a
  create naming one is ``400`` ("resourceVersion should not be set on objects to be
  created"). ``uid`` and ``creationTimestamp`` are stamped on create and kept by updates.
  An update that changes nothing keeps the ``resourceVersion`` (the no-op detection).
* **writes**: ``POST`` (a name taken is ``409 AlreadyExists``; ``generateName``), ``PUT``,
  ``PATCH`` by merge patch, JSON patch, strategic merge patch and server-side apply
  (:mod:`.patches`; an apply that creates needs ``create`` as well as ``patch``), each on
  the main resource and on ``…/status``; every write passes
  the CRD's schema (:mod:`.crds`) and admission (:mod:`.admission`) with its operation
  (``CREATE``, ``UPDATE``, ``DELETE``) and subresource.
* **the status subresource** of a CRD that enables it: a write of the main resource leaves
  ``status`` as it was; a write of ``…/status`` changes only ``status``; ``GET …/status``
  reads the object. Any other subresource is ``404``.
* **finalizers**: a ``DELETE`` of an object with ``metadata.finalizers`` sets
  ``metadata.deletionTimestamp`` (and ``deletionGracePeriodSeconds: 0``), keeps the object
  and announces it ``MODIFIED``; the update that empties its finalizers removes it
  (``DELETED``). An update adding a finalizer to an object being deleted is ``422``
  ("no new finalizers can be added if the object is being deleted"). Without finalizers a
  ``DELETE`` removes at once. ``DeleteOptions.preconditions`` are honoured (``409``).
* **lists** with ``labelSelector`` and ``fieldSelector`` (:mod:`.patches`), with ``kind``
  and ``apiVersion``; a list walks only the objects of its resource
  (:attr:`RestServer.list_walked` counts them). A missing object is ``404 NotFound``
  (``nodes "n1" not found``).
"""

from __future__ import annotations

import uuid
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.admission import AdmissionServer
from powerplane_kubernetes.testing.apiserver.common import (
    Response,
    copy_json,
    key,
    now,
    qualified,
    status,
)
from powerplane_kubernetes.testing.apiserver.crds import crd_admit, crd_update
from powerplane_kubernetes.testing.apiserver.patches import (
    APPLY,
    PatchError,
    field_query,
    label_query,
    patched,
)
from powerplane_kubernetes.testing.apiserver.policies import AdmissionRequest
from powerplane_kubernetes.testing.apiserver.rbac import RbacAttributes, forbidden

__all__ = ["RestServer"]

_NOT_FOUND = "the server could not find the requested resource"


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an update changes nothing but what the server stamps."""
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields", "generation")}
        return {**obj, "metadata": meta}
    return strip(old) == strip(new)


def _what(resource: str) -> tuple[str, str, str]:
    """``(plural, group, plural.group)`` of a resource key."""
    plural, group = qualified(resource)
    return plural, group, f"{plural}.{group}" if group else plural


def _header(request: kmock.Request, name: str) -> str:
    return next((str(v) for k, v in request.headers.items() if k.lower() == name), "")


class RestServer(AdmissionServer):
    """The handlers of resource requests (see the module docstring)."""

    def _init_rest(self, *, longhorn: bool) -> None:
        self.longhorn = longhorn
        """Whether Longhorn's API group is installed (False: its CRDs are absent)."""
        self.pruned: list[tuple[str, str]] = []
        """``(request, field path)`` of every field a CRD's schema pruned from a write."""
        self.list_walked = 0
        """Stored objects the list handler has looked at (each list: its resource's own)."""

    # -- answers -----------------------------------------------------------------------------
    @staticmethod
    def _not_found(resource: str, name: str) -> Response:
        plural, group, what = _what(resource)
        return status(404, "NotFound", f'{what} "{name}" not found',
                      {"name": name, "kind": plural, **({"group": group} if group else {})})

    @staticmethod
    def _conflict(resource: str, name: str, why: str = "the object has been modified; "
                  "please apply your changes to the latest version and try again") -> Response:
        plural, group, what = _what(resource)
        return status(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": '
                      f"{why}", {"name": name, "kind": plural,
                                 **({"group": group} if group else {})})

    def _invalid_update(self, resource: str, name: str, field: str, why: str,
                        cause: str = "FieldValueInvalid") -> Response:
        api_version, kind, _ = self._kinds[resource]
        group = api_version.split("/")[0] if "/" in api_version else ""
        what = f"{kind}.{group}" if group else kind
        return status(422, "Invalid", f'{what} "{name}" is invalid: {field}: {why}',
                      {"name": name, "kind": kind, **({"group": group} if group else {}),
                       "causes": [{"reason": cause, "message": why, "field": field}]})

    def _admission_request(self, request: kmock.Request, resource: str, operation: str,
                           name: str, obj: dict[str, Any] | None,
                           old: dict[str, Any] | None) -> AdmissionRequest:
        group, version, plural = (resource.split("/") if resource.count("/") == 2
                                  else ("", *resource.split("/")))
        _, kind, namespaced = self._kinds.get(resource, ("", "", True))
        user, groups = self._who(request)
        options = {"kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(
            operation, "DeleteOptions"), "apiVersion": "meta.k8s.io/v1"}
        return AdmissionRequest(operation, group, version, plural, request.subresource or "",
                                kind, request.namespace or "", name, user, groups, obj, old,
                                namespaced, options)

    # -- reads -------------------------------------------------------------------------------
    def _list(self, request: kmock.Request) -> Any:
        assert request.resource is not None
        resource = key(request.resource)
        if resource not in self._kinds:
            return status(404, "NotFound", _NOT_FOUND)
        fields = field_query(request.params.get("fieldSelector", ""))
        if isinstance(fields, str):
            return status(400, "BadRequest", f'field label not supported: "{fields}"')
        labels = label_query(request.params.get("labelSelector", ""))
        items = []
        for _, obj in self._iter(resource, request.namespace):
            self.list_walked += 1
            raw = obj.raw
            if labels(raw.get("metadata", {}).get("labels") or {}) and fields(raw):
                items.append(raw)
        api_version, kind, _ = self._kinds[resource]
        return {"apiVersion": api_version, "kind": f"{kind}List",
                "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}

    def _subresource_served(self, resource: str, subresource: str | None) -> bool:
        crd = self.crds.get(resource)
        return not subresource or (subresource == "status" and crd is not None and crd.status)

    def _fetch(self, request: kmock.Request) -> Any:
        assert request.resource is not None and request.name is not None
        resource = key(request.resource)
        if resource not in self._kinds \
                or not self._subresource_served(resource, request.subresource):
            return status(404, "NotFound", _NOT_FOUND)
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        return obj.raw

    # -- create ------------------------------------------------------------------------------
    def _create(self, request: kmock.Request) -> Any:
        assert request.resource is not None
        resource = key(request.resource)
        if resource not in self._kinds or request.subresource or request.name:
            return status(404, "NotFound", _NOT_FOUND)
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return status(400, "BadRequest", "the body of the request was not an object")
        return self._create_object(request, resource, copy_json(body))

    def _create_object(self, request: kmock.Request, resource: str,
                       body: dict[str, Any]) -> Any:
        """Create ``body`` (a copy: it is changed) as a ``resource``: 201, or a refusal."""
        namespaced = self._kinds[resource][2]
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            return status(400, "BadRequest", "metadata is not an object")
        if namespaced and not request.namespace:  # a namespaced kind is made in its path
            return status(404, "NotFound", _NOT_FOUND)
        if namespaced:
            given = meta.get("namespace")
            if given and request.namespace and given != request.namespace:
                return status(400, "BadRequest", "the namespace of the provided object does "
                              "not match the namespace sent on the request")
            meta["namespace"] = request.namespace or given
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            return status(400, "BadRequest",
                          "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = str(meta["generateName"]) + uuid.uuid4().hex[:5]
        name = str(meta.get("name") or "")
        if not name:
            _, kind, _ = self._kinds[resource]
            return status(422, "Invalid", f'{kind} "" is invalid: metadata.name: Required '
                          "value: name or generateName is required")
        namespace = meta.get("namespace") if namespaced else None
        if self._find(resource, namespace, name) is not None:
            plural, group, what = _what(resource)
            return status(409, "AlreadyExists", f'{what} "{name}" already exists',
                          {"name": name, "kind": plural, **({"group": group} if group else {})})
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds", "uid",
                           "creationTimestamp", "generation"):
            meta.pop(server_set, None)
        crd = self.crds.get(resource)
        if crd is not None:
            if crd.status:
                body.pop("status", None)  # the main resource does not write status
            meta["generation"] = 1
            refused = crd_admit(crd, None, body, request.url.path, self.pruned)
            if refused is not None:
                return refused
        problem = self._invalid(resource, body)
        if problem is not None:
            return status(422, "Invalid", problem)
        refused = self._admit(self._admission_request(request, resource, "CREATE", name, body,
                                                      None), resource)
        if refused is not None:
            return refused
        self._store(resource, namespace, body, new=True)
        return Response(status=201, payload=body)

    # -- update ------------------------------------------------------------------------------
    def _replace(self, request: kmock.Request) -> Any:
        if request.resource is None or request.name is None:
            return status(405, "MethodNotAllowed", "the server does not allow this method")
        resource = key(request.resource)
        if resource not in self._kinds \
                or not self._subresource_served(resource, request.subresource):
            return status(404, "NotFound", _NOT_FOUND)
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return status(400, "BadRequest", "the body of the request was not an object")
        if not (body.get("metadata") or {}).get("resourceVersion"):
            return status(422, "Invalid", f'{resource.rsplit("/", 1)[-1]} "{request.name}" is '
                          "invalid: metadata.resourceVersion: Invalid value: 0x0: must be "
                          "specified for an update")
        return self._update(request, resource, obj, copy_json(body))

    def _patch(self, request: kmock.Request) -> Any:
        if request.resource is None or request.name is None:
            return status(405, "MethodNotAllowed", "the server does not allow this method")
        resource = key(request.resource)
        if resource not in self._kinds \
                or not self._subresource_served(resource, request.subresource):
            return status(404, "NotFound", _NOT_FOUND)
        content_type = _header(request, "content-type")
        if content_type.startswith(APPLY) and not request.params.get("fieldManager"):
            return status(400, "BadRequest", "PATCH " + request.url.path + ": fieldManager "
                          "is required for apply requests")
        obj = self._find(resource, request.namespace, request.name)
        old = copy_json(obj.raw) if obj is not None else None
        try:
            new = patched(content_type, request.text, request.data, old,
                          custom=resource in self.crds)
        except PatchError as exc:
            return status(exc.code, exc.reason, str(exc))
        except KeyError:
            return self._not_found(resource, request.name)
        if obj is None:  # server-side apply of an absent object creates it
            if request.subresource:
                return self._not_found(resource, request.name)
            refused = self._may_create(request, resource)
            if refused is not None:
                return refused
            new.setdefault("metadata", {})["name"] = request.name
            return self._create_object(request, resource, new)
        return self._update(request, resource, obj, new)

    def _may_create(self, request: kmock.Request, resource: str) -> Response | None:
        """An apply that creates needs ``create`` as well as ``patch`` (the API server's
        patch handler authorizes the create it makes)."""
        if not self.enforce_rbac:
            return None
        user, groups = self._who(request)
        plural, group = qualified(resource)
        attrs = RbacAttributes("create", group, plural, "", request.namespace or "",
                               request.name or "")
        allowed, why = self.authorize(user, groups, attrs, reason=False)
        return None if allowed else forbidden(user, attrs, reason=why)

    def _update(self, request: kmock.Request, resource: str, obj: Any,
                new: dict[str, Any]) -> Any:
        """Write ``new`` (a copy) over the stored ``obj``: 200, or a refusal."""
        assert request.name is not None
        name = request.name
        old = copy_json(obj.raw)
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            return status(400, "BadRequest", "metadata is not an object")
        if meta.get("name", name) != name:
            return status(400, "BadRequest", f"the name of the object ({meta.get('name')}) "
                          f"does not match the name on the URL ({name})")
        wanted = meta.get("resourceVersion")
        if wanted and wanted != old["metadata"].get("resourceVersion"):
            return self._conflict(resource, name)
        meta["resourceVersion"] = old["metadata"].get("resourceVersion")
        to_status = request.subresource == "status"
        crd = self.crds.get(resource)
        if crd is not None:
            new = crd_update(crd, old, new, to_status)
            meta = new["metadata"]
        for server_set in ("uid", "creationTimestamp", "deletionTimestamp",
                           "deletionGracePeriodSeconds", "name", "namespace"):
            if server_set in old["metadata"]:
                meta[server_set] = old["metadata"][server_set]
            else:
                meta.pop(server_set, None)
        if old["metadata"].get("deletionTimestamp"):
            added = sorted(set(meta.get("finalizers") or ()) -
                           set(old["metadata"].get("finalizers") or ()))
            if added:
                listed = ", ".join(f'"{f}"' for f in added)
                return self._invalid_update(
                    resource, name, "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being "
                    f"deleted, found new finalizers []string{{{listed}}}",
                    "FieldValueForbidden")
        if crd is not None:
            refused = crd_admit(crd, old, new, request.url.path, self.pruned)
            if refused is not None:
                return refused
        problem = self._invalid(resource, new)
        if problem is not None:
            return status(422, "Invalid", problem)
        refused = self._admit(self._admission_request(request, resource, "UPDATE", name, new,
                                                      old), resource)
        if refused is not None:
            return refused
        if _same(old, new):
            return old  # the API server's no-op update: nothing written, same version
        namespace = old["metadata"].get("namespace")
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._stamp(new, resource, new=False)
            self._remove(resource, obj, last=new)  # the last finalizer gone: deleted
            return new
        self._store(resource, namespace, new, new=False)
        return new

    # -- delete ------------------------------------------------------------------------------
    def _delete(self, request: kmock.Request) -> Any:
        if request.resource is None:
            return status(405, "MethodNotAllowed", "the server does not allow this method")
        resource = key(request.resource)
        if resource not in self._kinds or request.subresource:
            return status(404, "NotFound", _NOT_FOUND)
        if request.name is None:
            return self._delete_collection(request, resource)
        obj = self._find(resource, request.namespace, request.name)
        if obj is None:
            return self._not_found(resource, request.name)
        options = request.data if isinstance(request.data, dict) else {}
        pre = options.get("preconditions") or {}
        meta = obj.raw.get("metadata") or {}
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(field) and pre[field] != meta.get(field):
                return self._conflict(resource, request.name, (
                    f"Precondition failed: {label} in precondition: {pre[field]}, "
                    f"{label} in object meta: {meta.get(field)}"))
        return self._delete_object(request, resource, obj)

    def _delete_object(self, request: kmock.Request, resource: str, obj: Any) -> Any:
        old = copy_json(obj.raw)
        name = old["metadata"]["name"]
        refused = self._admit(self._admission_request(request, resource, "DELETE", name, None,
                                                      old), resource)
        if refused is not None:
            return refused
        meta = old["metadata"]
        if not meta.get("finalizers"):
            self._remove(resource, obj)
            return obj.last.raw
        if meta.get("deletionTimestamp"):
            return old  # being deleted already: it goes when its finalizers do
        meta["deletionTimestamp"] = now()
        meta["deletionGracePeriodSeconds"] = 0
        if resource in self.crds:
            meta["generation"] = int(meta.get("generation") or 1) + 1
        self._store(resource, meta.get("namespace"), old, new=False)
        return old

    def _delete_collection(self, request: kmock.Request, resource: str) -> Any:
        fields = field_query(request.params.get("fieldSelector", ""))
        if isinstance(fields, str):
            return status(400, "BadRequest", f'field label not supported: "{fields}"')
        labels = label_query(request.params.get("labelSelector", ""))
        items = []
        for _, obj in list(self._iter(resource, request.namespace)):
            raw = obj.raw
            if labels(raw.get("metadata", {}).get("labels") or {}) and fields(raw):
                done = self._delete_object(request, resource, obj)
                if isinstance(done, Response):
                    return done
                items.append(done)
        api_version, kind, _ = self._kinds[resource]
        return {"apiVersion": api_version, "kind": f"{kind}List",
                "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}
