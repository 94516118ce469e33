"""What every command of the ``powerplane`` process shares: the exit code of an interrupt,
and the context key saying a command runs as the process itself.

A module of its own at the bottom of the CLI package, so :mod:`powerplane.cli` (the group)
and :mod:`powerplane.cli._common` (what the commands share) both name them and neither
imports the other's module for them.
"""

from __future__ import annotations

__all__ = ["INTERRUPTED", "OWN_PROCESS"]

INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C or SIGTERM."""

OWN_PROCESS = "powerplane.own_process"
"""Key of the root context's object set by :func:`powerplane.cli.main`: the command is the
process (not a test's in-process call), so what it loads may be frozen for the garbage
collector."""
