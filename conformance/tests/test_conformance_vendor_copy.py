"""A vendor copies ``plugins/redfish`` to a new name, renames it, and runs its own tests and
the conformance suite, exactly as a vendor would.

The copy goes to a temporary directory; the package, the distribution, the entry point,
the channel type and the test modules are renamed with plain text replacement (what
``sed`` would do); it is pip-installed (``-e``, ``--no-deps``) into a throwaway venv that
sees this workspace's site-packages (offline: the dependencies are already here), next
to the original ``powerplane-redfish``, so an incomplete rename shows up as a clash. The
vendor adds one test module of its own: the conformance suite on the emulator the copy
ships, with no ``negative:`` hints where the plugin declares what the suite needs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REDFISH = Path(__file__).resolve().parents[2] / "plugins" / "redfish"
NEW = "acme-redfish"
PKG = "powerplane_acme_redfish"
SKIP = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", "build")

VENDOR_SUITE = '''\
"""The conformance suite against the renamed channel type, on the emulator it ships."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from powerplane.testing import process_registry
from powerplane_conformance import ConformanceSuite

emulator = pytest.importorskip("powerplane_acme_redfish.testing.emulator")
PASSWORD_ENV = "PP_VENDOR_EMU_PASSWORD"


def _timeouts() -> dict[str, Any]:
    ctype = process_registry().channel_types["acme-redfish"]
    if ctype.timeouts_field() == "timeouts":
        return {"timeouts": {"connect_s": 5, "read_s": 10}}
    return {"connect_timeout_s": 5, "read_timeout_s": 10}


def _negative() -> dict[str, Any]:
    ctype = process_registry().channel_types["acme-redfish"]
    if ctype.timeouts_field() == "timeouts" and ctype.address is not None:
        return {}
    return {"bmc": {"address_key": "endpoint", "address_format": "https://{host}:{port}",
                    "secret_key": "password", "timeout_s": 1,
                    "timeout_key": ["connect_timeout_s", "read_timeout_s"]}}


class TestAcmeRedfishConformance(ConformanceSuite):
    conformance_subjects = ("n0", "n1")

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_target(
        cls, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[dict[str, Any]]:
        emu = emulator.SushyEmulator(tmp_path_factory.mktemp("emulator"), systems=2)
        with emu:
            os.environ[PASSWORD_ENV] = emu.password
            yield {
                "channels": {"bmc": {
                    "type": "acme-redfish", "endpoint": emu.endpoint,
                    "username": emu.username, "password": {"env": PASSWORD_ENV},
                    "verify": str(emu.tls.ca), "auth": "basic", **_timeouts()}},
                "nodes": {f"n{i}": {"channels": [{"channel": "bmc", "target": path}]}
                          for i, path in enumerate(emu.system_paths)},
                "conformance": {
                    "allow_destructive": True, "settle_timeout_s": 10, "repeat": 1,
                    "expected_capabilities": {"bmc": ["reboot", "shutdown", "power-on"]},
                    "negative": _negative(),
                },
            }
        os.environ.pop(PASSWORD_ENV, None)
'''


def rename(root: Path) -> None:
    """Rename the copy the way a vendor's ``sed`` would."""
    src = root / "src"
    (src / "powerplane_redfish").rename(src / PKG)
    for test in (root / "tests").glob("test_redfish_*.py"):
        test.rename(test.with_name(test.name.replace("test_redfish_", "test_acme_redfish_")))
    for path in root.rglob("*"):
        if not path.is_file() or path.suffix not in (".py", ".toml", ".md", ".cfg"):
            continue
        text = path.read_text(encoding="utf-8")
        new = text.replace("powerplane_redfish", PKG)
        new = new.replace("powerplane-redfish", f"powerplane-{NEW}")
        new = new.replace("test_redfish_", "test_acme_redfish_")
        new = re.sub(r"""(["'])redfish\1""", rf"\g<1>{NEW}\g<1>", new)  # type, peer names
        new = re.sub(r"^redfish = ", f"{NEW} = ", new, flags=re.M)  # the entry point
        if new != text:
            path.write_text(new, encoding="utf-8")


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # the workspace's scripts (sushy-emulator) are visible after the venv's own, as its
    # packages are through workspace.pth
    env = {**os.environ, "PATH": os.pathsep.join(
        [str(Path(argv[0]).parent), str(Path(sys.executable).parent),
         os.environ.get("PATH", "")])}
    env.pop("PYTHONPATH", None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env, check=False)


@pytest.mark.slow
def test_a_vendor_copy_of_redfish_renamed_passes_its_tests_and_the_suite(
    tmp_path: Path,
) -> None:
    if not (REDFISH / "src" / "powerplane_redfish").is_dir():
        pytest.skip("plugins/redfish is not in this checkout")
    root = tmp_path / f"powerplane-{NEW}"
    shutil.copytree(REDFISH, root, ignore=SKIP)
    rename(root)
    (root / "tests" / f"test_{PKG.removeprefix('powerplane_')}_conformance.py").write_text(
        VENDOR_SUITE, encoding="utf-8")
    leftovers = [str(p.relative_to(root)) for p in root.rglob("*redfish*")
                 if "acme" not in p.name and "dmtf" not in str(p)]
    assert not leftovers, leftovers

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                    "['purelib'])"], tmp_path, 60).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "workspace.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n", encoding="utf-8")
    # the venv's bundled setuptools predates PEP 639 licences; the workspace's is used
    _run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], tmp_path, 120)
    pip = _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(root)],
               tmp_path, 300)
    if pip.returncode != 0:
        pytest.skip(f"pip could not build the distribution here: {pip.stderr[-300:]}")

    listed = _run([str(python), "-c", "from powerplane.cli import main; "
                   "main(['plugins', '-o', 'json'])"], root, 120)
    assert f'"{NEW}"' in listed.stdout, listed.stdout + listed.stderr
    assert '"redfish"' in listed.stdout  # the original is still there: no clash

    # The copy's own pytest settings, if it has any; else what the in-tree tests rely on
    # from the repository's root pyproject (asyncio mode, the slow marker).
    own = "[tool.pytest" in (root / "pyproject.toml").read_text(encoding="utf-8")
    opts = [] if own else ["-o", "asyncio_mode=auto",
                           "-o", "asyncio_default_fixture_loop_scope=function",
                           "-o", "markers=slow: waits on real device timing"]
    run = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                "no:randomly", *opts, "--rootdir", str(root), "tests"], root, 1500)
    tail = run.stdout[-4000:] + run.stderr[-1000:]
    assert run.returncode == 0, tail
    assert "TestAcmeRedfishConformance" in _run(
        [str(python), "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         *opts, "--rootdir", str(root), "tests"], root, 300).stdout
    assert sys.executable != str(python)
