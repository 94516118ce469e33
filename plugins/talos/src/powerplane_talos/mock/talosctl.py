"""The old name of :mod:`powerplane_talos.testing.talosctl` (the talosctl stand-in, a TEST
TOOL), for scripts installed before it moved."""

from __future__ import annotations

from powerplane_talos.testing.talosctl import go_style, main

__all__ = ["go_style", "main"]

if __name__ == "__main__":
    main()
