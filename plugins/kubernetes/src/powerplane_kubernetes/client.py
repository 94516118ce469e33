"""The one way this distribution talks to the Kubernetes API: lightkube's ``AsyncClient``.

:class:`KubeApi` holds the API access (a kubeconfig and a context, or the pod's service
account), builds the client on first use in the running event loop (an httpx client
belongs to the loop it was made in, so a new loop gets a new client), and offers the few
calls the ports make, each answering plain JSON dicts as the API returns them:

==========================================  ========================================
call                                        request
==========================================  ========================================
:meth:`KubeApi.get_node`                    ``GET /api/v1/nodes/{name}``
:meth:`KubeApi.list_nodes`                  ``GET /api/v1/nodes``
:meth:`KubeApi.patch_node`                  ``PATCH /api/v1/nodes/{name}`` (merge patch)
:meth:`KubeApi.pods_on`                     ``GET /api/v1/pods?fieldSelector=spec.nodeName=…``
:meth:`KubeApi.list_pods`                   ``GET /api/v1/namespaces/{ns}/pods``
:meth:`KubeApi.evict`                       ``POST …/pods/{name}/eviction`` (``policy/v1``)
:meth:`KubeApi.list_pdbs`                   ``GET /apis/policy/v1/…poddisruptionbudgets``
:meth:`KubeApi.get_custom` / ``replace``    ``GET`` / ``PUT`` of a custom resource
:meth:`KubeApi.list_custom`                 ``GET`` of a custom resource's collection
==========================================  ========================================

Errors are not mapped here: callers read an answer (:mod:`.errors`) where it carries
meaning (a PDB's 429, Longhorn's 404) and map the rest with :func:`.errors.map_error`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ConfigError as LightkubeConfigError
from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

from powerplane import ConfigError, ConfigProblem
from powerplane.lifecycle import PermanentPortError
from powerplane_kubernetes.config import ApiAccess

__all__ = ["FIELD_MANAGER", "KubeApi", "custom_resource"]

FIELD_MANAGER = "powerplane"
"""The field manager named on every write."""

_ALL = "*"


def custom_resource(
    group: str, version: str, kind: str, plural: str
) -> type[GenericNamespacedResource]:
    """lightkube's generic class for a namespaced custom resource (no discovery request)."""
    return create_namespaced_resource(group, version, kind, plural)


def _named(where: str, key: str) -> str:
    """The config path of ``key`` under ``where`` (``lifecycle.cluster.kubeconfig``); an
    option or a variable (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``) as it is."""
    return where if where[:1] in ("-", "$", "~") else f"{where}.{key}"


def _why(exc: BaseException) -> str:
    """What was wrong, without the file's content (an error's class, and lightkube's own
    message, which names keys, never values)."""
    if isinstance(exc, LightkubeConfigError):
        return str(exc)
    if isinstance(exc, AttributeError):
        return "empty, or not a mapping"
    return f"{type(exc).__name__}"


def _as_dict(obj: Any) -> dict[str, Any]:
    out = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    assert isinstance(out, dict)
    return out


