"""Peers for this distribution's tests: a Kubernetes API server (kmock's emulator with
handlers of its own, :mod:`.apiserver`) and a validator of written objects against
Kubernetes' own OpenAPI schemas (:mod:`.schemas`). Needs the ``test`` extra."""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_kubernetes.testing.apiserver import KubeApiServer, RecordedRequest
    from powerplane_kubernetes.testing.schemas import validate_written

__all__ = ["KubeApiServer", "RecordedRequest", "validate_written"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "KubeApiServer": ".apiserver",
    "RecordedRequest": ".apiserver",
    "validate_written": ".schemas",
})
