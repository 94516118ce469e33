"""The old name of :mod:`powerplane_pdu.peer`, kept while ``tests/conformance`` imports it.

``tests/conformance/test_conformance_pdu.py`` does ``importorskip("powerplane_pdu.demo_peer")``
and calls ``start_demo_pdu``; once it uses :func:`powerplane_pdu.peer.start`, this module goes.
"""

from __future__ import annotations

from powerplane_pdu.peer import start as start_demo_pdu

__all__ = ["start_demo_pdu"]
