"""Where DMTF's Redfish mockups shipped with this distribution live (test data).

``mockups_dir() / "public-rackmount1"`` is a service tree as DMTF publishes it: each
``<path>/index.json`` is the body served at ``/redfish/v1/<path>``. The folder holds only the
trees the tests use, with DMTF's licence (``LICENSE.md``) and a ``README.md`` beside them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["mockups_dir"]


def mockups_dir() -> Path:
    """The folder of DMTF mockups: ``public-bladed``, ``public-pdu``, ``public-rackmount1``."""
    return Path(__file__).resolve().parent / "dmtf_mockups"
