"""powerplane-conformance: prove a power backend does what it advertises, and catch liars.

Run it in one command (``powerplane conformance --target target.yaml``), through pytest
(``pytest --pyargs powerplane_conformance.cli_suite --powerplane-target target.yaml``),
or subclass :class:`ConformanceSuite` in your own test module.

Public names load lazily (through core's :func:`powerplane.lazy_exports`, as core's own
do) so that ``powerplane --help`` (which imports this package to find the
``conformance`` command) stays cheap.

Layers, each importing only those below it (imports inside functions and under
``TYPE_CHECKING`` count; the ``conformance-layers`` contract of import-linter in the
workspace's pyproject.toml keeps them)::

    cli | child                      the commands; the --subprocess child's runner
    api                              run_suite, exit codes
    plugin                           the pytest plugin: hooks, progress lines, results.json
    report | html                    the results document and its summary; the HTML page
    cli_suite                        the suite as a test module
    suite                            ConformanceSuite: its fixtures and check classes
    concurrency | discovery | negatives | readback | verbs    the checks, by concern
    probing                          what the negative checks share (address, probes, secrets)
    context                          CheckContext: what a running check works with
    plan | probes                    the workers a session owns (power plan, network probes)
    session                          ConformanceSession: host, calls, readback, restore
    gate                             the one pure function that stops a check
    checks | settings                @check and the marks a run leaves; the target file's section
    hints                            negative hints and the configs they shape (load-time
                                     validation included)
    model | assertions | outcomes | interrupt | loop | iowatch | terminal | newplugin | _version
                                     the vocabulary and the helpers with no suite imports;
                                     the version (the package's own, named without it)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from powerplane import lazy_exports
from powerplane_conformance._version import __version__ as __version__

if TYPE_CHECKING:
    from powerplane_conformance.api import RunSummary, run_suite
    from powerplane_conformance.assertions import ASSERTIONS, Assertion
    from powerplane_conformance.hints import NegativeHints
    from powerplane_conformance.outcomes import Outcome, Result
    from powerplane_conformance.settings import ConformanceSettings, load_target
    from powerplane_conformance.suite import ConformanceSuite

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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RunSummary": ".api",
        "run_suite": ".api",
        "ASSERTIONS": ".assertions",
        "Assertion": ".assertions",
        "NegativeHints": ".hints",
        "Outcome": ".outcomes",
        "Result": ".outcomes",
        "ConformanceSettings": ".settings",
        "load_target": ".settings",
        "ConformanceSuite": ".suite",
    },
)
