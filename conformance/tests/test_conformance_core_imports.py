"""The suite imports core through its public homes (issue 38): ``powerplane`` (what a channel
vendor and an embedder use), ``powerplane.testing``, ``powerplane.cli.kit`` (a command of
the ``powerplane.cli`` group) and ``powerplane.lifecycle`` — the table "Public API: one home
per audience" in docs/reference.md.

The suite drives channels itself, below the host, and loads the registry a target names;
the few internals that needs are listed here, each with why, and the list is kept honest
both ways (a new internal import fails, and so does a listed one no longer used).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "powerplane_conformance"
HOMES = {"powerplane", "powerplane.testing", "powerplane.cli.kit", "powerplane.lifecycle"}

INTERNALS: dict[tuple[str, str], str] = {
    ("powerplane.channel", "verb_method"):
        "the suite calls a channel's verb method itself (the host would add its policy, "
        "guard and audit, which a device check must not pass through)",
    ("powerplane.channel", "maybe_await"):
        "a channel's methods may be sync or async; the suite awaits either, as the host does",
    ("powerplane.plugins", "Registry"):
        "a target file names the plugins to load; the suite builds their registry",
    ("powerplane.plugins", "registry"): "the process-wide registry, when a target names none",
    ("powerplane.secrets", "SECRET_KINDS"):
        "the validation context key that checks a secret reference against the registry "
        "(the wrong-secret configs are validated as the deployment file is)",
    ("powerplane.config", "read_config"):
        "the target file is a deployment file with a conformance section, read by core's "
        "bounded loader with its lines",
    ("powerplane.config", "unknown_key"):
        "an unknown key in the conformance section said in core's words",
    ("powerplane.cli", "OWN_PROCESS"):
        "the conformance command tunes the collector only in a process the CLI owns",
    ("powerplane.workers", "loop_executor"):
        "a check's blocking call runs on core's worker pool, which keeps threads from "
        "blocking exit",
}
"""Internal names the suite imports, ``(module, name)``, with why."""


def _imports() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == "powerplane" or node.module.startswith("powerplane.")):
                found.update((node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                found.update((a.name, "") for a in node.names
                             if a.name.startswith("powerplane."))
    return found


def test_the_suite_imports_core_through_its_homes_and_the_listed_internals_only() -> None:
    internal = {(m, n) for m, n in _imports() if m not in HOMES}
    assert internal - set(INTERNALS) == set(), "an internal of core: use its home, or list it"
    assert set(INTERNALS) - internal == set(), "listed and no longer imported: take it off"
