"""The public kit for a command added to ``powerplane`` through the ``powerplane.cli``
entry-point group (powerplane-conformance's ``conformance`` and ``new-plugin``,
powerplane-demo's ``demo``), and for tools that run a command's process the way the CLI does.

What such a command shares with the built-in ones, so it writes, fails and exits as they do:

- :func:`console` (a Rich console on stdout, or stderr) and :func:`esc` (untrusted text with
  Rich markup escaped);
- :func:`handle_errors`: a powerplane error becomes ``error: ...`` on stderr and the
  contract's exit code, Ctrl-C ``interrupted`` and :data:`INTERRUPTED` (130);
- :func:`config_path`: the root ``--config`` option's value, wherever it was written;
- :data:`output_option` (``-o table|json``) and :func:`emit_json` (the bytes the built-ins
  write for ``-o json``);
- :func:`tune_gc`: what a command's own process does to its garbage collector (never call
  it from library code: an embedding application keeps its own collector settings).

The implementation lives in :mod:`powerplane.cli._common` (private: it changes with the
built-in commands); these names are the promise.
"""

from __future__ import annotations

from powerplane.cli._common import (
    INTERRUPTED,
    config_path,
    console,
    emit_json,
    esc,
    handle_errors,
    output_option,
    tune_gc,
)

__all__ = [
    "INTERRUPTED",
    "config_path",
    "console",
    "emit_json",
    "esc",
    "handle_errors",
    "output_option",
    "tune_gc",
]
