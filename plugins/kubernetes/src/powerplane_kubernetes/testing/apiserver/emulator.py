"""kmock's emulator as this server uses it: the private names it relies on, in one place.

kmock 0.8's names used here, and why (the range is pinned in this distribution's ``test``
extra, ``kmock>=0.8,<0.9``, and ``tests/test_kmock_shape.py`` fails on a kmock whose shape
differs, naming what moved):

* ``RawHandler._handle`` is overridden to see each request (``on_request``) and to trim
  kmock's history after it; the request goes past ``KubernetesEmulator._handle`` (kmock's
  own object store, which would store a create, apply a patch or delete an object before
  any reaction answers) to the reactions: this server stores every object itself.
* ``Root._requests``, ``Reaction._requests`` and ``RawHandler._errors``: the history that
  makes each match cost as much as the requests before it, trimmed.
* ``ObjectsArray._objects``: the object dict, replaced by :class:`ByResource` (indexed by
  resource).
* ``KubernetesEmulator._buses``: the watch bus, for the objects this server changes
  (kmock's own watch stream reads it).

Each use stays guarded at run time (an absent name degrades to kmock's own behaviour), and
the shape test makes an upgrade that drops one fail loudly instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kmock

from powerplane_kubernetes.testing.apiserver.common import key

__all__ = ["ERRORS_KEPT", "ByResource", "Emulator"]

ERRORS_KEPT = 100
"""kmock keeps every exception a request raised (for ``strict`` handlers, which these are
not); the last ones are kept, the rest dropped."""


class ByResource(dict[Any, Any]):
    """kmock's object dict (``ObjectsArray._objects``, keyed ``(resource, namespace,
    name)``) that also keeps the keys of each resource apart (by resource key, in insertion
    order, as the dict iterates), so a list walks only its own resource's objects."""

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[str, dict[Any, None]] = {}

    def __setitem__(self, item: Any, value: Any) -> None:
        super().__setitem__(item, value)
        self.index.setdefault(key(item[0]), {})[item] = None

    def __delitem__(self, item: Any) -> None:
        super().__delitem__(item)
        keys = self.index.get(key(item[0]))
        if keys is not None:
            keys.pop(item, None)

    def pop(self, item: Any, *default: Any) -> Any:
        if item in self:
            value = self[item]
            del self[item]
            return value
        if default:
            return default[0]
        raise KeyError(item)

    def popitem(self) -> tuple[Any, Any]:
        item = next(reversed(self))
        return item, self.pop(item)

    def setdefault(self, item: Any, default: Any = None) -> Any:
        if item not in self:
            self[item] = default
        return self[item]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for item, value in dict(*args, **kwargs).items():
            self[item] = value

    def clear(self) -> None:
        super().clear()
        self.index.clear()

    def of(self, resource: str) -> list[tuple[Any, Any]]:
        """``(key, object)`` of one resource, in insertion order."""
        return [(item, self[item]) for item in self.index.get(resource, ())]


class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator whose request history holds only the requests being served, and
    whose object store is this server's alone.

    ``on_request`` sees each request as it arrives (in arrival order); when it has been
    answered it leaves kmock's history (``Root._requests``, which every reaction's filter
    walks to match a request), the reaction that served it forgets it too, and
    ``on_answered`` is told."""

    on_request: Callable[[kmock.Request], None] | None = None
    on_answered: Callable[[kmock.Request], None] | None = None

    async def _handle(self, request: kmock.Request) -> Any:
        if self.on_request is not None:
            self.on_request(request)
        try:
            # kmock's emulator's parent: the reactions, without kmock's object store (the
            # reaction here stores; kmock's fallbacks still stream watches and discovery)
            return await super(kmock.KubernetesEmulator, self)._handle(request)
        finally:
            self._forget(request)
            if self.on_answered is not None:
                self.on_answered(request)

    def _forget(self, request: kmock.Request) -> None:
        history = getattr(self, "_requests", None)  # kmock 0.8's names, each guarded
        if isinstance(history, list):
            for i in range(len(history) - 1, -1, -1):
                if history[i] is request:  # by identity: requests compare by content
                    del history[i]
                    break
        for reaction in getattr(self, "_payloads", ()):
            served = getattr(reaction, "_requests", None)
            if isinstance(served, list):
                served.clear()  # read only by assertions on a reaction, none here
        errors = getattr(self, "_errors", None)
        if isinstance(errors, list) and errors and len(errors[-1]) > ERRORS_KEPT:
            del errors[-1][:-ERRORS_KEPT]

    def index_objects(self) -> ByResource | None:
        """Put :class:`ByResource` in place of kmock's object dict (kmock 0.8's names,
        guarded: None, and lists walk every object, if they are not there)."""
        array = getattr(self, "_objects", None)
        stored = getattr(array, "_objects", None)
        if not isinstance(stored, dict):
            return None
        indexed = ByResource()
        indexed.update(stored)
        object.__setattr__(array, "_objects", indexed)  # a frozen attrs class
        return indexed

    def history_size(self) -> int:
        """How many requests kmock's own history holds (those being served)."""
        history = getattr(self, "_requests", None)
        return len(history) if isinstance(history, list) else 0

    def buses(self, resource: str) -> list[Any]:
        """kmock's watch buses of ``resource`` that a watch has opened (kmock's private
        name, guarded: none when it is not there)."""
        buses = getattr(self, "_buses", None)
        if buses is None:
            return []
        return [bus for res, bus in list(buses.items()) if key(res) == resource]
