"""The shape of kmock that the test API server relies on (``powerplane_kubernetes.testing``).

kmock offers no public way to trim its request history, to index its object dict, or to
publish a watch event for an object changed outside its own handlers, so the API server
uses kmock 0.8's private names (see the module docstring of
``testing/apiserver/emulator.py``) and the ``test`` extra pins ``kmock>=0.8,<0.9``. Each
use is guarded at run time (an absent name degrades to kmock's own behaviour, silently);
these tests are what makes a kmock whose shape changed fail, naming the name that moved.
"""

from __future__ import annotations

import inspect
import queue
import threading
import tomllib
from importlib.metadata import version
from pathlib import Path

import kmock

from powerplane_kubernetes.testing.apiserver import NODES, KubeApiServer

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_kmock_range_is_pinned_and_the_installed_kmock_is_in_it() -> None:
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["test"]
    assert "kmock>=0.8,<0.9" in extra
    major, minor = (int(part) for part in version("kmock").split(".")[:2])
    assert (major, minor) == (0, 8)


def test_response_is_in_kmocks_namespace_with_status_payload_and_headers() -> None:
    response = kmock.Response(status=409, payload={"a": 1},  # type: ignore[attr-defined]
                              headers={"X": "y"})
    assert (response.status, response.payload, response.headers) == (409, {"a": 1}, {"X": "y"})


def test_handle_is_an_overridable_coroutine_taking_the_request() -> None:
    handle = kmock.KubernetesEmulator._handle
    assert inspect.iscoroutinefunction(handle)
    assert list(inspect.signature(handle).parameters) == ["self", "request"]


async def test_the_private_containers_have_the_types_the_server_edits() -> None:
    emulator = kmock.KubernetesEmulator()
    async with emulator:
        assert isinstance(emulator._requests, list)  # Root._requests: the history
        assert isinstance(emulator._payloads, list)  # Root._payloads: the reactions
        assert isinstance(emulator._errors, list)  # RawHandler._errors: a list per level
        assert all(isinstance(level, list) for level in emulator._errors)
        assert isinstance(emulator._objects._objects, dict)  # ObjectsArray._objects
        bus = emulator._buses[kmock.resource("v1/nodes")]  # a Bus made on first use
        assert callable(bus.put) and inspect.iscoroutinefunction(bus.put)
        reaction = emulator._payloads[0]
        assert isinstance(reaction._requests, list)  # Reaction._requests


def test_every_guarded_use_is_active_on_the_installed_kmock(tmp_path: Path) -> None:
    """Behaviour, through the server's public surface: the history is trimmed (kmock keeps
    none of the answered requests), lists walk their own resource only (the index is in
    place of the object dict), and an object changed by the server's own handler (a PUT)
    reaches a watch that was open before (the bus)."""
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Node

    events: queue.Queue[tuple[str, str, dict[str, str]]] = queue.Queue()

    def watch(config: KubeConfig) -> None:
        try:
            with Client(config, trust_env=False) as w:
                for op, obj in w.watch(Node):
                    meta = obj.metadata
                    if meta is not None and meta.name is not None:
                        events.put((op, meta.name, dict(meta.labels or {})))
                    if op == "MODIFIED":
                        return  # the watch is closed, so the server stops at once
        except Exception:  # the server stopped under the open watch
            return

    with KubeApiServer() as api:
        for name in ("n1", "n2"):
            api.add_node(name)
        config = KubeConfig.from_file(api.write_kubeconfig(tmp_path / "kc"))
        with Client(config, trust_env=False) as k:
            k.get(Node, "n1")
            walked = api.list_walked
            assert [n.metadata.name for n in k.list(Node) if n.metadata] == ["n1", "n2"]
            assert api.list_walked - walked == 2  # the nodes only, not every stored object
            assert api.kmock_history() == 0
            watcher = threading.Thread(target=watch, args=(config,), daemon=True)
            watcher.start()
            assert {events.get(timeout=10)[:2] for _ in range(2)} == {
                ("ADDED", "n1"), ("ADDED", "n2")}
            node = k.get(Node, "n1")
            assert node.metadata is not None
            node.metadata.labels = {"seen": "yes"}
            k.replace(node)  # a PUT: answered by the server's handler, not kmock's
            assert events.get(timeout=10) == ("MODIFIED", "n1", {"seen": "yes"})
            watcher.join(timeout=10)
        assert api.object(NODES, None, "n1") is not None
