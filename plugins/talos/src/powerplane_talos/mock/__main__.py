"""``python -m powerplane_talos.mock``: the old name of ``python -m powerplane_talos.testing``."""

from __future__ import annotations

from powerplane_talos.testing.__main__ import main

if __name__ == "__main__":
    main()
