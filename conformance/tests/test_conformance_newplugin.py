"""``powerplane new-plugin NAME`` writes a distribution that passes the suite out of the box."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from powerplane.cli import cli
from powerplane.plugins import registry


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    result = CliRunner().invoke(cli, ["new-plugin", "acme-bmc", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "powerplane-acme-bmc"
    sys.path.insert(0, str(root / "src"))
    module = importlib.import_module("powerplane_acme_bmc.plugin")
    reg = registry()
    reg.add_module("acme-bmc", module, "powerplane-acme-bmc", "0.1.0")
    yield root
    reg.remove("acme-bmc")
    sys.path.remove(str(root / "src"))
    for name in [m for m in sys.modules if m.startswith("powerplane_acme_bmc")]:
        del sys.modules[name]


def test_generated_plugin_has_the_parts(generated: Path) -> None:
    text = (generated / "pyproject.toml").read_text(encoding="utf-8")
    assert '[project.entry-points.powerplane]\nacme-bmc = "powerplane_acme_bmc.plugin"' in text
    for rel in ("src/powerplane_acme_bmc/channel.py", "src/powerplane_acme_bmc/config.py",
                "src/powerplane_acme_bmc/py.typed", "tests/test_conformance.py",
                "README.md", "target.yaml"):
        assert (generated / rel).exists(), rel


def test_generated_plugin_passes_the_suite(generated: Path, tmp_path: Path) -> None:
    report = tmp_path / "results.json"
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    code = pytest.main([str(generated / "tests"), "-q", "-p", "no:cacheprovider",
                        "-p", "no:asyncio", "-c", str(tmp_path / "pytest.ini"),
                        "--rootdir", str(generated), "--powerplane-report", str(report)])
    data = json.loads(report.read_text(encoding="utf-8"))
    assert code == 0, data["results"]
    assert data["counts"]["fail"] == 0
    assert data["counts"]["pass"] >= 30
    assert data["channel_type"] == "acme-bmc"
    assert data["plugin"]["name"] == "acme-bmc"


def test_generated_code_is_lint_clean(generated: Path) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    proc = subprocess.run([ruff, "check", "--isolated", "--select", "E,F,W,B,UP,RUF",
                           "--line-length", "100", str(generated)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_bad_name_and_existing_folder_exit_two(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["new-plugin", "Bad_Name", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "bad plugin name" in result.output
    assert CliRunner().invoke(cli, ["new-plugin", "ok", "--dir", str(tmp_path)]).exit_code == 0
    result = CliRunner().invoke(cli, ["new-plugin", "ok", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "already exists" in result.output


@pytest.mark.slow
def test_generated_plugin_installs_and_passes_in_a_fresh_venv(tmp_path: Path) -> None:
    """pip-install the generated distribution into a throwaway venv (which sees this
    environment's packages) and run its tests there: the entry point is found."""
    import sysconfig
    import venv

    root = Path(CliRunner().invoke(
        cli, ["new-plugin", "acme-pdu", "--dir", str(tmp_path)]).output.split()[1])
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "workspace.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n", encoding="utf-8")
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e",
                          str(root)], capture_output=True, text=True, timeout=240, check=False)
    if pip.returncode != 0:
        pytest.skip(f"pip could not build the distribution here: {pip.stderr[-300:]}")
    listed = subprocess.run([str(python), "-c",
                             "from powerplane.cli import main; main(['plugins', '-o', 'json'])"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert '"acme-pdu"' in listed.stdout, listed.stdout + listed.stderr
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(root / "tests")], capture_output=True, text=True, timeout=240,
                         cwd=root, check=False)
    assert run.returncode == 0, run.stdout[-2000:]
