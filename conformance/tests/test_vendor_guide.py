"""The vendor guide, followed as written: ``docs/vendor-guide.md`` from a fresh copy of the
repository to the conformance suite passing on a device fixture of the vendor's own.

The guide marks the blocks a vendor runs with a comment line right before the fence,
``<!-- guide-test: KIND [ARG] -->``; this test takes them from the document (it holds no
copy of them) and runs them in order in a temporary folder that holds the repository's
files (what git tracks, or would track: a fresh clone's files, as the working tree has
them) as ``./powerplane``:

- ``run``: a shell block, run by bash (``set -eo pipefail``) as one session: the working
  directory and the exported variables carry from one block to the next;
- ``serve``: a command the guide starts in the background (``... &``): started here as a
  :class:`powerplane.testing.Subprocess`, waited for on its port, stopped by its handle;
- ``file PATH``: the block's text is written to ``PATH`` in the session's directory.

The guide's port 8080 becomes a free port. The venv is the guide's own ``python3 -m venv``
(no system site packages; this test's venv is taken off ``PATH``); pip installs from the
repository's folders and takes the dependencies from the configured index or its cache.
Blocks that call ``pytest`` get ``PYTEST_ADDOPTS=--powerplane-report FILE`` so the test can
read what the suite did; the command itself is the guide's. Every subprocess is bounded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from powerplane.testing import Subprocess, free_port, wait_ready
from powerplane_conformance.newplugin import write_plugin

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "vendor-guide.md"
GUIDE_PORT = "8080"
BLOCK_TIMEOUT_S = 600
"""Bound on one block (the first one creates the venv and installs two distributions)."""

MARK = re.compile(
    r"^<!-- guide-test: (?P<kind>run|serve|file)(?: (?P<arg>\S+))? -->\n"
    r"```(?P<lang>[a-z]*)\n(?P<body>.*?)\n```$",
    re.M | re.S,
)


@dataclass(frozen=True)
class Block:
    """One marked block of the guide."""

    kind: str
    arg: str | None
    body: str
    line: int


def guide_blocks(text: str) -> list[Block]:
    """The marked blocks, in the document's order."""
    return [Block(m["kind"], m["arg"], m["body"], text.count("\n", 0, m.start()) + 1)
            for m in MARK.finditer(text)]


# -- what the guide says, checked without running it ------------------------------------


def test_the_guide_marks_the_steps_it_walks() -> None:
    blocks = guide_blocks(GUIDE.read_text(encoding="utf-8"))
    kinds = [b.kind for b in blocks]
    assert kinds.count("serve") == 1 and kinds.count("file") == 1, kinds
    runs = "\n".join(b.body for b in blocks if b.kind == "run")
    # installed from the repository's folders, never by a name no index serves
    assert "pip install ./powerplane/core ./powerplane/conformance" in runs
    assert not re.search(r"pip install (-U )?powerplane(\s|$)", runs)
    for step in ("powerplane new-plugin acme-pdu", "pytest tests",
                 "powerplane conformance --target target.yaml"):
        assert step in runs, step
    assert [b.arg for b in blocks if b.kind == "file"] == ["tests/conftest.py"]


def test_the_guide_links_only_files_the_repository_has() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert "CONTRACT.md" not in text
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert "reference.md" in links
    missing = [link for link in links if "://" not in link
               and not (GUIDE.parent / link).exists()]
    assert not missing, missing


def test_the_files_the_guide_lists_are_the_ones_new_plugin_writes(tmp_path: Path) -> None:
    """The table under "What you get" names each generated file by its path."""
    text = GUIDE.read_text(encoding="utf-8")
    table = text[text.index("What you get"):]
    table = table[:table.index("\n\n", table.index("| file |"))]
    listed = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    root = write_plugin("acme-pdu", tmp_path)
    missing = [rel for rel in listed if not (root / rel).is_file()]
    assert listed and not missing, missing
    written = {str(p.relative_to(root)) for p in root.rglob("*")
               if p.is_file() and p.name not in ("__init__.py", "py.typed")}
    assert written - set(listed) == set(), sorted(written - set(listed))


def test_the_guide_fixture_builds_a_config_the_channel_type_accepts(tmp_path: Path) -> None:
    """The fixture the guide gives holds only keys of the generated config model."""
    block = next(b for b in guide_blocks(GUIDE.read_text(encoding="utf-8"))
                 if b.kind == "file")
    keys = set(re.findall(r'^\s+"([a-z_]+)": ', block.body[block.body.index("config={"):
                                                          block.body.index("targets=")],
                          re.M))
    assert {"type", "endpoint", "password"} <= keys, keys
    root = write_plugin("acme-pdu", tmp_path)
    config = (root / "src" / "powerplane_acme_pdu" / "config.py").read_text(encoding="utf-8")
    fields = set(re.findall(r"^    ([a-z_]+): ", config, re.M))
    assert keys - {"type"} <= fields, (keys, fields)


