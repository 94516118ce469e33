"""The suite as a test module, for ``powerplane conformance`` and for plain pytest::

    pytest --pyargs powerplane_conformance.cli_suite --powerplane-target target.yaml
"""

from __future__ import annotations

from powerplane_conformance.suite import ConformanceSuite

__all__ = ["TestConformance"]


class TestConformance(ConformanceSuite):
    """Every check, against the target named by ``--powerplane-target``."""
