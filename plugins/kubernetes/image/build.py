"""Build the operator image without a container registry: ``./dev image``.

    python plugins/kubernetes/image/build.py [--out DIR] [--cache DIR] [--no-cache]

Three steps, each cached under ``--cache`` (default ``/var/tmp/powerplane-image-cache``) by
a key of its inputs, so an empty cache builds everything and a warm one only what changed:

1. **the Debian layer** (``debian-rootfs.tar``): ``mmdebstrap`` makes a bookworm root file
   system from Debian packages only (``python3``, ``ca-certificates``, the essential set;
   no documentation, no apt lists) and adds the user ``powerplane`` (65532:65532) and its
   working directory ``/var/lib/powerplane``. Key: the suite, packages, mirrors, this
   recipe, and the ISO week (security updates arrive within a week).
2. **the wheels**: ``pip wheel`` of core and every ``plugins/*`` member (from a copy of the
   working tree, so nothing is built in it) and of their PyPI dependencies, pinned to what
   the running interpreter's environment holds (``pip freeze`` as constraints). The
   dependencies are cached by those constraints and the members' ``pyproject.toml``; the
   members themselves are built every time (their sources change).
3. **the application layer** (``powerplane-venv.tar``): the Debian layer unpacked, a
   virtual environment ``/opt/powerplane`` made inside it with its own ``python3`` (by
   ``chroot``), every wheel installed by pip run from its wheel (no index, no pip left in
   the image), byte-compiled; only ``/opt/powerplane`` is kept. Key: the Debian layer's
   key and every wheel's digest.

Then ``buildah build`` (``FROM scratch``, the ``Containerfile`` beside this file) in a
storage of its own (cached by the Containerfile and both layers' keys), pushed to
``--out`` (default ``dist/image``) as ``powerplane-VERSION.oci.tar`` (OCI archive,
``powerplane:VERSION``) and
``powerplane-VERSION.docker.tar`` (``docker.io/library/powerplane:VERSION``, what ``kind
load image-archive`` and ``k3d image import`` read). VERSION is powerplane-kubernetes'
version: the image ``powerplane operator manifests`` names by default.

Needs root (``mmdebstrap``'s root mode and ``chroot``) and the Debian packages
``mmdebstrap`` and ``buildah``; exit 2 naming what is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CONTAINERFILE = HERE / "Containerfile"
CACHE = Path("/var/tmp/powerplane-image-cache")
OUT = ROOT / "dist" / "image"
NAME = "powerplane"
USER_ID = 65532
DATA_DIR = "/var/lib/powerplane"
VENV = "/opt/powerplane"

SUITE = "bookworm"
PACKAGES = ["python3", "ca-certificates"]
MIRROR = os.environ.get("POWERPLANE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY = os.environ.get("POWERPLANE_DEBIAN_SECURITY", "http://deb.debian.org/debian-security")
DPKG_OPTS = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
]
HOOKS = [
    f'echo "powerplane:x:{USER_ID}:{USER_ID}:powerplane:{DATA_DIR}:/usr/sbin/nologin"'
    ' >> "$1/etc/passwd"',
    f'echo "powerplane:x:{USER_ID}:" >> "$1/etc/group"',
    f'mkdir -p "$1{DATA_DIR}" && chown {USER_ID}:{USER_ID} "$1{DATA_DIR}"',
    'rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*',
]
RECIPE = 1
"""Bump when the steps above change in a way their inputs do not show."""


class BuildError(Exception):
    """A step failed or a tool is missing; the message says which."""


def version() -> str:
    meta = tomllib.loads((ROOT / "plugins/kubernetes/pyproject.toml").read_text())
    return str(meta["project"]["version"])


def image_ref() -> str:
    """``powerplane:VERSION``, the tag the Deployment names."""
    return f"{NAME}:{version()}"


def members() -> list[Path]:
    """core and every ``plugins/*`` member: what the operator may load (every channel)."""
    found = [ROOT / "core"]
    found += sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
    return found


def _project_name(member: Path) -> str:
    meta = tomllib.loads((member / "pyproject.toml").read_text())
    return str(meta["project"]["name"])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], what: str, **kw: object) -> None:
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-15:]
        raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:4])} ...\n"
                         + "\n".join(tail))


_STARTED = time.monotonic()


def _say(message: str) -> None:
    print(f"[{time.monotonic() - _STARTED:5.1f} s] {message}", file=sys.stderr, flush=True)


def missing() -> list[str]:
    """What this machine lacks to build (empty: it can)."""
    out = [f"{tool} (apt-get install {tool})" for tool in ("mmdebstrap", "buildah")
           if shutil.which(tool) is None]
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        out.append("root (mmdebstrap's root mode and chroot)")
    return out


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def debian_layer(cache: Path) -> tuple[Path, str]:
    """The Debian root file system as a tar, and its key."""
    mmdebstrap = subprocess.run(["mmdebstrap", "--version"], capture_output=True, text=True,
                                check=False).stdout.strip()
    key = _digest(str(RECIPE), SUITE, *PACKAGES, MIRROR, SECURITY, *DPKG_OPTS, *HOOKS,
                  mmdebstrap, time.strftime("%G-W%V"))
    path = cache / f"debian-{key}.tar"
    if path.exists():
        return path, key
    _say(f"image: Debian {SUITE} root file system (mmdebstrap) ...")
    tmp = cache / f".debian-{key}.{os.getpid()}.tar"
    cmd = ["mmdebstrap", "--mode=root", "--variant=essential", "--quiet",
           f"--include={','.join(PACKAGES)}",
           *[f"--dpkgopt={opt}" for opt in DPKG_OPTS],
           *[f"--customize-hook={hook}" for hook in HOOKS],
           SUITE, str(tmp),
           f"deb {MIRROR} {SUITE} main", f"deb {MIRROR} {SUITE}-updates main",
           f"deb {SECURITY} {SUITE}-security main"]
    try:
        _run(cmd, "mmdebstrap")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path, key


def _constraints(python: str) -> str:
    proc = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"pip freeze failed: {proc.stderr.strip()[-500:]}")
    own = {_normal(_project_name(m)) for m in members()}
    lines = [line for line in proc.stdout.splitlines()
             if line and not line.startswith("#") and " @ " not in line
             and _normal(line.split("==")[0]) not in own]
    return "\n".join(sorted(lines)) + "\n"


def _sources(work: Path) -> list[Path]:
    """A copy of each member's buildable files (no build/ or egg-info left in the tree)."""
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests",
                                    ".pytest_cache")
    out = []
    for member in members():
        dest = work / member.relative_to(ROOT)
        shutil.copytree(member, dest, ignore=ignore)
        out.append(dest)
    return out


def wheels(cache: Path, work: Path, python: str) -> Path:
    """A directory with every wheel the application layer installs (and pip's own)."""
    constraints = _constraints(python)
    pyprojects = [(m / "pyproject.toml").read_bytes() for m in members()]
    tag = subprocess.run([python, "-c", "import sys, sysconfig; print(sys.version_info[:2], "
                          "sysconfig.get_platform())"], capture_output=True, text=True,
                         check=False).stdout.strip()
    key = _digest(str(RECIPE), constraints, tag, *pyprojects)
    sources = _sources(work / "src")
    own = {_normal(_project_name(m)) for m in sources}
    deps = cache / f"wheels-{key}"
    pip = [python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    if not deps.is_dir():
        _say("image: dependency wheels (pip wheel) ...")
        tmp = cache / f".wheels-{key}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        (work / "constraints.txt").write_text(constraints)
        try:
            _run([*pip, "-w", str(tmp), "-c", str(work / "constraints.txt"),
                  *map(str, sources), "pip"], "pip wheel (dependencies)")
            for wheel in tmp.glob("*.whl"):
                if _normal(wheel.name.split("-")[0]) in own:
                    wheel.unlink()
            tmp.rename(deps)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out = work / "wheels"
    shutil.copytree(deps, out)
    _say("image: the workspace's wheels ...")
    # the environment's own setuptools when it has one (no index asked), else isolated
    flags = ["--no-deps", "--no-build-isolation"] if _has_setuptools(python) else ["--no-deps"]
    _run([*pip, *flags, "-w", str(out), *map(str, sources)], "pip wheel (workspace)")
    return out


def _has_setuptools(python: str) -> bool:
    return subprocess.run([python, "-c", "import setuptools, sys; "
                           "sys.exit(int(setuptools.__version__.split('.')[0]) < 68)"],
                          capture_output=True, check=False).returncode == 0


def _wheel_digest(wheel: Path) -> str:
    """A wheel's content, not its bytes: its ``RECORD`` (every file's name and digest), so a
    member rebuilt from unchanged sources (new zip timestamps) keeps its key."""
    with zipfile.ZipFile(wheel) as zf:
        records = sorted(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        if len(records) != 1:
            return _file_digest(wheel)
        return _digest(zf.read(records[0]))


def app_layer(cache: Path, work: Path, base: Path, base_key: str, wheel_dir: Path) -> Path:
    """``/opt/powerplane`` with every wheel installed, as a tar."""
    digests = sorted((w.name, _wheel_digest(w)) for w in wheel_dir.glob("*.whl"))
    key = _digest(str(RECIPE), base_key, json.dumps(digests))
    path = cache / f"venv-{key}.tar"
    if path.exists():
        return path
    _say("image: the application layer (a venv installed in the Debian root) ...")
    root = work / "rootfs"
    root.mkdir()
    _run(["tar", "-C", str(root), "-xf", str(base)], "unpacking the Debian layer")
    inside = root / "tmp" / "wheels"
    shutil.copytree(wheel_dir, inside)
    (pip_wheel,) = [w.name for w in inside.glob("pip-*.whl")]
    env = ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"]
    _run(["chroot", str(root), *env, "python3", "-m", "venv", "--without-pip", VENV],
         "python3 -m venv (in the Debian root)")
    names = sorted({_project_name(m) for m in members()})
    _run(["chroot", str(root), *env, f"{VENV}/bin/python", f"/tmp/wheels/{pip_wheel}/pip",
          "install", "--isolated", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
          "--quiet", "--find-links", "/tmp/wheels", *names],
         "pip install (in the Debian root)")
    tmp = cache / f".venv-{key}.{os.getpid()}.tar"
    try:
        _run(["tar", "-C", str(root), "--sort=name", "--numeric-owner", "--owner=0",
              "--group=0", "--mtime=@0", "-cf", str(tmp), VENV.lstrip("/")],
             "packing the application layer")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
    return path


def _publish(built: list[Path], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in built:
        dest = out / src.name
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copy2(src, tmp)
        tmp.replace(dest)
        paths.append(dest)
    return paths


def assemble(cache: Path, work: Path, base: Path, app: Path, out: Path) -> list[Path]:
    """``buildah build`` of the Containerfile on the two layers; both archives (cached by
    the Containerfile and the two layers' keys)."""
    key = _digest(str(RECIPE), CONTAINERFILE.read_bytes(), base.name, app.name, image_ref())
    done = cache / f"image-{key}"
    names = [f"{NAME}-{version()}.oci.tar", f"{NAME}-{version()}.docker.tar"]
    if all((done / name).exists() for name in names):
        return _publish([done / name for name in names], out)
    ctx = work / "context"
    ctx.mkdir()
    shutil.copy2(CONTAINERFILE, ctx / "Containerfile")
    for src, name in ((base, "debian-rootfs.tar"), (app, "powerplane-venv.tar")):
        try:
            os.link(src, ctx / name)
        except OSError:
            shutil.copy2(src, ctx / name)
    storage = ["buildah", "--root", str(work / "storage"), "--runroot", str(work / "run"),
               "--storage-driver", "vfs"]
    ref = image_ref()
    _say(f"image: buildah build {ref} ...")
    _run([*storage, "build", "--quiet", "--layers=false", "-f", str(ctx / "Containerfile"),
          "-t", ref, str(ctx)], "buildah build")
    staged = work / "image"
    staged.mkdir()
    oci, docker = staged / names[0], staged / names[1]
    for path, transport in ((oci, f"oci-archive:{{}}:{ref}"),
                            (docker, f"docker-archive:{{}}:docker.io/library/{ref}")):
        # uncompressed: the docker archive is anyway, and gzip is most of a push's time
        _run([*storage, "push", "--quiet", "--disable-compression", ref,
              transport.format(path)], "buildah push")
    shutil.rmtree(done, ignore_errors=True)
    staged.rename(done)
    return _publish([done / name for name in names], out)


def build(out: Path = OUT, cache: Path = CACHE, *, python: str = sys.executable,
          fresh: bool = False) -> list[Path]:
    """Build the image; returns the OCI archive and the docker archive."""
    lacking = missing()
    if lacking:
        raise BuildError("building the image needs " + ", ".join(lacking))
    with _locked(cache):
        if fresh:
            for old in cache.iterdir():
                if old.name != "lock":
                    shutil.rmtree(old) if old.is_dir() else old.unlink()
        with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as tmp:
            work = Path(tmp)
            base, base_key = debian_layer(cache)
            app = app_layer(cache, work, base, base_key, wheels(cache, work, python))
            return assemble(cache, work, base, app, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev image", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT}")
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"default {CACHE}")
    parser.add_argument("--no-cache", action="store_true", help="empty the cache first")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        paths = build(args.out, args.cache, fresh=args.no_cache)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if str(exc).startswith("building the image needs") else 1
    _say(f"image: {image_ref()} built in {time.monotonic() - started:.0f} s")
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
