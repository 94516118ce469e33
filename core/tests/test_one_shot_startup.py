"""A one-node command pays only for what it touches: output without Rich, plugins by need.

- :class:`powerplane.cli._common.Printer` writes a line with ``click.echo`` where Rich would
  print it as plain text; its bytes are Rich's own, for markup-like values, backslashes,
  tabs and control codes alike.
- ``state NODE`` and ``invoke NODE`` (in a fresh interpreter, stdout a pipe) import no Rich,
  no config model of a plugin the deployment does not name, none of the lifecycle's
  settings (no guard without a ``lifecycle:`` section), not the CLI's extension scanner, and
  build no validator of the whole document (a file with channels and nodes only); they print
  the same lines as before.
- The registry calls a plugin's hooks when one of its declared names (``REGISTERS``) is
  first looked up: what every in-tree plugin declares is what its hooks register, and a
  plugin whose hooks fail or disagree with its declaration is a failure of its own, with
  ``plugins``, the duplicate-name checks and the unknown-type error as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from powerplane import ChannelType, hookimpl
from powerplane.capabilities import Verb
from powerplane.cli._common import Printer
from powerplane.errors import ConfigError
from powerplane.plugins import load_plugins
from powerplane.recovery import NodeOffer, VerbOffer

# -- Printer: the plain path's bytes are Rich's --------------------------------------------

TEMPLATES: list[tuple[str, tuple[object, ...]]] = [
    ("{}: {} via {}", ("n0", "on", "bmc")),
    ("{}: {} via {} ({})", ("n0", "unknown", "bmc", "PowerState [red]Off[/red] \\ end\\")),
    ("[yellow]warning[/yellow]: the channels of {} disagree", ("n[bold]1[/bold]",)),
    ("  {}: {}: {}", ("pdu", "off (ChannelError)", "timeout after 5.0 s")),
    ("error: no reading of {}: {}", ("n2", "bmc (TimeoutError): \\[not markup]")),
    ("{} accepted for {} via channel {}; reads {}", ("reboot", "n0", "bmc", "on")),
    ("{}: {} via {}", ("ünïcode-节点", "on", "bmc 🙂")),
    ("{}: {} via {}", ("tab\there", "on", "bmc")),  # Rich expands the tab: Rich prints it
    ("{}: {} via {}", ("bell\a", "cr\r", "esc\x1b[31mred")),  # control codes: Rich prints
    ("{}: {} via {}", ("multi\nline", "on", "[/]")),
    ("{}: {} via {}", ("trailing space ", "", "\\")),
    ("requested {}: {} of {} [bold red](hazard)[/bold red]; run `powerplane maintenance run`",
     ("m-1", "shutdown", "n0")),
    ("{}: {} ({})", ("n0", "requested", "m-[1]")),
]


@pytest.mark.parametrize(("template", "values"), TEMPLATES)
def test_plain_lines_are_the_bytes_rich_prints(
    template: str, values: tuple[object, ...], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for stderr in (False, True):
        plain = Printer(stderr=stderr)
        assert plain.plain  # captured streams are not terminals
        plain.print(template, *values)
        fast = capsys.readouterr()
        rich = Printer(stderr=stderr)
        rich.plain = False  # what console().print writes
        rich.print(template, *values)
        slow = capsys.readouterr()
        assert (fast.out, fast.err) == (slow.out, slow.err)
        assert (fast.err if stderr else fast.out).endswith("\n")


def test_a_forced_terminal_goes_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not Printer().plain
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert not Printer().plain


# -- one-node commands in a fresh interpreter ----------------------------------------------

_PROBE = (
    "import sys\n"
    "from powerplane.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "else:\n"
    "    code = 0\n"
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'rich' or m in (\n"
    "    'powerplane.settings.lifecycle', 'powerplane.lifecycle.ports',\n"
    "    'powerplane_redfish.config', 'powerplane_pdu.config', 'powerplane_talos.config',\n"
    "    'powerplane_ipmi.config', 'powerplane_cloud.config', 'powerplane_kubernetes.config',\n"
    "    'powerplane.lifecycle.guard', 'powerplane.cli._extensions'))\n"
    "from powerplane.config import _Document\n"
    "if _Document.__pydantic_complete__:\n"
    "    heavy.append('_Document validator')\n"
    "print('LOADED', ' '.join(heavy), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "POWERPLANE_LOAD_PLUGINS")}
    return subprocess.run([sys.executable, "-c", _PROBE, "--config", str(config), *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.fixture
def sim_config(tmp_path: Path) -> Path:
    path = tmp_path / "pp.yaml"
    path.write_text(yaml.safe_dump({
        "channels": {"sim": {"type": "simulated", "machines": {"m0": "on", "m1": "off"}}},
        "nodes": {"n0": {"channels": [{"channel": "sim", "target": "m0"}]},
                  "n1": {"channels": [{"channel": "sim", "target": "m1"}]}},
    }))
    return path


def _loaded(res: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(x for x in res.stderr.splitlines() if x.startswith("LOADED"))
    return line.split()[1:]


@pytest.mark.perf
def test_state_of_one_node_imports_no_rich_and_no_unused_plugin_config(
    sim_config: Path,
) -> None:
    res = _run(sim_config, "state", "n0")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "n0: on via sim\n"
    assert _loaded(res) == [], "perf (one-shot startup): no rich, no unused plugin config"


@pytest.mark.perf
def test_invoke_of_one_node_imports_no_rich_and_no_unused_plugin_config(
    sim_config: Path,
) -> None:
    res = _run(sim_config, "invoke", "n1", "power-on", "--yes", "--reason", "test")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "power-on accepted for n1 via channel sim\n"
    assert _loaded(res) == [], "perf (one-shot startup): no rich, no unused plugin config"


def test_a_top_level_section_still_gets_every_problem_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("limits:\n  total: 0\nrecovery:\n  attendedRak: true\nnodes: {}\n")
    res = _run(path, "state", "n0")
    assert res.returncode == 2
    assert "limits.total (line 2): Input should be greater than or equal to 1" in res.stderr
    assert "recovery.attendedRak (line 4): unknown key; did you mean 'attendedRack'?" in (
        res.stderr)


@pytest.mark.perf
def test_an_unknown_node_is_still_exit_2_without_rich(sim_config: Path) -> None:
    res = _run(sim_config, "state", "nope")
    assert res.returncode == 2
    assert "unknown node" in res.stderr.lower() or "nope" in res.stderr
    assert _loaded(res) == [], "perf (one-shot startup): no rich, no unused plugin config"


# -- the registry: hooks by need --------------------------------------------------------------


def test_every_in_tree_declaration_is_what_its_hooks_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lazy registry, its hooks all run, equals the registry that runs them at load."""
    from powerplane import plugins

    lazy = load_plugins()
    monkeypatch.setattr(plugins, "REGISTERS", "_no_declaration_attribute")
    eager = load_plugins()
    monkeypatch.undo()
    assert lazy.plugins == eager.plugins
    assert lazy.builtins == eager.builtins
    assert lazy.failures == eager.failures
    assert lazy.owners == eager.owners and lazy.port_owners == eager.port_owners
    for kind in ("channel_types", "cluster_types", "storage_types", "store_types",
                 "secret_kinds"):
        mine, theirs = getattr(lazy, kind), getattr(eager, kind)
        assert sorted(mine) == sorted(theirs), kind
        for name in theirs:  # a plugin module builds each constant once: the same object
            assert mine[name] == theirs[name], (kind, name)