class KubeApi:
    """The API access of one port, and the calls it makes."""

    def __init__(self, access: ApiAccess, config_dir: Path | None = None,
                 *, where: str = "lifecycle.cluster", context_where: str | None = None) -> None:
        self.access = access
        self.where = where
        """The config path named in a bad-input error (``lifecycle.cluster``), or the
        option or variable the kubeconfig came from (``--kubeconfig``, ``$KUBECONFIG``)."""
        self.context_where = context_where or _named(where, "context")
        """Where the context came from (``lifecycle.cluster.context``, ``--context``)."""
        self.kubeconfig = access.kubeconfig_path(config_dir)
        if self.kubeconfig is not None and not self.kubeconfig.is_file():
            raise ConfigError([ConfigProblem(_named(where, "kubeconfig"),
                                             f"no such file: {self.kubeconfig}")])
        self._client: AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if self.kubeconfig is not None:
            self._config()  # at load: a kubeconfig that cannot be used is bad input

    # -- the client ------------------------------------------------------------------------
    def _config(self) -> Any:
        """The one cluster, user and context to use: a kubeconfig's context (``context``,
        else its ``current-context``), or the pod's service account.

        A kubeconfig that cannot be used -- not YAML, empty or not a mapping, no current
        context, a context it does not have -- is a ``ConfigError`` naming the file and the
        config path (exit 2); a service account that cannot be read a
        ``PermanentPortError``."""
        if self.kubeconfig is None:
            try:
                return KubeConfig.from_service_account()
            except (LightkubeConfigError, OSError, ValueError) as exc:
                raise PermanentPortError(
                    "Kubernetes API access from the in-cluster service account (no kubeconfig "
                    f"configured): {type(exc).__name__}: {exc}") from None
        where, path, context = _named(self.where, "kubeconfig"), self.kubeconfig, \
            self.access.context
        try:
            config = KubeConfig.from_file(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([ConfigProblem(where, f"cannot read the kubeconfig {path}: "
                                             f"{type(exc).__name__}")]) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError([ConfigProblem(where, f"the kubeconfig {path} is not YAML{at}")]) \
                from None
        except (LightkubeConfigError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError([ConfigProblem(where, f"the kubeconfig {path} is not a "
                                             f"kubeconfig ({_why(exc)})")]) from None
        try:
            if context is not None and context not in config.contexts:
                raise ConfigError([ConfigProblem(
                    self.context_where, f"the kubeconfig {path} has no context {context!r} "
                    f"(contexts: {', '.join(sorted(config.contexts)) or 'none'})")])
            return config.get(context)
        except LightkubeConfigError as exc:  # no current context, or one it lacks
            raise ConfigError([ConfigProblem(where, f"the kubeconfig {path}: {exc}")]) \
                from None
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError([ConfigProblem(where, f"the kubeconfig {path} is not a "
                                             f"kubeconfig ({_why(exc)})")]) from None

    def client(self) -> AsyncClient:
        """The client of the running event loop (made on first use in it)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            t = self.access.timeouts
            self._client = AsyncClient(
                self._config(),
                timeout=httpx2.Timeout(t.read_s, connect=t.connect_s),
                field_manager=FIELD_MANAGER,
                trust_env=False,
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client (idempotent; a later call makes a new one)."""
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()

    # -- nodes -----------------------------------------------------------------------------
    async def get_node(self, name: str) -> dict[str, Any]:
        return _as_dict(await self.client().get(Node, name))

    async def list_nodes(self) -> list[dict[str, Any]]:
        return [_as_dict(n) async for n in self.client().list(Node)]

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        node = await self.client().patch(Node, name, patch, patch_type=PatchType.MERGE)
        return _as_dict(node)

    # -- pods, evictions, budgets ----------------------------------------------------------
    async def pods_on(self, node: str) -> list[dict[str, Any]]:
        pods = self.client().list(Pod, namespace=_ALL, fields={"spec.nodeName": node})
        return [_as_dict(p) async for p in pods]

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        return [_as_dict(p) async for p in self.client().list(Pod, namespace=namespace)]

    async def evict(self, namespace: str, name: str) -> None:
        eviction = Pod.Eviction(apiVersion="policy/v1", kind="Eviction",
                                metadata=ObjectMeta(name=name, namespace=namespace))
        await self.client().create(eviction, name, namespace=namespace)

    async def list_pdbs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        found = self.client().list(PodDisruptionBudget,
                                   namespace=namespace if namespace is not None else _ALL)
        return [_as_dict(p) async for p in found]

    # -- custom resources ------------------------------------------------------------------
    async def get_custom(self, res: type[GenericNamespacedResource], namespace: str,
                         name: str) -> dict[str, Any]:
        return _as_dict(await self.client().get(res, name, namespace=namespace))

    async def replace_custom(self, res: type[GenericNamespacedResource],
                             obj: dict[str, Any]) -> dict[str, Any]:
        return _as_dict(await self.client().replace(res(**obj)))

    async def list_custom(self, res: type[GenericNamespacedResource],
                          namespace: str) -> list[dict[str, Any]]:
        return [_as_dict(o) async for o in self.client().list(res, namespace=namespace)]
