"""``powerplane new-plugin NAME``: write a plugin distribution in the in-tree shape.

The generated distribution has exactly the files every in-tree plugin has (see
``plugins/redfish``): ``plugin.py`` (the hooks), ``config.py`` (the model, with
``timeouts: Timeouts``), ``channel.py``, ``errors.py`` (the mapping table and
``map_error``), ``peer.py`` (its loopback peer), ``testing/`` (the stand-in device it
ships, which ``python -m <package>.testing.device`` also serves on its own), ``tests/``
(the suite, its target built from the one ``device`` fixture in ``tests/conftest.py`` that
a vendor replaces to reach a device of their own; see ``docs/vendor-guide.md``), a README
and a pyproject with the ``powerplane`` entry point. The templates are in
``powerplane_conformance/template``. Out of the box every check passes, is skipped, or is
NOT TESTED with a reason; ``mypy --strict`` and ruff pass on it.

What differs from ``plugins/redfish`` by design is listed in :data:`SHAPE_DIFFERENCES`.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from string import Template

__all__ = ["SHAPE_DIFFERENCES", "TEMPLATE", "template_files", "write_plugin"]

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MAX_NAME = 64
"""Longest plugin name (the folder, the distribution and the package derive from it)."""

TEMPLATE = Path(__file__).with_name("template")
"""The template tree: ``pkg/`` becomes ``src/<package>/``; each file ends in ``.tmpl``."""

SHAPE_DIFFERENCES = {
    "only in plugins/redfish": (
        "connection.py",  # protocol-specific: sushy sessions, one per endpoint
        "mapping.py",  # protocol-specific: Redfish ResetType values to verbs
        "resources.py",  # protocol-specific: the Redfish resource models
    ),
    "only in the template": (
        "target.yaml",  # a starting target file for a vendor's own device
    ),
}
"""The documented differences between the generated tree and ``plugins/redfish``'s:
protocol modules a plugin keeps beside the shape's files, and the template's own extras."""


def template_files() -> dict[str, Path]:
    """Each template file by its path in the generated tree (``pkg/`` for the package)."""
    return {str(p.relative_to(TEMPLATE))[: -len(".tmpl")]: p
            for p in sorted(TEMPLATE.rglob("*.tmpl"))}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def write_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the distribution ``powerplane-NAME`` under ``directory``; returns its folder.

    Raises ``ValueError`` for a bad name or an existing folder.
    """
    if len(name) > MAX_NAME:
        raise ValueError(f"bad plugin name: {len(name)} characters, at most {MAX_NAME}")
    if not NAME_RE.match(name):
        raise ValueError(f"bad plugin name {name!r}: expected lower-case letters, digits and "
                         "single hyphens, starting with a letter (for example 'acme-bmc')")
    pkg = "powerplane_" + name.replace("-", "_")
    snake = name.replace("-", "_")
    values = {"name": name, "pkg": pkg, "cls": _camel(name), "snake": snake,
              "env": snake.upper()}
    base = Path(directory)
    _check_dir(base)
    root = base / f"powerplane-{name}"
    if root.exists():
        raise ValueError(f"{root} already exists; choose another --dir or remove it")
    files = {(f"src/{pkg}/" + rel[4:] if rel.startswith("pkg/") else rel):
             path.read_text(encoding="utf-8") for rel, path in template_files().items()}
    files[f"src/{pkg}/py.typed"] = ""
    files = {_test_name(rel, values["snake"]): text for rel, text in files.items()}
    try:
        base.mkdir(parents=True, exist_ok=True)
        root.mkdir()
    except OSError as exc:
        raise ValueError(f"cannot create {root}: {_reason(exc)}") from None
    try:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(Template(text).substitute(values), encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(root, ignore_errors=True)  # only the folder this call created
        raise ValueError(f"cannot write {root}: {_reason(exc)}") from None
    return root


def _test_name(rel: str, snake: str) -> str:
    """``tests/test_errors.py`` -> ``tests/test_<name>_errors.py``: test module basenames
    unique across a repository that holds several plugins (the suite's stays
    ``tests/test_conformance.py``)."""
    if rel.startswith("tests/test_") and rel != "tests/test_conformance.py":
        return f"tests/test_{snake}_" + rel[len("tests/test_"):]
    return rel


def _reason(exc: OSError) -> str:
    return exc.strerror or os.strerror(exc.errno or errno.EIO)


def _check_dir(base: Path) -> None:
    """``--dir`` must be a writable directory, or a path that can become one."""
    probe = base
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "--dir" if probe == base else f"{probe} (in --dir {base})"
        raise ValueError(f"cannot create the plugin under {base}: {where} is not a directory")
    if probe.is_dir() and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot create the plugin under {base}: {probe} is not writable")
