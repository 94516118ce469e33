"""The demo's plugins table, what ``--keep`` leaves usable, and Ctrl-C / SIGTERM.

- each demo peer is listed under the plugin that registered it, and only there;
- after ``--keep`` the conformance step has terminated no machine of the kept config: every
  node it names still reads on, and a control-plane node's reboot still passes the guard;
- Ctrl-C or SIGTERM inside a conformance sub-run (which reports the interrupt as its own
  verdict) or outside one stops the demo: the step that was cut is named, the peers are
  stopped, and ``powerplane demo`` exits 130 (it used to say "demo passed", exit 0).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from rich.console import Console
from test_demo import demo_registry, flat

from powerplane import hookimpl
from powerplane.channel import ChannelType
from powerplane.testing import Peer, StartedPeer
from powerplane_demo import Demo

GONE_S = 5.0
"""How long ``powerplane demo`` may take to be gone after its signal."""
RUN_S = 240.0
"""An explicit bound on a whole demo run and on reaching the moment a signal is sent."""


# -- the plugins table --------------------------------------------------------------------------
class _Cfg(BaseModel):
    pass


def _typed_plugin(kind: str, peer: str) -> object:
    """A plugin registering its own channel type and its own demo peer."""

    class Plugin:
        @hookimpl
        def register_channel_types(self, register: Callable[[ChannelType], None]) -> None:
            register(ChannelType(kind, _Cfg, lambda n, c: None))  # type: ignore[arg-type,return-value]

        @hookimpl
        def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
            register(Peer(peer, "pdu", lambda where: None))  # type: ignore[arg-type,return-value]

    return Plugin()


def test_the_plugins_table_lists_each_peer_under_its_own_plugin_only() -> None:
    reg = demo_registry()
    reg.add_module("typed-one", _typed_plugin("typed-one-kind", "peer-of-one"))
    reg.add_module("typed-two", _typed_plugin("typed-two-kind", "peer-of-two"))
    out = io.StringIO()
    Demo(Console(file=out, width=200), registry=reg).show_plugins(reg)
    rows = {line.split("│")[1].strip(): line for line in out.getvalue().splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert "peer-of-one" in rows["typed-one"] and "peer-of-two" not in rows["typed-one"]
    assert "peer-of-two" in rows["typed-two"] and "peer-of-one" not in rows["typed-two"]
    assert "flaky-pdu" in rows["peer-test"]  # a plugin with peers and no channel type
    for plugin, line in rows.items():
        if plugin not in ("typed-one", "typed-two", "peer-test"):
            assert "peer-of" not in line and "flaky-pdu" not in line, line


# -- what --keep leaves ---------------------------------------------------------------------------
def _cloud_plugin(instances: int) -> object:
    """A cloud peer whose machines keep their state in a file, as moto's server does: what
    the suite terminates stays terminated for the kept config."""

    class Plugin:
        @hookimpl
        def register_demo_peers(self, register: Callable[[Peer], None]) -> None:
            def start(where: Path) -> StartedPeer:
                machines = {f"i-{n}": "on" for n in range(instances)}
                return StartedPeer(
                    config={"type": "simulated", "machines": machines,
                            "verbs": ["reboot", "shutdown", "power-on", "terminate"],
                            "state_file": str((where / "cloud.state.json").resolve())},
                    targets=list(machines), stop=lambda: None,
                    description=f"a cloud of {instances} instances of this test")

            register(Peer("cloud-test", "cloud", start))

    return Plugin()


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "powerplane.cli", "--config", str(config),
                           *args], capture_output=True, text=True, timeout=RUN_S, check=False)


@pytest.mark.parametrize("instances", [2, 4])
def test_keep_leaves_every_node_of_the_kept_config_usable(tmp_path: Path, instances: int) -> None:
    reg = demo_registry()
    reg.add_module("cloud-test", _cloud_plugin(instances), distribution="powerplane-cloud")
    out = io.StringIO()
    code = Demo(Console(file=out, width=120), only={"cloud-test"}, keep=True,
                workdir=tmp_path, registry=reg).run()
    text = flat(out.getvalue())
    assert code == 0, text
    if instances == 2:  # every instance is the kept config's: no terminate on them
        assert "cloud-test: every instance is in the kept config; terminate is not tested" \
            in text
    else:  # two of the peer's own: terminate verified on them
        assert "terminate is not tested" not in text
    config = tmp_path / "powerplane.yaml"
    nodes = yaml.safe_load(config.read_text())["nodes"]
    run = cli(config, "state", *nodes)
    assert run.returncode == 0, run.stderr
    for node in nodes:  # each reads on: nothing the README invites you to try is gone
        assert f"{node}: on" in run.stdout, run.stdout
    # a control-plane node's reboot still leaves quorum (two of three left): the guard lets
    # it through with the hazard acknowledged, as it would before the demo ran
    plan = cli(config, "invoke", "talos-pdu", "reboot", "--dry-run", "--yes",
               "--reason", "kept demo: kernel update", "--confirm-node", "talos-pdu",
               "--hazard-reason", "kept demo: the last of the margin, on purpose")
    assert plan.returncode == 0, plan.stdout + plan.stderr


# -- Ctrl-C and SIGTERM -----------------------------------------------------------------------
SLOW_PEER = '''
"""A PDU peer of this test whose every call takes a while (a long conformance sub-run)."""
import os
from pathlib import Path

from powerplane import hookimpl
from powerplane.testing import Peer, StartedPeer


@hookimpl
def register_demo_peers(register):
    def start(where):
        machines = {f"p{n}": "on" for n in range(4)}
        return StartedPeer(
            config={"type": "simulated", "machines": machines, "graceful": False,
                    "verbs": ["reboot", "shutdown", "power-on"], "latency_ms": 150},
            targets=list(machines),
            stop=lambda: Path(os.environ["PP_DEMO_TEST_STOPPED"]).write_text("stopped"),
            description="a slow PDU of this test")

    register(Peer("slow-pdu", "pdu", start))
'''


@pytest.fixture
def slow_pdu_site(tmp_path: Path) -> Path:
    """A directory for PYTHONPATH holding an installed plugin ``slow-pdu`` (its module and
    its dist-info with the entry point), so the real ``powerplane demo`` offers the peer."""
    site = tmp_path / "site"
    info = site / "pp_slow_pdu_test-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "pp_slow_pdu_test.py").write_text(textwrap.dedent(SLOW_PEER))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pp-slow-pdu-test\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[powerplane]\nslow-pdu = pp_slow_pdu_test\n")
    return site


def interrupted_demo(tmp_path: Path, site: Path, sig: signal.Signals,
                     when: Callable[[str], bool], after_s: float = 0.0) -> tuple[int, str, str]:
    """``powerplane demo --only slow-pdu``, sent ``sig`` ``after_s`` after a line of its
    output made ``when`` true; its exit code and output once it is gone (within GONE_S)."""
    stopped = tmp_path / "stopped"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PP_DEMO_TEST_STOPPED": str(stopped), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "powerplane.cli", "demo", "--only",
                             "slow-pdu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    reached = threading.Event()
    errors: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if when(line):
                reached.set()

    def read_err() -> None:
        assert proc.stderr is not None
        errors.append(proc.stderr.read())

    readers = [threading.Thread(target=read, daemon=True),
               threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    if not reached.wait(RUN_S):
        proc.kill()
        pytest.fail("the moment never came: " + "".join(seen)[-3000:])
    time.sleep(after_s)  # into the work that follows the line, not a bound on anything
    proc.send_signal(sig)
    try:
        proc.wait(timeout=GONE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {GONE_S:g} s after {sig.name}: " + "".join(seen)[-3000:])
    for reader in readers:
        reader.join(GONE_S)
    assert stopped.read_text() == "stopped"  # the peer was stopped by its own handle
    return proc.returncode, "".join(seen), "".join(errors)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_inside_a_conformance_sub_run_stops_the_demo(
    tmp_path: Path, slow_pdu_site: Path, sig: signal.Signals
) -> None:
    # the sub-runs go slot by slot (bmc, inband, pdu, ...): once the in-band stand-in's
    # result is printed, the slow PDU's sub-run starts (its every call takes 150 ms: a
    # second later its checks are running)
    code, out, err = interrupted_demo(tmp_path, slow_pdu_site, sig,
                                      lambda line: line.lstrip().startswith("sim-inband: "),
                                      after_s=1.0)
    text = flat(out)
    assert code == 130, out + err
    assert "slow-pdu: conformance sub-run interrupted" in text
    assert ("interrupted during conformance: advertised versus verified, backend by backend: "
            "stopping peers") in text
    assert "demo interrupted" in text
    assert "demo passed" not in text and "demo failed" not in text
    assert "Traceback" not in err


@pytest.mark.slow
def test_an_interrupt_outside_a_sub_run_stops_the_demo(
    tmp_path: Path, slow_pdu_site: Path
) -> None:
    code, out, err = interrupted_demo(
        tmp_path, slow_pdu_site, signal.SIGINT,
        lambda line: "maintenance: reboot rf-node and ipmi-node" in line)
    text = flat(out)
    assert code == 130, out + err
    assert ("interrupted during maintenance: reboot rf-node and ipmi-node through the "
            "lifecycle: stopping peers") in text
    assert "demo interrupted" in text and "demo passed" not in text
    assert "conformance: advertised" not in text  # nothing after the cut step ran
    assert "Traceback" not in err
