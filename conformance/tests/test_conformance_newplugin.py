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
from powerplane.testing import registered


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    result = CliRunner().invoke(cli, ["new-plugin", "acme-bmc", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "powerplane-acme-bmc"
    sys.path.insert(0, str(root / "src"))
    module = importlib.import_module("powerplane_acme_bmc.plugin")
    with registered(module, name="acme-bmc", distribution="powerplane-acme-bmc",
                    version="0.1.0"):
        yield root
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
    # the network negatives run from the channel type's declarations, with no hints
    target = (generated / "tests" / "test_conformance.py").read_text(encoding="utf-8")
    assert '"negative"' not in target
    for ident in ("CLOSED_PORT_UNREACHABLE", "SILENT_SERVER_TIMEOUT",
                  "WRONG_CREDENTIALS_REJECTED", "SECRET_NOT_DISCLOSED"):
        # a probe of the suite's own fake is made once per channel: the other nodes' checks
        # name the node that made it
        got = {r["outcome"] for r in data["results"] if r["id"] == ident
               and not (r["outcome"] == "skip" and "made once per channel" in r["message"])}
        assert got == {"pass"}, (ident, [r["message"] for r in data["results"]
                                         if r["id"] == ident])


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


def _shape(root: Path, pkg: str) -> set[str]:
    """The tree as the plugin shape sees it: top-level files, the package's modules and
    folders, and the tests folder (what is inside testing/ and tests/ is the plugin's)."""
    out = {p.name for p in root.iterdir() if p.is_file() and not p.name.startswith(".")}
    src = root / "src" / pkg
    out |= {f"src/{p.name}" for p in src.iterdir()
            if p.name != "__pycache__" and not p.name.endswith(".egg-info")}
    out |= {"tests/"} if (root / "tests").is_dir() else set()
    return out


def test_generated_tree_has_the_in_tree_shape(generated: Path) -> None:
    """File for file as plugins/redfish, but for the differences newplugin documents."""
    from powerplane_conformance.newplugin import SHAPE_DIFFERENCES

    redfish = Path(__file__).resolve().parents[2] / "plugins" / "redfish"
    if not (redfish / "src" / "powerplane_redfish").is_dir():
        pytest.skip("plugins/redfish is not in this checkout")
    ours = _shape(generated, "powerplane_acme_bmc")
    theirs = _shape(redfish, "powerplane_redfish")
    only_theirs = {f"src/{m}" for m in SHAPE_DIFFERENCES["only in plugins/redfish"]}
    only_ours = set(SHAPE_DIFFERENCES["only in the template"])
    assert ours - only_ours == theirs - only_theirs, (sorted(ours), sorted(theirs))
    for must in ("src/plugin.py", "src/config.py", "src/channel.py", "src/errors.py",
                 "src/peer.py", "src/testing", "src/py.typed", "tests/", "README.md",
                 "pyproject.toml"):
        assert must in ours, must


def test_generated_code_passes_mypy_strict(generated: Path) -> None:
    mypy = Path(sys.executable).parent / "mypy"
    if not mypy.exists():
        pytest.skip("mypy is not installed")
    proc = subprocess.run([str(mypy), "--strict", "--no-incremental", "src", "tests"],
                          capture_output=True, text=True, check=False, timeout=300,
                          cwd=generated)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generated_plugin_is_as_honest_as_the_rules(generated: Path) -> None:
    """Declared (not discovered) capabilities; unknown for a state not plainly on or off;
    errors by class; every verb gated; address and Timeouts declared."""
    from powerplane import (
        Address,
        AuthenticationFailed,
        ChannelTimeout,
        PowerState,
        ProtocolError,
        Source,
        Timeouts,
        Unreachable,
    )

    plugin = importlib.import_module("powerplane_acme_bmc.plugin")
    channel = importlib.import_module("powerplane_acme_bmc.channel")
    errors = importlib.import_module("powerplane_acme_bmc.errors")
    ctype = plugin.CHANNEL_TYPE
    assert ctype.gated_sends is True
    assert ctype.address == Address("endpoint")
    assert ctype.timeouts_field() == "timeouts"
    assert ctype.config.model_fields["timeouts"].annotation is Timeouts
    assert ctype.secret_fields() == ("password",)
    config = ctype.config.model_validate({"endpoint": "https://192.0.2.1"})
    ch = channel.AcmeBmcChannel("dev", config)
    assert ch._caps.source is Source.DECLARED
    for state in ("powering-on", "standby", "Off", None):
        assert channel.reading_of(state).state is PowerState.UNKNOWN, state
    source = (generated / "src/powerplane_acme_bmc/channel.py").read_text(encoding="utf-8")
    assert source.count("about_to_send()") == 1 and "conn.request" in source
    assert source.index("about_to_send()") < source.index("conn.request(")
    kw = {"channel": "c", "target": "m", "sent_verb": False, "timeout_s": 1}
    assert type(errors.map_error(ConnectionRefusedError(), phase="connect", **kw)) \
        is Unreachable
    assert type(errors.map_error(TimeoutError(), phase="answer", **kw)) is ChannelTimeout
    assert type(errors.map_error(errors.DeviceAnswer(401, ""), phase="answer", **kw)) \
        is AuthenticationFailed
    assert type(errors.map_error(ValueError(), phase="answer", **kw)) is ProtocolError



def test_the_generated_suite_takes_its_device_from_one_fixture(generated: Path) -> None:
    """The target is built from the ``device`` fixture in tests/conftest.py (the stand-in
    until a vendor replaces it), not from the stand-in's keys inside the test."""
    suite = (generated / "tests" / "test_conformance.py").read_text(encoding="utf-8")
    conftest = (generated / "tests" / "conftest.py").read_text(encoding="utf-8")
    assert "def conformance_target(cls, device: StartedPeer)" in suite
    assert "start_peer" not in suite and "endpoint" not in suite
    assert '"allow_destructive": False' in suite  # only the device fixture turns it on
    assert "def device(" in conftest and "start_peer(" in conftest


def test_the_stand_in_serves_on_its_own_and_refuses_bad_input(
    generated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """``python -m <pkg>.testing.device``: the stand-in as a device to point a target at;
    no password or a bad --machines is exit 2 naming what, a taken port exit 1."""
    import base64
    import os
    import urllib.request

    from powerplane.testing import SilentServer, Subprocess, free_port, wait_ready

    device = importlib.import_module("powerplane_acme_bmc.testing.device")
    monkeypatch.delenv("ACME_BMC_PASSWORD", raising=False)
    with pytest.raises(SystemExit) as exc:
        device.main([])
    assert exc.value.code == 2 and "set ACME_BMC_PASSWORD" in capsys.readouterr().err
    monkeypatch.setenv("ACME_BMC_PASSWORD", "pw-stand-in-1")
    with pytest.raises(SystemExit) as exc:
        device.main(["--machines", "m1=on,m2=maybe"])
    assert exc.value.code == 2 and "'m2=maybe'" in capsys.readouterr().err
    with SilentServer() as taken:
        assert device.main(["--port", str(taken.port)]) == 1
    assert f"cannot listen on 127.0.0.1:{taken.port}" in capsys.readouterr().err

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(generated / "src"),
           "ACME_BMC_PASSWORD": "pw-stand-in-1"}
    log = tmp_path / "device.log"
    token = base64.b64encode(b"admin:pw-stand-in-1").decode()

    def answers() -> bool:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/machines/m2",
                                         headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=1) as reply:
            return bool(json.loads(reply.read()) == {"power": "off"})

    with Subprocess([sys.executable, "-m", "powerplane_acme_bmc.testing.device", "--port",
                     str(port), "--machines", "m1=on,m2=off"], env=env, log=log) as proc:
        wait_ready(answers, 30, "the stand-in device", proc)
        assert proc.stop() == 0  # SIGTERM: it closes and exits 0
    text = log.read_text(encoding="utf-8")
    assert f"http://127.0.0.1:{port}" in text and "pw-stand-in-1" not in text


def test_the_generated_plugin_module_has_the_in_tree_shape(generated: Path) -> None:
    """As every in-tree plugin's ``plugin.py`` (plugins/redfish's, plugins/pdu's):
    ``REGISTERS`` names the channel type, and importing the module imports neither the
    config model nor the channel (the channel type is built on first use)."""
    probe = ("import json, sys\n"
             "sys.path.insert(0, sys.argv[1])\n"
             "import importlib\n"
             "out = {}\n"
             "for pkg in ('powerplane_acme_bmc', 'powerplane_redfish', 'powerplane_pdu'):\n"
             "    plugin = importlib.import_module(pkg + '.plugin')\n"
             "    out[pkg] = [{k: list(v) for k, v in plugin.REGISTERS.items()},\n"
             "                pkg + '.config' in sys.modules, pkg + '.channel' in sys.modules]\n"
             "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(generated / "src")],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["powerplane_acme_bmc"] == [{"channel": ["acme-bmc"]}, False, False]
    for pkg in ("powerplane_redfish", "powerplane_pdu"):  # the shape it copies
        assert found[pkg][1:] == [False, False], pkg
        assert list(found[pkg][0]) == ["channel"], pkg
    plugin = importlib.import_module("powerplane_acme_bmc.plugin")
    source = (generated / "src/powerplane_acme_bmc/plugin.py").read_text(encoding="utf-8")
    assert 'REGISTERS: Registers = {"channel": ("acme-bmc",)}' in source  # typed as in-tree
    assert plugin.CHANNEL_TYPE is plugin.CHANNEL_TYPE  # built once
    assert plugin.CHANNEL_TYPE.name == "acme-bmc"
