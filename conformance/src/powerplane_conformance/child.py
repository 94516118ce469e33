"""``python -m powerplane_conformance.child ARGS``: pytest with ``ARGS``, as ``powerplane
conformance --subprocess`` runs it in a child process.

What ``python -m pytest`` does, and then, before the interpreter shuts down, the collector
is told that what is alive stays so until the exit (:func:`gc.freeze`): the child's last
collection would otherwise walk the whole heap once more (a few tenths of a second on a
loaded machine, the most of an interrupted run's last second).
"""

from __future__ import annotations

import gc
import sys

import pytest

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Run pytest with ``argv``; its exit status."""
    code = int(pytest.main(argv))
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
