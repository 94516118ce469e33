"""A send gate for tests: run a plugin call as the host would, under one call's gate.

The host opens a :class:`~powerplane.channel.SendGate` for every channel call and closes it
when it gives up (a timeout, a cancellation). A plugin's own tests use :func:`send_gate` to
call a channel method the same way and to close the gate themselves, proving that nothing
leaves after the host gave up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from powerplane.channel import SendGate

__all__ = ["send_gate"]


@contextmanager
def send_gate() -> Iterator[SendGate]:
    """Open a gate for the calls made in this block (and threads given a copy of its context).

    ``gate.sent`` tells whether a request passed :func:`powerplane.about_to_send`;
    ``gate.close()`` does what the host does when it gives up.
    """
    from powerplane.channel import SendGate

    with SendGate() as gate:
        yield gate
