"""powerplane-conformance: prove a power backend does what it advertises, and catch liars.

Run it in one command (``powerplane conformance --target target.yaml``), through pytest
(``pytest --pyargs powerplane_conformance.cli_suite --powerplane-target target.yaml``),
or subclass :class:`ConformanceSuite` in your own test module.

Public names load lazily so that ``powerplane --help`` (which imports this package to
find the ``conformance`` command) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from powerplane_conformance.api import RunSummary, run_suite
    from powerplane_conformance.assertions import ASSERTIONS, Assertion
    from powerplane_conformance.outcomes import Outcome, Result
    from powerplane_conformance.settings import ConformanceSettings, NegativeHints, load_target
    from powerplane_conformance.suite import ConformanceSuite

__version__ = "0.1.0"

__all__ = [
    "ASSERTIONS",
    "Assertion",
    "ConformanceSettings",
    "ConformanceSuite",
    "NegativeHints",
    "Outcome",
    "Result",
    "RunSummary",
    "load_target",
    "run_suite",
]

_WHERE = {
    "RunSummary": "api",
    "run_suite": "api",
    "ASSERTIONS": "assertions",
    "Assertion": "assertions",
    "Outcome": "outcomes",
    "Result": "outcomes",
    "ConformanceSettings": "settings",
    "NegativeHints": "settings",
    "load_target": "settings",
    "ConformanceSuite": "suite",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'powerplane_conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"powerplane_conformance.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
