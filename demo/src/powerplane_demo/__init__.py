"""powerplane-demo: ``powerplane demo``, the whole framework on real protocol peers on loopback.

Its own distribution, above core, the conformance suite and the plugins it walks through:
it registers the ``demo`` command through the entry-point group ``powerplane.cli``, takes
the peers plugins offer through the ``register_demo_peers`` hook
(:class:`powerplane.testing.Peer`), and runs the conformance suite against each backend.
Every name here loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports

if TYPE_CHECKING:
    from powerplane_demo.cli import demo_cmd
    from powerplane_demo.hints import install_hint
    from powerplane_demo.walkthrough import Demo, UnknownPeer

__all__ = ["Demo", "UnknownPeer", "demo_cmd", "install_hint"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Demo": ".walkthrough",
    "UnknownPeer": ".walkthrough",
    "demo_cmd": ".cli",
    "install_hint": ".hints",
})
