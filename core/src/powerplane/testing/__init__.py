"""The public helper set for peers, tests, benchmarks and vendors.

Everything a plugin's loopback peer, its tests, the conformance suite, the benchmarks
and a vendor's own plugin need, written once:

- :class:`Peer` / :class:`StartedPeer`: what a plugin registers through the
  ``register_demo_peers`` hook, and what starting one returns;
- :func:`free_port`, :func:`closed_port`, :class:`SilentServer`: loopback ports for
  peers and for negative tests (refused, never answered);
- :class:`Subprocess`: a child process stopped by its own handle (terminate, wait, kill,
  reap; its process group too), and :func:`wait_ready` to wait until a peer answers;
- :func:`make_ca` / :func:`issue_cert`: throwaway CAs and certificates as files
  (ECDSA, RSA, Ed25519; server and client certificates);
- :func:`send_gate`: run a plugin call under one call's send gate, as the host does;
- :func:`registered`: register a plugin object for one ``with`` block (the process-wide
  registry, or one given), :func:`plugin_registry`: a registry of a test's own (built-ins,
  the installed plugins it names, its own plugin objects), :func:`process_registry`: the
  process-wide one;
- :class:`JsonHttpServer`: JSON resources over HTTP(S) (a mockup directory or a mapping),
  with routes for the requests that change them, request counts, delays and dropped
  connections (:class:`HttpRequest`, :class:`HttpReply`).

Importing it needs only the standard library, and each name loads its module on first use
(:func:`powerplane.lazy_exports`): a plugin that imports :class:`Peer` for its hook does
not pay for the HTTP server or TLS (``cryptography`` is imported when a certificate is made).
"""

from __future__ import annotations

import typing

from powerplane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from powerplane.peers import Peer, Role, StartedPeer
    from powerplane.testing.gate import send_gate
    from powerplane.testing.http import (
        DropWith,
        HttpReply,
        HttpRequest,
        JsonHttpServer,
        RouteHandler,
        json_error,
    )
    from powerplane.testing.ports import PortKind, SilentServer, closed_port, free_port
    from powerplane.testing.process import PeerNotReady, Subprocess, wait_ready
    from powerplane.testing.registries import plugin_registry, process_registry, registered
    from powerplane.testing.tls import KeyAlgorithm, KeyFormat, TLSFiles, issue_cert, make_ca

__all__ = [
    "DropWith",
    "HttpReply",
    "HttpRequest",
    "JsonHttpServer",
    "KeyAlgorithm",
    "KeyFormat",
    "Peer",
    "PeerNotReady",
    "PortKind",
    "Role",
    "RouteHandler",
    "SilentServer",
    "StartedPeer",
    "Subprocess",
    "TLSFiles",
    "closed_port",
    "free_port",
    "issue_cert",
    "json_error",
    "make_ca",
    "plugin_registry",
    "process_registry",
    "registered",
    "send_gate",
    "wait_ready",
]

__getattr__, __dir__ = _lazy_exports(__name__, {
    "DropWith": ".http",
    "HttpReply": ".http",
    "HttpRequest": ".http",
    "JsonHttpServer": ".http",
    "KeyAlgorithm": ".tls",
    "KeyFormat": ".tls",
    "Peer": "powerplane.peers",
    "PeerNotReady": ".process",
    "PortKind": ".ports",
    "Role": "powerplane.peers",
    "RouteHandler": ".http",
    "SilentServer": ".ports",
    "StartedPeer": "powerplane.peers",
    "Subprocess": ".process",
    "TLSFiles": ".tls",
    "closed_port": ".ports",
    "free_port": ".ports",
    "issue_cert": ".tls",
    "json_error": ".http",
    "make_ca": ".tls",
    "plugin_registry": ".registries",
    "process_registry": ".registries",
    "registered": ".registries",
    "send_gate": ".gate",
    "wait_ready": ".process",
})
