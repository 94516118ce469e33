"""Running the CLI as another OS user, wherever the checkout lives.

A clone in a ``0700`` folder (``mktemp -d``, a home) keeps its virtualenv and its sources
from every other user: uid 65534 cannot run the venv's Python nor read ``core/src``. So
when the other user cannot import the CLI from here, what it needs is staged where it can
reach it: the ``powerplane`` distribution and the distributions it requires (their files,
their metadata: the entry points find the ``simulated`` channel) copied into a folder
readable by all under the system's temporary folder, run by a Python of the same version
that user can run (the venv's own, its base, or one on the usual paths) with that folder
first on its path. Only when no such Python exists is a test skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PROBE = ("import sys, powerplane.cli; "
         f"sys.exit(0 if sys.version_info[:2] == {tuple(sys.version_info[:2])} else 3)")


@dataclass(frozen=True)
class Runner:
    """How to start this interpreter's CLI as another user: the Python and the additions
    to its environment (empty when the user can run this venv as it is)."""

    python: str
    env: dict[str, str] = field(default_factory=dict)
    staged: Path | None = None


def as_uid(uid: int, gid: int) -> Callable[[], None]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return drop


def can_run(uid: int, gid: int, python: str, env: dict[str, str]) -> bool:
    """Whether ``uid`` can start ``python`` and import the CLI with ``env`` added."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, timeout=120,
                              env={**os.environ, **env}, preexec_fn=as_uid(uid, gid),
                              check=False)
    except OSError:  # the executable itself out of reach (EACCES on a folder on its path)
        return False
    return done.returncode == 0


def closure(name: str) -> list[metadata.Distribution]:
    """The installed distribution ``name`` and, transitively, what it requires (markers
    evaluated here, no extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        wanted = todo.pop()
        key = wanted.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            continue  # an optional requirement not installed: the CLI does without it
        seen[key] = dist
        for spec in dist.requires or ():
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def copy_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)  # same file system: no copy
    except OSError:
        shutil.copy2(src, dst)
    dst.chmod(dst.stat().st_mode | 0o444)


def copy_tree(src: Path, dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(src, dst, ignore=ignore, copy_function=shutil.copy2, dirs_exist_ok=True)


def stage(dists: list[metadata.Distribution], into: Path) -> None:
    """The files of ``dists`` under ``into``, laid out as a site folder: installed files
    by their place in the site folder, an editable install's source folders (its ``.pth``
    names them) by their content."""
    for dist in dists:
        for record in dist.files or ():
            if record.parts and record.parts[0] == "..":
                continue  # scripts and data outside the site folder
            src = Path(str(dist.locate_file(record)))
            if record.name.startswith("__editable__") and record.suffix == ".pth":
                for line in src.read_text().splitlines():
                    if line.strip() and not line.startswith(("import", "#")):
                        copy_tree(Path(line.strip()), into)
            elif src.is_file():
                copy_file(src, into / Path(*record.parts))


def pythons() -> Iterator[str]:
    """Pythons of this version, this interpreter's first, then the usual places."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    yield sys.executable
    yield getattr(sys, "_base_executable", sys.executable)
    yield os.path.realpath(sys.executable)
    yield os.path.join(sys.base_prefix, "bin", version)
    for folder in ("/usr/local/bin", "/usr/bin", *os.get_exec_path()):
        yield os.path.join(folder, version)


@contextmanager
def runner_for(uid: int, gid: int, distribution: str = "powerplane") -> Iterator[Runner]:
    """A :class:`Runner` that ``uid`` can use; the staged folder, if any, removed after.
    Raises ``LookupError`` (with what was tried) when no Python is within its reach."""
    if can_run(uid, gid, sys.executable, {}):
        yield Runner(sys.executable)
        return
    staged = Path(tempfile.mkdtemp(prefix="powerplane-staged-"))
    try:
        stage(closure(distribution), staged / "site")
        for folder in (staged, *(p for p in staged.rglob("*") if p.is_dir())):
            folder.chmod(0o755)
        env = {"PYTHONPATH": str(staged / "site"), "PYTHONNOUSERSITE": "1"}
        tried: list[str] = []
        for python in dict.fromkeys(pythons()):
            if os.path.isfile(python) and python not in tried:
                tried.append(python)
                if can_run(uid, gid, python, env):
                    yield Runner(python, env, staged)
                    return
        raise LookupError(f"uid {uid} can run no Python "
                          f"{sys.version_info[0]}.{sys.version_info[1]} of these: "
                          f"{', '.join(tried)} (it needs one to run the CLI as that user)")
    finally:
        shutil.rmtree(staged, ignore_errors=True)
