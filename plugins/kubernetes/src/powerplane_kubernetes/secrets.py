"""The secret reference kind ``{k8s: NAMESPACE/NAME/KEY}``: one key of a Kubernetes Secret.

::

    channels:
      bmc-a:
        type: redfish
        password: {k8s: powerplane-system/bmc-credentials/password}

At load, :func:`check` validates the shape only (three parts, a namespace and a Secret name
as Kubernetes names them, a key as a Secret's data keys are named); nothing is read. At use
(``SecretRef.reveal()``), :func:`resolve` reads the Secret with one ``GET`` and
base64-decodes the key (``data``; a ``stringData`` key is stored in ``data`` by the API
server, so ``data`` is where every key is).

The API access is the environment's, because a secret reference is resolved where no
deployment is at hand (a channel's password is needed wherever the channel is opened):
:func:`environment_kubeconfig`, lightkube's ``KubeConfig.from_env()`` order, i.e. the pod's
service account when running in the cluster (the operator), else the file ``KUBECONFIG``
names (the first of its list that exists, as kubectl reads it), else ``~/.kube/config``.
``powerplane operator run`` without ``--kubeconfig`` resolves its access the same way.
The reader needs ``get`` on that Secret and nothing more.

At load nothing imports lightkube (plugin discovery stays light). The value is never
logged, kept, or put in an error. A Secret that is not there (404), a key it lacks, a
refusal (401, 403, any other 4xx) or no usable API access is bad input: a ``SecretError``
(exit 2) naming ``NS/NAME/KEY`` and the cause (the HTTP status, or the error's class),
never the Secret's content. An answer that may pass -- 408, 409, 429, any 5xx, a refused,
dropped or timed-out connection -- is a
:class:`~powerplane.lifecycle.TemporaryPortError` (exit 1) naming the same: the channel
that needed the secret failed for now, and is tried again (the operator discovers a node
whose channel failed again before its next reconcile), never "invalid config".
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from powerplane import SecretError, SecretKind

if TYPE_CHECKING:
    from lightkube import Client

__all__ = ["K8S", "SERVICE_ACCOUNT", "check", "environment_kubeconfig", "parse", "resolve"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service account (token, namespace, CA) is mounted."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONNECT_S, _READ_S = 5.0, 30.0


def parse(value: str) -> tuple[str, str, str]:
    """``(namespace, name, key)`` of ``NAMESPACE/NAME/KEY``; ``ValueError`` says what is wrong."""
    parts = value.split("/") if isinstance(value, str) else []
    if len(parts) != 3:
        raise ValueError(f"{value!r} is not NAMESPACE/NAME/KEY (three parts separated by /)")
    namespace, name, key = parts
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise ValueError(f"namespace {namespace!r} is not a Kubernetes namespace name")
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise ValueError(f"Secret name {name!r} is not a Kubernetes object name")
    if len(key) > 253 or not _KEY.match(key):
        raise ValueError(f"key {key!r} is not a Secret key (letters, digits, '-', '_', '.')")
    return namespace, name, key


def check(value: str) -> None:
    """At load: the shape only, no request."""
    parse(value)


def environment_kubeconfig(service_account: Path = SERVICE_ACCOUNT) -> Path | None:
    """The environment's kubeconfig, as ``kubectl`` and lightkube's ``from_env`` find it:
    None in the cluster (the pod's service account, and ``KUBERNETES_SERVICE_HOST``) or
    when no file is found (the service account is then what is tried); else the first
    file of ``$KUBECONFIG`` (a ``:``-separated list) that exists, else ``~/.kube/config``
    when ``KUBECONFIG`` is unset."""
    if (service_account / "token").is_file() and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    named = os.environ.get("KUBECONFIG")
    if named:
        candidates = [Path(p).expanduser() for p in named.split(os.pathsep) if p]
    else:
        candidates = [Path("~/.kube/config").expanduser()]
    return next((p for p in candidates if p.is_file()), None)


def _client() -> Client:
    import httpx2
    import yaml
    from lightkube import Client, KubeConfig
    from lightkube.core.exceptions import ConfigError as LightkubeConfigError

    from powerplane_kubernetes.client import FIELD_MANAGER

    try:
        path = environment_kubeconfig()
        config = (KubeConfig.from_service_account() if path is None
                  else KubeConfig.from_file(path))
        return Client(config, timeout=httpx2.Timeout(_READ_S, connect=_CONNECT_S),
                      field_manager=FIELD_MANAGER, trust_env=False)
    except (LightkubeConfigError, OSError, ValueError, KeyError, TypeError, AttributeError,
            yaml.YAMLError) as exc:
        raise SecretError(f"no Kubernetes API access (no in-cluster service account, no "
                          f"usable KUBECONFIG or ~/.kube/config): {type(exc).__name__}") \
            from None


def resolve(value: str) -> str:
    """At use: ``GET`` the Secret and decode the key (never logged, never in an error).

    Trailing line breaks are dropped (a Secret made ``--from-file`` often ends in one)."""
    import httpx2
    from lightkube.resources.core_v1 import Secret

    from powerplane.lifecycle import TemporaryPortError
    from powerplane_kubernetes.errors import TEMPORARY_STATUSES, answer_of

    try:
        namespace, name, key = parse(value)
    except ValueError as exc:
        raise SecretError(f"secret {{k8s: {value}}}: {exc}") from None
    ref = f"secret {{k8s: {namespace}/{name}/{key}}}"
    client = _client()
    try:
        secret = client.get(Secret, name, namespace=namespace)
    except httpx2.HTTPStatusError as exc:
        answer = answer_of(exc)
        code = answer.code if answer is not None else 0
        if code == 404:
            raise SecretError(f"{ref}: no Secret {name} in namespace {namespace}") from None
        said = (f"the API server answered HTTP {code}"
                f"{' ' + answer.reason if answer and answer.reason else ''}")
        if code in TEMPORARY_STATUSES or code >= 500:  # it may pass: not bad input
            raise TemporaryPortError(f"{ref}: {said} (temporary: tried again)") from None
        raise SecretError(f"{ref}: {said}") from None
    except (httpx2.HTTPError, OSError) as exc:  # refused, dropped, timed out: may pass
        raise TemporaryPortError(f"{ref}: the API server cannot be reached "
                                 f"({type(exc).__name__}; temporary: tried again)") from None
    finally:
        client.close()
    data = secret.data or {}
    if key not in data:
        raise SecretError(f"{ref}: the Secret {namespace}/{name} has no key {key}") from None
    try:
        return base64.b64decode(data[key], validate=True).decode("utf-8").rstrip("\r\n")
    except (binascii.Error, ValueError):
        raise SecretError(f"{ref}: the key is not base64-encoded UTF-8 text") from None


K8S = SecretKind(
    name="k8s",
    resolve=resolve,
    check=check,
    description="NAMESPACE/NAME/KEY: one key of a Kubernetes Secret, read at use",
)
"""The ``k8s`` secret kind, registered by :mod:`powerplane_kubernetes.plugin`."""