@pytest.mark.perf
def test_a_fresh_registry_imports_no_plugin_config_until_a_type_is_looked_up() -> None:
    code = (
        "import sys\n"
        "from powerplane.plugins import load_plugins\n"
        "reg = load_plugins()\n"
        "configs = lambda: sorted(m for m in sys.modules if m.endswith('.config') "
        "and m.startswith('powerplane_') or m == 'powerplane.settings.lifecycle')\n"
        "print(configs())\n"
        "t = reg.get('redfish')\n"
        "import powerplane_redfish.plugin as p\n"
        "print(configs(), t is p.REDFISH)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out == ["[]", "['powerplane_redfish.config'] True"], (
        f"perf (plugin load): a plugin's config imported on its first lookup only: {out}")


class _Cfg(BaseModel):
    pass


def _declared(name: str, registers: dict[str, tuple[str, ...]],
              hook: Callable[[Callable[[Any], None]], None]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.REGISTERS = registers  # type: ignore[attr-defined]
    module.register_channel_types = hookimpl(hook)  # type: ignore[attr-defined]
    return module


def _type(name: str) -> ChannelType:
    return ChannelType(name, _Cfg, lambda n, c: None)  # type: ignore[arg-type,return-value]


def test_a_declared_plugin_runs_its_hook_on_first_lookup_only() -> None:
    calls: list[str] = []

    def hook(register: Callable[[Any], None]) -> None:
        calls.append("hook")
        register(_type("lazy-a"))

    reg = load_plugins()
    reg.add_module("lazy", _declared("lazy_mod", {"channel": ("lazy-a",)}, hook))
    assert calls == []
    assert reg.owners["lazy-a"] == "lazy"
    first = reg.get("lazy-a")
    assert first is not None and first.name == "lazy-a"
    assert reg.get("lazy-a") is first
    assert calls == ["hook"]


def test_a_second_thread_waits_for_the_hook_the_first_one_runs() -> None:
    import threading

    entered, release = threading.Event(), threading.Event()

    def hook(register: Callable[[Any], None]) -> None:
        entered.set()
        assert release.wait(timeout=30)
        register(_type("slow-a"))

    reg = load_plugins()
    reg.add_module("slow", _declared("slow_mod", {"channel": ("slow-a",)}, hook))
    got: dict[str, object] = {}
    first = threading.Thread(target=lambda: got.__setitem__("first", reg.get("slow-a")))
    second = threading.Thread(target=lambda: got.__setitem__("second", reg.get("slow-a")))
    first.start()
    assert entered.wait(timeout=30)
    second.start()
    second.join(timeout=0.5)  # a lookup that does not wait would be done by now
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert got["first"] is not None and got["second"] is got["first"]


def test_a_declared_name_already_taken_is_a_failure_at_load_without_its_hook() -> None:
    calls: list[str] = []

    def hook(register: Callable[[Any], None]) -> None:
        calls.append("hook")

    reg = load_plugins()
    reg.add_module("dup", _declared("dup_mod", {"channel": ("simulated",)}, hook))
    errors = {f.name: f.error for f in reg.failures}
    assert errors["dup"] == ("channel type 'simulated' is already registered by plugin "
                             "'simulated'")
    assert calls == []
    assert reg.manager.get_plugin("dup") is None
    twice = _declared("twice_mod", {"channel": ("x-1", "x-1")}, hook)
    reg.add_module("twice", twice)
    assert {f.name: f.error for f in reg.failures}["twice"] == (
        "registers channel type 'x-1' more than once")


def test_a_hook_that_raises_or_disagrees_is_a_failure_and_its_types_are_unknown() -> None:
    def raising(register: Callable[[Any], None]) -> None:
        raise RuntimeError("vendor bug while registering")

    def other(register: Callable[[Any], None]) -> None:
        register(_type("other-name"))

    reg = load_plugins()
    reg.add_module("raising", _declared("raising_mod", {"channel": ("r-type",)}, raising))
    reg.add_module("liar", _declared("liar_mod", {"channel": ("l-type",)}, other))
    assert reg.get("r-type") is None
    assert "r-type" not in reg.channel_types
    errors = {f.name: f.error for f in reg.failures}  # runs the liar's hook too
    assert errors["raising"] == "RuntimeError: vendor bug while registering"
    assert errors["liar"] == ("registers channel types ['other-name'] but declares "
                              "['l-type'] in REGISTERS")
    assert {"raising", "liar"}.isdisjoint(p.name for p in reg.plugins)
    assert "l-type" not in reg.owners and "other-name" not in reg.channel_types
    with pytest.raises(ConfigError) as info:
        from powerplane import parse_config

        parse_config({"channels": {"c": {"type": "r-type"}}}, registry=reg)
    assert "unknown channel type 'r-type'" in str(info.value)
    assert "plugins that failed to load: raising, liar" in str(info.value)


def test_a_malformed_declaration_is_a_failure_of_its_plugin() -> None:
    reg = load_plugins()
    reg.add_module("bad", _declared("bad_mod", {"channels": ("x",)}, lambda register: None))
    assert {f.name: f.error for f in reg.failures}["bad"].startswith(
        "REGISTERS must map kinds (channel, cluster, storage, store, secret, policy)")


def test_plugins_json_lists_every_plugin_with_its_types() -> None:
    res = subprocess.run([sys.executable, "-m", "powerplane.cli", "plugins", "-o", "json"],
                         capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(res.stdout)
    types_of = {p["name"]: p["channel_types"] for p in data["plugins"]}
    assert types_of["redfish"] == ["redfish"]
    assert types_of["cloud"] == ["ec2", "openstack"]
    assert types_of["kubernetes"] == []
    assert types_of["metal3"] == ["metal3"]
    assert data["failures"] == []


# -- NodeOffer.as_dict ---------------------------------------------------------------------------


def test_offer_as_dict_keys_every_verb_by_its_value_in_verb_order() -> None:
    verbs = {v: VerbOffer(v, v is Verb.REBOOT, channel="c" if v is Verb.REBOOT else None,
                          graceful=True if v is Verb.REBOOT else None, reason="why")
             for v in Verb}
    out = NodeOffer("n0", "site-a", verbs).as_dict()
    assert list(out["verbs"]) == [v.value for v in Verb]
    assert out == {"node": "n0", "site": "site-a", "verbs": {
        v.value: verbs[v].as_dict() for v in Verb}}


@pytest.mark.perf
def test_a_plugin_secret_kind_is_looked_up_by_name_loading_no_other_plugin() -> None:
    """A config using ``{k8s: ...}`` runs the kubernetes plugin's hooks only: other plugins'
    configs stay unimported (looking the kind up must not build the table of every kind)."""
    pytest.importorskip("powerplane_kubernetes")
    code = (
        "import sys\n"
        "from powerplane.plugins import registry\n"
        "from powerplane.secrets import SECRET_KINDS, SecretRef\n"
        "ref = SecretRef.model_validate({'k8s': 'ns/name/key'},\n"
        "                               context={SECRET_KINDS: registry()})\n"
        "print(ref.kind, sorted(m for m in sys.modules if m.endswith('.config') "
        "and m.startswith('powerplane_') and not m.startswith('powerplane_kubernetes')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out == ["k8s []"], f"perf (plugin load): one secret kind runs one plugin: {out}"
