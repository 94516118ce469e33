"""Watches: kmock streams them, this server decides how the next ones are answered.

kmock's emulator streams a watch (every stored object as ``ADDED`` first, whatever the
``resourceVersion``, then each change this server announces on its bus: ``ADDED``,
``MODIFIED``, ``DELETED``). :meth:`WatchServer.answer_watches` makes the next ones end at
once or answer ``410`` (an ``ERROR`` event in the stream, or the HTTP status), as an API
server does to a watch from a ``resourceVersion`` it no longer keeps.
"""

from __future__ import annotations

import json
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.base import ServerBase
from powerplane_kubernetes.testing.apiserver.common import Response

__all__ = ["WATCH_ANSWERS", "WatchServer"]

WATCH_ANSWERS = ("end", "gone", "gone-http")
"""What :meth:`WatchServer.answer_watches` can make the next watches answer."""


class WatchServer(ServerBase):
    """How the next watches are answered (see the module docstring)."""

    def _init_watches(self) -> None:
        self._watch_answers: list[tuple[str, str | None]] = []

    def answer_watches(self, *answers: str, resource: str | None = None) -> None:
        """How the next watch requests are answered, one each, before kmock serves the rest
        (only watches of ``resource``, a plural such as ``nodemaintenances``, when given:
        a client that watches several resources at once takes them in no set order):
        ``"end"``: ``200`` and the stream ends at once (the server closed the watch);
        ``"gone"``: ``200``, then a watch ``ERROR`` event carrying a ``410 Expired`` Status,
        as the API server answers a watch from a resourceVersion it no longer keeps;
        ``"gone-http"``: a plain ``410 Gone`` answer."""
        unknown = set(answers) - set(WATCH_ANSWERS)
        if unknown:
            raise ValueError(f"unknown watch answers: {sorted(unknown)}")

        def add() -> None:
            self._watch_answers.extend((answer, resource) for answer in answers)
        self._call(add)

    def _watch(self, request: kmock.Request) -> Any:
        """The next watch answer, or ``NotImplemented``: kmock's own stream."""
        plural = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        mine = next((i for i, (_, resource) in enumerate(self._watch_answers)
                     if resource in (None, plural)), None)
        if mine is None:
            return NotImplemented
        answer, _ = self._watch_answers.pop(mine)
        expired = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "too old resource version: 1 (2)", "reason": "Expired",
                   "code": 410}
        if answer == "end":
            return Response(status=200, payload=b"")
        if answer == "gone":
            line = json.dumps({"type": "ERROR", "object": expired}) + "\n"
            return Response(status=200, payload=line.encode())
        return Response(status=410, payload=expired)
