"""powerplane-ipmi: the ``ipmi`` channel type (BMC chassis power over IPMI 2.0 / RMCP+)."""

from __future__ import annotations

__version__ = "0.1.0"

__all__: list[str] = []
