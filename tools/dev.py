"""The workspace's one entry point: set up .venv, then run demo, tests or benchmarks.

    ./dev demo [ARGS]     install if needed, then `powerplane demo ARGS`
    ./dev test [ARGS]     install if needed, then ruff, mypy --strict, the import
                          contracts (lint-imports) and pytest ARGS
                          (in 3 worker processes; POWERPLANE_TEST_WORKERS=1 for one)
    ./dev bench           install if needed, then every benchmark under bench/
    ./dev image [ARGS]    install if needed, then build the operator image powerplane:VERSION
                          without a registry (root; Debian's mmdebstrap and buildah) and
                          print where it is: dist/image/powerplane-VERSION.oci.tar (OCI
                          archive) and .docker.tar (for kind and k3d); ARGS: --no-cache,
                          --out DIR, --cache DIR (plugins/kubernetes/image/build.py)
    ./dev install         install only
    ./dev run CMD ...     install if needed, then run CMD inside the venv

Needs only Python 3.11+. The venv is .venv at the repository root; it is reused and
reinstalled only when a pyproject.toml changes.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".powerplane-installed"


def members() -> list[Path]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out: list[Path] = []
    for pattern in cfg["tool"]["powerplane"]["workspace"]["members"]:
        for hit in sorted(glob.glob(str(ROOT / pattern))):
            path = Path(hit)
            if (path / "pyproject.toml").is_file() and path not in out:
                out.append(path)
    return out


def fingerprint(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in [ROOT / "pyproject.toml", *[m / "pyproject.toml" for m in paths]]:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def run(cmd: list[str], **kw: object) -> int:
    return subprocess.call(cmd, cwd=ROOT, **kw)  # type: ignore[call-overload]


def install() -> None:
    paths = members()
    want = fingerprint(paths)
    if STAMP.exists() and STAMP.read_text() == want and PY.exists():
        return
    if not PY.exists():
        print("creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
        run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = cfg.get("dependency-groups", {}).get("dev", [])
    args = [str(PY), "-m", "pip", "install", "-q"]
    for m in paths:
        meta = tomllib.loads((m / "pyproject.toml").read_text()).get("project", {})
        extras = meta.get("optional-dependencies", {})
        spec = f"{m}[test]" if "test" in extras else str(m)
        args += ["-e", spec]
    args += dev
    print(f"installing {len(paths)} workspace members and dev tools into .venv", flush=True)
    if run(args) != 0:
        sys.exit("pip install failed")
    STAMP.write_text(want)


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - say so plainly on an old Python
        sys.exit("powerplane needs Python 3.11 or newer")
    cmd = argv[0] if argv else "help"
    rest = argv[1:]
    if cmd in ("help", "-h", "--help"):
        print(__doc__)
        return 0
    install()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               VIRTUAL_ENV=str(VENV))
    if cmd == "install":
        return 0
    if cmd == "demo":
        return run([str(BIN / "powerplane"), "demo", *rest], env=env)
    if cmd == "run":
        return run(rest, env=env)
    if cmd == "image":
        return run([str(PY), str(ROOT / "plugins/kubernetes/image/build.py"), *rest], env=env)
    if cmd == "bench":
        rc = 0
        for script in sorted((ROOT / "bench").glob("bench_*.py")):
            print(f"== {script.name}", flush=True)
            rc |= run([str(PY), str(script)], env=env)
        return rc
    if cmd == "test":
        print("== ruff", flush=True)
        if run([str(BIN / "ruff"), "check", "."], env=env) != 0:
            return 1
        print("== mypy --strict", flush=True)
        typed = ["core/src"] + [
            str(p.relative_to(ROOT) / "src")
            for p in members()
            if p.name != "core" and (p / "src").is_dir()
        ]
        if run([str(BIN / "mypy"), *typed], env=env) != 0:
            return 1
        print("== import contracts (lint-imports)", flush=True)
        # the layers of [tool.importlinter] in pyproject.toml; no cache left in the tree
        if run([str(BIN / "lint-imports"), "--no-cache"], env=env) != 0:
            return 1
        print("== pytest", flush=True)
        workers = os.environ.get("POWERPLANE_TEST_WORKERS", "3")
        spread: list[str] = []
        if workers not in ("", "0", "1") and not any(
                a == "-n" or a.startswith(("-n", "--numprocesses")) for a in rest):
            # most tests wait on peers (sockets, subprocesses, device timing), so a few
            # more workers than cores pay; a module's (or a class's) tests stay together,
            # so each peer fixture starts once per worker that needs it
            spread = ["-n", workers, "--dist", "loadscope"]
        rc = run([str(PY), "-m", "pytest", *spread, *rest], env=env)
        return 0 if rc == 5 and rest else rc
    print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
