"""Faults a test injects: the next requests of a verb and resource answered ``500
InternalError``, ``429 TooManyRequests`` (API Priority and Fairness' words, ``Retry-After:
1``) or dropped (``disconnect``: the connection closed with no answer), one each, once the
request is authenticated and before it is authorized or served (where the API server's
priority and fairness filter stands); :attr:`FaultServer.faults_served` lists what was
injected, in order. A refused connection is an API server not listening yet: a kubeconfig
for a :func:`~powerplane_kubernetes.testing.apiserver.free_port`, and
``KubeApiServer(port=...)`` started on it later.
"""

from __future__ import annotations

import collections

import kmock

from powerplane_kubernetes.testing.apiserver.base import ServerBase
from powerplane_kubernetes.testing.apiserver.common import FAULTS, Response, status

__all__ = ["FaultServer"]


class FaultServer(ServerBase):
    """Injected faults (see the module docstring)."""

    def _init_faults(self) -> None:
        self._faults: list[tuple[str, str, collections.deque[str]]] = []
        self.faults_served: list[str] = []
        """Every fault injected, in order (``"500 list v1/secrets"``)."""

    def fail_requests(self, verb: str, resource: str, *answers: str) -> None:
        """Answer the next requests of ``verb`` (``get``, ``list``, ``watch``, ``create``,
        ``update``, ``patch``, ``delete``) on ``resource`` (a key of
        :meth:`request_counts`: ``powerplane.io/v1alpha1/nodemaintenances``,
        ``v1/secrets``) with ``answers``, one each in order: ``"500"`` (``InternalError``),
        ``"429"`` (``TooManyRequests``) or ``"disconnect"`` (the connection is closed
        with no answer). The requests after them are served as usual."""
        unknown = set(answers) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults: {sorted(unknown)} (known: {FAULTS})")

        def add() -> None:
            self._faults.append((verb, resource, collections.deque(answers)))
        self._call(add)

    def clear_faults(self) -> None:
        """Drop the injected faults not served yet."""
        self._call(self._faults.clear)

    def faults_left(self) -> int:
        """How many injected faults have not been served yet."""
        return self._call(lambda: sum(len(q) for _, _, q in self._faults))

    def _fault(self, request: kmock.Request) -> Response | None:
        """The fault injected for this request, or None."""
        if not self._faults:
            return None
        _, verb, what = self._classify(request)
        for want_verb, want, queue in self._faults:
            if queue and want_verb == verb and want == what:
                answer = queue.popleft()
                break
        else:
            return None
        self.faults_served.append(f"{answer} {verb} {what}")
        if answer == "500":
            return status(500, "InternalError",
                          "Internal error occurred: injected by the test API server")
        if answer == "429":
            return status(429, "TooManyRequests", "Too many requests, please try again later.",
                          headers={"Retry-After": "1"})
        raw = getattr(request, "_raw_request", None)  # kmock's request keeps aiohttp's
        transport = getattr(raw, "transport", None)
        if transport is not None:
            transport.abort()  # no answer: the client sees the connection dropped
        return Response(status=500, payload=b"")