# -- the walk ----------------------------------------------------------------------------


def _repository_copy(dest: Path) -> None:
    """The repository's files as a fresh clone has them (tracked, or new and not ignored),
    with the working tree's content."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: cannot tell the repository's files")
    listed = subprocess.run([git, "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            timeout=60, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _base_env(shims: Path) -> dict[str, str]:
    """This environment without this test's venv, Python or pytest settings; ``python3``
    is a Python 3.11+ (this one's base interpreter, where ``PATH`` has none)."""
    drop = ("VIRTUAL_ENV", "PYTHON", "PYTEST_", "POWERPLANE_", "ACME_PDU_", "CONDA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    ours = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in ours]
    found = shutil.which("python3", path=os.pathsep.join(path))
    ok = found is not None and subprocess.run(
        [found, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"],
        capture_output=True, timeout=60, check=False, env=env).returncode == 0
    if not ok:
        shims.mkdir(parents=True, exist_ok=True)
        base = getattr(sys, "_base_executable", sys.executable)
        (shims / "python3").symlink_to(base)
        path.insert(0, str(shims))
    env["PATH"] = os.pathsep.join(path)
    return env


class Session:
    """One shell session that the guide's blocks run in, one bash per block."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.env = env
        self.state = work.parent / "session"
        self.state.mkdir()
        self.cwd_file = self.state / "cwd"
        self.env_file = self.state / "env.sh"
        self.outputs: list[str] = []
        self.timings: list[tuple[int, float]] = []
        self.served: list[Subprocess] = []
        self._bash(f'pwd > "{self.cwd_file}"; export -p > "{self.env_file}"', 60)

    @property
    def cwd(self) -> Path:
        return Path(self.cwd_file.read_text(encoding="utf-8").strip())

    def variable(self, name: str) -> str:
        """An exported variable of the session."""
        proc = self._bash(f'. "{self.env_file}"; printf %s "${{{name}:-}}"', 60)
        return proc.stdout

    def _bash(self, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script], cwd=self.work, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def run(self, block: Block, body: str, addopts: str | None) -> str:
        extra = f"export PYTEST_ADDOPTS={addopts!r}\n" if addopts else ""
        script = (f'set -eo pipefail\ncd "$(cat "{self.cwd_file}")"\n. "{self.env_file}"\n'
                  f"{extra}{body}\nunset PYTEST_ADDOPTS\n"
                  f'pwd > "{self.cwd_file}"\nexport -p > "{self.env_file}"\n')
        started = time.monotonic()
        proc = self._bash(script, BLOCK_TIMEOUT_S)
        self.timings.append((block.line, time.monotonic() - started))
        out = proc.stdout + proc.stderr
        self.outputs.append(out)
        assert proc.returncode == 0, (
            f"docs/vendor-guide.md line {block.line}: the block exited {proc.returncode}:\n"
            f"{body}\n--- output (tail) ---\n{out[-6000:]}")
        return out

    def serve(self, block: Block, body: str, port: int) -> None:
        command = re.sub(r"\s+#.*$", "", body.strip()).rstrip("& ").strip()
        log = self.state / f"serve-{len(self.served)}.log"
        proc = Subprocess(["bash", "-c", f'cd "$(cat "{self.cwd_file}")" && '
                           f'. "{self.env_file}" && exec {command}'],
                          cwd=self.work, env=self.env, log=log)
        self.served.append(proc)

        def listening() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True

        wait_ready(listening, 60, f"the guide's served device (line {block.line})", proc)

    def write(self, block: Block, body: str) -> None:
        assert block.arg is not None
        path = self.cwd / block.arg
        assert path.parent.is_dir(), f"line {block.line}: no folder for {block.arg}"
        path.write_text(body + "\n", encoding="utf-8")

    def close(self) -> None:
        for proc in self.served:
            proc.stop()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    work = tmp_path / "work"
    (work / "powerplane").mkdir(parents=True)
    _repository_copy(work / "powerplane")
    s = Session(work, _base_env(tmp_path / "shims"))
    try:
        yield s
    finally:
        s.close()


def _report(path: Path) -> dict[str, Any]:
    assert path.is_file(), f"no results.json at {path}"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _outcomes(data: dict[str, Any], ident: str) -> set[str]:
    return {r["outcome"] for r in data["results"] if r["id"] == ident}


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_the_vendor_guide_works_as_written_from_a_fresh_copy(
    session: Session, tmp_path: Path
) -> None:
    blocks = guide_blocks(GUIDE.read_text(encoding="utf-8"))
    port = free_port()
    pytest_reports: list[Path] = []
    cli_reports: list[dict[str, Any]] = []
    conftest_block = ""
    for block in blocks:
        body = block.body.replace(GUIDE_PORT, str(port))
        if block.kind == "serve":
            session.serve(block, body, port)
        elif block.kind == "file":
            session.write(block, body)
            conftest_block = body
        else:
            calls_pytest = re.search(r"^pytest\b", body, re.M) is not None
            report = tmp_path / f"pytest-report-{len(pytest_reports)}.json"
            session.run(block, body, f"--powerplane-report {report}" if calls_pytest
                        else None)
            if calls_pytest:
                pytest_reports.append(report)
            if "powerplane conformance --target" in body:
                cli_reports.append(_report(session.cwd / "results.json"))
    timings = ", ".join(f"line {line}: {s:.1f} s" for line, s in session.timings)
    print(f"\nvendor guide blocks: {timings}")

    work = session.work
    # a fresh venv, not this one: the distributions came from the copy's folders
    assert "include-system-site-packages = false" in (
        work / ".venv" / "pyvenv.cfg").read_text(encoding="utf-8")
    where = subprocess.run(
        [str(work / ".venv" / "bin" / "python"), "-c",
         "import powerplane, powerplane_conformance as c; print(powerplane.__file__, "
         "c.__file__)"], capture_output=True, text=True, timeout=60, check=True,
        env=session.env).stdout.split()
    assert where and all(p.startswith(str(work / ".venv")) for p in where), where
    # the wheels the guide names
    for name in re.findall(r"`dist/([^`*\s]+\.whl)`", GUIDE.read_text(encoding="utf-8")):
        assert (work / "dist" / name).is_file(), name

    plugin = work / "powerplane-acme-pdu"
    assert len(pytest_reports) == 2, pytest_reports
    # the generated tests on the stand-in the plugin ships
    first = _report(pytest_reports[0])
    assert first["channel_type"] == "acme-pdu"
    assert first["counts"]["fail"] == 0 and first["counts"]["pass"] > 0, first["counts"]
    # the guide's own fixture replaced the stand-in one, and the suite acted through it
    # on the device the guide served (destructive: the environment said so)
    assert (plugin / "tests" / "conftest.py").read_text(encoding="utf-8") == \
        conftest_block + "\n"
    second = _report(pytest_reports[1])
    assert second["counts"]["fail"] == 0, [r for r in second["results"]
                                          if r["outcome"] == "fail"]
    for ident in ("SHUTDOWN_READBACK", "POWER_ON_READBACK", "REBOOT_CONCURRENT",
                  "WRONG_CREDENTIALS_REJECTED", "STATE_RESTORED"):
        assert _outcomes(second, ident) == {"pass"}, (ident, _outcomes(second, ident))

    # the command line on the generated target.yaml: read-only, then destructive
    assert len(cli_reports) == 2, len(cli_reports)
    readonly, destructive = cli_reports
    assert readonly["counts"]["fail"] == 0, [r for r in readonly["results"]
                                            if r["outcome"] == "fail"]
    assert _outcomes(readonly, "SHUTDOWN_READBACK") == {"not_tested"}
    assert readonly["counts"]["pass"] > 0
    # what the guide says of it: not `pass` (so --require-complete would exit 1)
    assert readonly["verdict"] != "pass", readonly.get("headline")
    assert destructive["counts"]["fail"] == 0, [r for r in destructive["results"]
                                               if r["outcome"] == "fail"]
    assert _outcomes(destructive, "SHUTDOWN_READBACK") == {"pass"}
    if "verdict" in destructive:
        assert destructive["verdict"] == "pass", destructive.get("verdict_reason")

    # the password the guide exported is nowhere: no output, no file the walk left
    password = session.variable("ACME_PDU_PASSWORD")
    assert len(password) >= 16
    assert not [i for i, out in enumerate(session.outputs) if password in out]
    leaks = [str(p) for p in [*plugin.rglob("*"), *tmp_path.glob("pytest-report-*.json")]
             if p.is_file() and password.encode() in p.read_bytes()]
    assert not leaks, leaks
    for proc in session.served:
        assert proc.log is not None and password not in proc.log_tail(1 << 20)
