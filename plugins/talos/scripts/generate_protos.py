"""Regenerate the protobuf messages and grpclib stubs of ``powerplane_talos._generated``.

Run from anywhere with the workspace venv (needs grpcio-tools and grpclib)::

    .venv/bin/python plugins/talos/scripts/generate_protos.py           # regenerate
    .venv/bin/python plugins/talos/scripts/generate_protos.py --check   # committed = fresh?

It runs grpcio-tools' ``protoc`` (``--python_out``, ``--pyi_out`` and
``--grpclib_python_out``; grpclib ships the ``protoc-gen-grpclib_python`` plugin)
on the ``.proto`` files kept next to the generated modules, then rewrites the
generated imports to package-relative ones. Afterwards, check that the protobuf
range pinned in ``plugins/talos/pyproject.toml`` still matches the printed
generator version.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "powerplane_talos._generated"
OUT = SRC / "powerplane_talos" / "_generated"
PROTOS = ["common.proto", "machine.proto"]


def _relative(text: str) -> str:
    """Rewrite ``powerplane_talos._generated`` imports to package-relative imports."""
    dotted = re.escape(PKG)
    # messages: "from powerplane_talos._generated import common_pb2 as ..."
    text = re.sub(rf"^from {dotted} import ", "from . import ", text, flags=re.M)
    # grpclib stubs: "import powerplane_talos._generated.machine_pb2" and qualified uses
    text = re.sub(rf"^import {dotted}\.(\w+)$", r"from . import \1", text, flags=re.M)
    return re.sub(rf"\b{dotted}\.", "", text)


def generate(into: Path) -> list[Path]:
    """Run protoc with outputs under ``into``; the generated files, imports made relative."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    # protoc finds protoc-gen-grpclib_python on PATH, next to this interpreter
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{SRC}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpclib_python_out={into}",
        *[f"powerplane_talos/_generated/{p}" for p in PROTOS],
    ]
    code = protoc.main(args)
    if code != 0:
        raise SystemExit(f"protoc failed with status {code}")
    out = into / "powerplane_talos" / "_generated"
    files = sorted(out.glob("*_pb2.py")) + sorted(out.glob("*_pb2.pyi")) + sorted(
        out.glob("*_grpc.py")
    )
    for path in files:
        path.write_text(_relative(path.read_text(encoding="utf-8")), encoding="utf-8")
    return files


def main(argv: list[str]) -> int:
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            stale = [
                p.name for p in generate(Path(tmp))
                if not (OUT / p.name).is_file()
                or (OUT / p.name).read_text(encoding="utf-8") != p.read_text(encoding="utf-8")
            ]
        if stale:
            print(f"stale generated modules: {', '.join(stale)}; run {Path(__file__).name}")
            return 1
        print("generated modules are fresh")
        return 0
    for path in generate(SRC):
        print(f"wrote {path.relative_to(SRC)}")
    version = subprocess.run(
        [sys.executable, "-c", "from google.protobuf import __version__; print(__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    print(f"protobuf runtime here: {version}; generated header:")
    for line in (OUT / "machine_pb2.py").read_text(encoding="utf-8").splitlines():
        if "Protobuf Python Version" in line:
            print(f"  {line.strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
