"""The walkthrough of ``powerplane demo``: the whole framework on loopback peers, in a minute.

Peers come from plugins through the optional hook ``register_demo_peers``: each
:class:`powerplane.testing.Peer` starts a real protocol peer (an emulator, a mock, a
simulator) in a temporary directory and returns a :class:`powerplane.testing.StartedPeer`
— the channel config to use against it, a few targets, how to stop it, and the
``conformance:`` settings the suite needs for it. The fleet has :data:`SLOTS`: one per role,
filled by the first peer of that role, and the IPMI peer's own (a second BMC, ``ipmi-node``,
beside Redfish's ``rf-node``). A slot no started peer fills is played by core's
``simulated`` channel, and the output says so.

The demo reads machines only as any user of the host does (``offers``, the lifecycle, the
host's readback); the one thing it does that no channel can is "a person at the rack
presses the power button": the peer's ``power_on_by_hand``, or for a stand-in the
simulated machine's own button (:meth:`SimulatedChannel.set_state`).

Every process a peer starts is stopped by its own handle, and the temporary
directory removed, on success, failure and Ctrl-C (unless ``--keep``). Ctrl-C (or SIGTERM)
stops the demo wherever it is, a conformance sub-run that reports the interrupt as its own
verdict included: the demo says which step was cut and exits 130, never "passed". With
``--keep`` the demo prints the process ids it leaves running and one command that stops
them all; the config it leaves keeps state across processes (the stand-ins and the
simulated cluster persist to a ``state_file``), so what a later command reads is what an
earlier one did; the conformance step never terminates a machine of that config (the suite
gets machines of its own, or runs without terminate), so every node it names is still there.

The demo passes only when it did what it says: a peer that was asked for (by default every
peer a plugin offers) and could not start fails the run, naming what is missing and the
command that installs it; an unknown ``--only`` name is bad input. Every string that comes
from a plugin, a device, a config or an exception is printed with Rich markup escaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from powerplane.errors import PowerplaneError
from powerplane.testing import Peer, StartedPeer
from powerplane_demo.fleet import (
    CONTROL_PLANE,
    SIMULATED_STANDINS,
    SLOT_BY_KEY,
    SLOTS,
    STANDIN_MACHINES,
    matrix_cells,
    slot_for,
)
from powerplane_demo.hints import install_hint, peer_distribution
from powerplane_demo.processes import descendants, process_table

if TYPE_CHECKING:
    from rich.console import Console

    from powerplane import PowerHost
    from powerplane.plugins import Registry

__all__ = ["INTERRUPTED", "Demo", "NotStarted", "StepResult", "UnknownPeer", "peer_plugins"]

INTERRUPTED = 130
"""The demo's exit status when Ctrl-C or SIGTERM stopped it."""

STOP_GRACE_S = 0.3
"""How long the peers' own stops (all at once) may take before their processes are killed:
a peer's server that answers its terminate late (moto's takes most of a second) does not
hold the demo's exit after Ctrl-C."""
REAP_S = 0.3
"""After the kill, how long a peer's own stop may still take to reap its processes."""

def _esc(text: object) -> str:
    """Rich markup escaped: plugin, device, config and exception text is never markup."""
    from powerplane.cli.kit import esc

    return esc(text)


class UnknownPeer(PowerplaneError):
    """``--only`` names a peer no installed plugin offers (bad input, exit 2)."""

    exit_code = 2

    def __init__(self, unknown: list[str], known: list[str]) -> None:
        self.unknown = unknown
        self.known = known
        valid = ", ".join(known) if known else "none (no installed plugin offers a demo peer)"
        what = (f"unknown demo peer(s) in --only: {', '.join(repr(u) for u in unknown)}"
                if unknown else "--only names no peer")
        super().__init__(f"{what}; the peers are: {valid}")


@dataclass
class StepResult:
    name: str
    ok: bool
    seconds: float
    note: str = ""


@dataclass
class NotStarted:
    """A peer that was asked for and could not start: why, what is missing, the fix."""

    name: str
    error: str
    missing: str | None = None
    command: str | None = None


@dataclass
class Demo:
    """The walkthrough. ``run()`` returns the exit status: 0 only if every step succeeded
    and every peer asked for started; raises :class:`UnknownPeer` for a bad ``only``."""

    console: Console
    only: set[str] | None = None
    keep: bool = False
    workdir: Path | None = None
    registry: Registry | None = None
    started: dict[str, tuple[str, StartedPeer]] = field(default_factory=dict)
    """Per slot key: the peer that fills it and what its start returned."""
    results: list[StepResult] = field(default_factory=list)
    not_started: list[NotStarted] = field(default_factory=list)
    cut: str | None = None
    """The step an interrupt (Ctrl-C, SIGTERM) stopped, once one did."""
    used: dict[str, list[Any]] = field(default_factory=dict)
    """Per slot key, the targets the deployment the demo writes uses."""
    _sim_hand: Any = None

    # -- scaffolding --------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[StepResult]:
        from rich.rule import Rule

        # a rule as wide as the terminal, and never 10,000 columns into a pipe
        self.console.print(Rule(f"[bold]{len(self.results) + 1}. {_esc(title)}"),
                           width=min(self.console.width, 100))
        res = StepResult(title, True, 0.0)
        t0 = time.perf_counter()
        try:
            yield res
        except Exception as exc:
            res.ok = False
            res.note = f"{type(exc).__name__}: {exc}"
            self.console.print(f"[red]step failed:[/red] {_esc(res.note)}")
        except (KeyboardInterrupt, asyncio.CancelledError):
            # Ctrl-C: raised as it is in sync steps, a cancellation inside the walk's loop
            res.ok = False
            res.note = "interrupted"
            self.cut = self.cut or title
            raise
        finally:
            res.seconds = time.perf_counter() - t0
            self.results.append(res)

    def check_only(self, reg: Registry) -> None:
        """Raise :class:`UnknownPeer` when ``only`` names a peer no plugin offers."""
        if self.only is None:
            return
        known = sorted(reg.demo_peers)
        unknown = sorted(n for n in self.only if n not in reg.demo_peers)
        if unknown or not self.only:
            raise UnknownPeer(unknown, known)

    def run(self) -> int:
        from rich.rule import Rule

        from powerplane.plugins import registry as load

        reg = self.registry or load()
        self.registry = reg
        self.check_only(reg)
        own_dir = self.workdir is None
        self.workdir = self.workdir or Path(tempfile.mkdtemp(prefix="powerplane-demo-"))
        t0 = time.perf_counter()
        interrupted = False
        try:
            self.show_plugins(reg)
            self.start_peers(reg)
            config_path = self.write_config()
            asyncio.run(self.walk(config_path))
            self.conformance()
        except KeyboardInterrupt:
            interrupted = True
            what = "leaving peers running" if self.keep else "stopping peers"
            where = f" during {_esc(self.cut)}" if self.cut else ""
            self.console.print(f"[yellow]interrupted{where}: {what}[/yellow]")
            if self.cut is None:
                self.results.append(StepResult("interrupted", False, 0.0, "between steps"))
        except Exception as exc:  # outside any step: the run stops, it does not pass
            note = f"{type(exc).__name__}: {exc}"
            self.console.print(f"[red]demo stopped:[/red] {_esc(note)}")
            self.results.append(StepResult("walkthrough", False, 0.0, note))
        finally:
            if not self.keep:
                self.stop_peers()
                if own_dir and self.workdir is not None:
                    shutil.rmtree(self.workdir, ignore_errors=True)
        wall = time.perf_counter() - t0
        failed = [r for r in self.results if not r.ok]
        self.console.print(Rule("[bold]summary"), width=min(self.console.width, 100))
        for r in self.results:
            mark = "[green]ok[/green]" if r.ok else "[red]FAILED[/red]"
            note = f" - {_esc(r.note)}" if r.note else ""
            self.console.print(f"  {mark}  {_esc(r.name)} ({r.seconds:.1f} s){note}")
        verdict = ("[yellow]demo interrupted[/yellow]" if interrupted else
                   "[green]demo passed[/green]" if not failed else "[red]demo failed[/red]")
        self.console.print(f"{verdict} in {wall:.1f} s")
        for ns in self.not_started:
            self.console.print(f"[red]not started[/red]: {_esc(ns.name)}: {_esc(ns.error)}")
            if ns.missing:
                self.console.print(f"  missing: {_esc(ns.missing)}")
            if ns.command:
                self.console.print(f"  install it with: {_esc(ns.command)}")
        if self.keep:
            self.print_keep()
        if interrupted:
            return INTERRUPTED
        return 0 if not failed else 1

    # -- steps --------------------------------------------------------------------------------
    def show_plugins(self, reg: Registry) -> None:
        from rich.table import Table

        with self.step("plugins: what was discovered"):
            table = Table(show_header=True)
            for col in ("plugin", "distribution", "version", "channel types", "demo peers"):
                table.add_column(col)
            owners = peer_plugins(reg)
            for p in reg.plugins:
                peers = [n for n in reg.demo_peers if owners.get(n) == p.name]
                table.add_row(_esc(p.name), _esc(p.distribution), _esc(p.version),
                              _esc(", ".join(p.channel_types)), _esc(", ".join(peers)))
            self.console.print(table)
            for f in reg.failures:
                self.console.print(f"  [red]failed[/red] {_esc(f.name)}: {_esc(f.error)}")

    def start_peers(self, reg: Registry) -> None:
        assert self.workdir is not None
        with self.step("peers: starting real protocol peers on loopback") as res:
            wanted = [p for p in reg.demo_peers.values()
                      if self.only is None or p.name in self.only]
            for peer in wanted:
                slot = slot_for(peer, self.started)
                if slot is None:
                    played = ", ".join(self.started[s.key][0] for s in SLOTS
                                       if s.role == peer.role and s.key in self.started)
                    self.console.print(f"  [dim]{_esc(peer.name)}: the {peer.role} role is "
                                       f"already played by {_esc(played)}[/dim]")
                    continue
                t0 = time.perf_counter()
                where = self.workdir / peer.name
                where.mkdir(parents=True, exist_ok=True)
                before = descendants({os.getpid()})
                try:
                    chan = peer.start(where)
                except Exception as exc:
                    self._not_started(reg, peer, exc)
                    self._log_tails(where)
                    continue
                if not chan.pids:
                    chan.pids = sorted(descendants({os.getpid()}) - before)
                self.started[slot.key] = (peer.name, chan)
                self.console.print(f"  [green]started[/green] {_esc(peer.name)} "
                                   f"({time.perf_counter() - t0:.1f} s): "
                                   f"{_esc(chan.description)}")
            for s in SLOTS:
                if s.key not in self.started:
                    self.console.print(f"  [dim]{s.key}: no peer started; core's simulated "
                                       "channel stands in[/dim]")
            res.note = f"{len(self.started)} real peer(s)"
            if self.not_started:
                res.ok = False
                res.note += "; not started: " + ", ".join(n.name for n in self.not_started)

    def _not_started(self, reg: Registry, peer: Peer, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        ns = NotStarted(peer.name, error)
        try:
            hint = install_hint(exc, peer_distribution(reg, peer))
        except Exception:  # naming the fix must never hide the failure itself
            hint = None
        if hint is not None:
            ns.missing, ns.command = hint
        self.not_started.append(ns)
        self.console.print(f"  [red]not started[/red] {_esc(peer.name)}: could not start "
                           f"({_esc(error)})")
        if ns.missing:
            self.console.print(f"    missing: {_esc(ns.missing)}")
        if ns.command:
            self.console.print(f"    install it with: {_esc(ns.command)}")

    def _log_tails(self, where: Path, lines: int = 5) -> None:
        """The end of each log a failed peer wrote: its directory goes at the end of the run
        (unless ``--keep``), so a "see <log>" in its error would point nowhere."""
        for log in sorted(where.glob("*.log")):
            try:
                tail = log.read_text(errors="replace").strip().splitlines()[-lines:]
            except OSError:
                continue
            if not tail:
                continue
            kept = "" if self.keep else " (removed when the demo ends)"
            self.console.print(f"    {_esc(log.name)}{kept} ends with:")
            for line in tail:
                self.console.print(f"      {_esc(line[:300])}")

    def _standin_state(self, name: str) -> str:
        assert self.workdir is not None
        return str((self.workdir / f"{name}.state.json").resolve())

    def _channel(self, key: str) -> tuple[str, dict[str, Any], list[Any]]:
        if key in self.started:
            name, chan = self.started[key]
            return name, chan.config, chan.targets
        name = f"sim-{key}"
        cfg = dict(SIMULATED_STANDINS[SLOT_BY_KEY[key].role])
        cfg["machines"] = {f"{key}-m{i}": "on" for i in range(STANDIN_MACHINES)}
        # a config the demo writes for people keeps state across processes: what
        # `invoke` did, the next `state` reads
        cfg["state_file"] = self._standin_state(name)
        return name, cfg, list(cfg["machines"])

    def write_config(self) -> Path:
        assert self.workdir is not None
        bmc, bmc_cfg, bmc_t = self._channel("bmc")
        inb, inb_cfg, inb_t = self._channel("inband")
        pdu, pdu_cfg, pdu_t = self._channel("pdu")
        cloud, cloud_cfg, cloud_t = self._channel("cloud")
        ipmi, ipmi_cfg, ipmi_t = self._channel("ipmi")
        doc: dict[str, Any] = {
            "channels": {bmc: bmc_cfg, inb: inb_cfg, pdu: pdu_cfg, cloud: cloud_cfg,
                         ipmi: ipmi_cfg},
            "nodes": {
                "rf-node": {"site": "plant-a", "labels": {}, "channels": [
                    {"channel": bmc, "target": bmc_t[0]}]},
                "ipmi-node": {"site": "plant-a", "channels": [
                    {"channel": ipmi, "target": ipmi_t[0]}]},
                "talos-only": {"site": "plant-a", "channels": [
                    {"channel": inb, "target": inb_t[0]}]},
                "talos-attended": {"site": "plant-b", "channels": [
                    {"channel": inb, "target": inb_t[1]}]},
                "talos-pdu": {"site": "plant-a", "channels": [
                    {"channel": inb, "target": inb_t[2 % len(inb_t)]},
                    {"channel": pdu, "target": pdu_t[0]}]},
                "ec2-replaceable": {"site": "cloud", "classification": "replaceable",
                                    "channels": [{"channel": cloud, "target": cloud_t[0]}]},
                "ec2-repairable": {"site": "cloud", "channels": [
                    {"channel": cloud, "target": cloud_t[1]}]},
            },
            "recovery": {"attendedRack": False, "sites": {"plant-b": {"attended": True}}},
            "limits": {"per_endpoint": 4, "total": 64, "timeout_s": 30},
            "lifecycle": {
                "store": "powerplane.db",
                "cluster": {
                    "type": "simulated",
                    "pods": {"rf-node": ["web-7f9c", "cache-0"],
                             "ipmi-node": ["queue-1"],
                             "talos-attended": ["batch-2"]},
                    "pdbs": {"cache": {"pods": ["cache-0"], "allowed_disruptions": 1}},
                    "eviction_ticks": 1,
                    "labels": {n: {CONTROL_PLANE: ""} for n in
                               ("talos-only", "talos-pdu", "ec2-repairable")},
                    "state_file": str((self.workdir / "cluster.state.json").resolve()),
                },
                "tick_s": 0.2,
                "ready_timeout_s": 60,
                "readback_window_s": 20,
                "readback_cadence_s": 0.3,
            },
        }
        self.used = {}
        keys = {bmc: "bmc", inb: "inband", pdu: "pdu", cloud: "cloud", ipmi: "ipmi"}
        for node in doc["nodes"].values():
            for ref in node["channels"]:
                self.used.setdefault(keys[ref["channel"]], []).append(ref["target"])
        path = self.workdir / "powerplane.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    async def walk(self, config_path: Path) -> None:
        from powerplane import open_deployment

        # the one runtime: the deployment's policy and audit, the lifecycle's guard
        async with open_deployment(config_path, registry=self.registry) as runtime:
            host = runtime.host
            self.show_offers(host)
            await self.maintenance_reboot(host)
            await self.shutdown_and_return(host)

    def show_offers(self, host: PowerHost) -> None:
        from rich.table import Table

        with self.step("offers: what the recoverability rule allows, and why"):
            table = Table(show_header=True)
            for col in ("node", "site", "reboot", "shutdown", "power-on", "terminate"):
                table.add_column(col, overflow="fold")
            notes: list[str] = []
            for offer in host.offers():
                cells = []
                for verb in offer.verbs.values():
                    if verb.offered:
                        mode = "graceful" if verb.graceful else "hard"
                        cells.append(f"[green]{_esc(verb.channel)}[/green] ({mode})")
                        if verb.recovery:
                            notes.append(f"{offer.node}: {verb.verb} recoverable: "
                                         f"{verb.recovery}")
                    else:
                        cells.append("[red]withheld[/red]")
                        if verb.verb.value in ("shutdown", "terminate") and (
                            "does not advertise" not in verb.reason
                        ):
                            notes.append(f"{offer.node}: {verb.reason}")
                table.add_row(_esc(offer.node), _esc(offer.site or ""), *cells)
            self.console.print(table)
            for note in notes:
                self.console.print(f"  {_esc(note)}")

    async def _drive(self, life: Any, names: dict[str, str], until: Callable[[Any], bool],
                     timeout: float = 60.0) -> dict[str, Any]:
        """Reconcile until ``until(m)`` holds for every named maintenance, printing each
        phase transition as it happens."""
        from rich.status import Status

        seen = {n: len(life.store.get(n).status.history) for n in names.values()}
        t0 = time.perf_counter()
        current: dict[str, Any] = {}
        with Status("reconciling", console=self.console) as status:
            while True:
                await life.run_pass()
                for node, name in names.items():
                    m = life.store.get(name)
                    current[node] = m
                    for t in m.status.history[seen[name]:]:
                        why = f" [dim]({_esc(t.why)})[/dim]" if t.why else ""
                        self.console.print(
                            f"  {time.perf_counter() - t0:5.1f} s  {_esc(node)}: "
                            f"[bold]{_esc(t.to.value)}[/bold]{why}")
                    seen[name] = len(m.status.history)
                if all(until(m) for m in current.values()):
                    return current
                if time.perf_counter() - t0 > timeout:
                    phases = ", ".join(f"{n}: {m.phase.value}" for n, m in current.items())
                    raise RuntimeError(f"did not settle within {timeout:g} s ({phases})")
                status.update(_esc(", ".join(f"{n}: {m.phase.value}"
                                             for n, m in current.items())))
                await asyncio.sleep(life.config.tick_s)

    async def maintenance_reboot(self, host: PowerHost) -> None:
        from powerplane.lifecycle import Ceremony, Lifecycle, Phase

        nodes = ("rf-node", "ipmi-node")
        with self.step("maintenance: reboot rf-node and ipmi-node through the lifecycle") as res:
            life = Lifecycle.for_host(host)
            try:
                names = {}
                for node in nodes:
                    m = await life.request(node, "reboot", Ceremony(
                        reason="demo: kernel 6.12 security update", confirm_node=node,
                        ack_preflight=True))
                    names[node] = m.name
                    pre = m.spec.preflight
                    self.console.print(f"  requested {_esc(m.name)}: pods "
                                       f"{_esc(', '.join(pre.pods))}; power "
                                       f"{_esc(pre.power.get('verb'))} via "
                                       f"{_esc(pre.power.get('channel'))}")
                done = await self._drive(life, names, lambda m: m.phase is Phase.COMPLETE)
                # what the host reads after the reboot, as any user would (`state ipmi-node`)
                reading = await host.read_power_state("ipmi-node")
                detail = f", {reading.detail}" if reading.detail else ""
                self.console.print(f"  ipmi-node: after the reboot the host reads it "
                                   f"{_esc(reading.state.value)} (via "
                                   f"{_esc(reading.channel or 'no channel')}{_esc(detail)})")
                if reading.state.value != "on":
                    raise RuntimeError(f"ipmi-node reads {reading.state.value} after its "
                                       "reboot, not on")
                res.note = ", ".join(f"{n}: {m.phase.value}, {len(m.status.dispatches)} "
                                     "dispatch" for n, m in done.items())
            finally:
                life.close()

    async def shutdown_and_return(self, host: PowerHost) -> None:
        from powerplane.lifecycle import Ceremony, Lifecycle, Phase

        with self.step("maintenance: shutdown with PowerOffConfirmed, then return") as res:
            life = Lifecycle.for_host(host)
            try:
                names = {}
                for node in ("rf-node", "ipmi-node", "talos-attended"):
                    m = await life.request(node, "shutdown", Ceremony(
                        reason="demo: PSU replacement", confirm_node=node,
                        ack_preflight=True))
                    names[node] = m.name

                def settled(m: Any) -> bool:
                    cond = m.condition("PowerOffConfirmed")
                    return m.phase is Phase.POWERED_OFF and cond is not None and (
                        cond.status != "False")

                parked = await self._drive(life, names, settled)
                for node, m in parked.items():
                    cond = m.condition("PowerOffConfirmed")
                    color = {"True": "green", "Unknown": "yellow"}.get(cond.status, "red")
                    self.console.print(f"  {_esc(node)}: PowerOffConfirmed=[{color}]"
                                       f"{_esc(cond.status)}[/{color}] ({_esc(cond.message)})")
                for node in ("rf-node", "ipmi-node"):
                    if parked[node].condition("PowerOffConfirmed").status != "True":
                        raise RuntimeError(f"the BMC node {node} was not observed off")
                if parked["talos-attended"].condition("PowerOffConfirmed").status != "Unknown":
                    raise RuntimeError("the in-band node must stay Unknown: it cannot see off")
                back = Ceremony(reason="demo: PSU replaced, back to service")
                for node in ("rf-node", "ipmi-node"):
                    await life.return_to_service(node, back)
                    self.console.print(f"  {node}: return requested (power-on through the "
                                       "host)")
                reads = await self._by_hand("inband", host, "talos-attended")
                await life.return_to_service("talos-attended", back, machine_on=True)
                self.console.print("  talos-attended: a person powered it on at the rack and "
                                   f"confirmed it (the host reads it {_esc(reads)}); return "
                                   "requested")
                await self._drive(life, names, lambda m: m.phase is Phase.COMPLETE)
                res.note = "True on both BMCs, Unknown in-band, all Complete"
            finally:
                life.close()

    def _conformance_channel(self, key: str) -> tuple[str, dict[str, Any], list[Any]]:
        """The channel the suite runs against: the real peer, or the stand-in on machines
        of its own (the suite powers machines off and on; the deployment's keep their
        state) without the walkthrough's pacing delay and state file."""
        name, cfg, targets = self._channel(key)
        if key in self.started:
            return name, cfg, targets
        cfg = {k: v for k, v in cfg.items() if k not in ("state_file", "transition_ms")}
        return name, cfg, targets[-2:]

    def _by_hand_for(
        self, key: str, cfg: dict[str, Any]
    ) -> tuple[dict[str, Any], Callable[[str, Any], None] | None]:
        """The channel config the suite runs against on ``key``, and the power button of
        its machines for a person at the rack (None: the channel powers on by itself, or
        there is no button). With a button the target is ``attended``: the suite asks for
        a press when it needs a machine on that the channel cannot power on, then reads
        the machine back. A peer's button is its own; a stand-in that cannot power on gets
        a state file of its own for the suite's machines (not the deployment's), which
        its button writes."""
        if key in self.started:
            press = self.started[key][1].power_on_by_hand
            return cfg, ((lambda node, target: press(target)) if press is not None else None)
        if "power-on" in cfg.get("verbs", []) or self.workdir is None:
            return cfg, None
        from powerplane.sim.channel import SimulatedChannel, SimulatedConfig

        cfg = {**cfg, "state_file": str((self.workdir / f"conformance-{key}.state.json")
                                        .resolve())}
        rack = SimulatedChannel("rack", SimulatedConfig.model_validate(
            {k: v for k, v in cfg.items() if k != "type"}))
        return cfg, lambda node, target: rack.set_state(str(target), "on")

    def conformance(self) -> None:
        """Run the conformance suite against each backend; print advertised vs verified."""
        import io

        from powerplane_conformance.api import run_suite

        with self.step("conformance: advertised versus verified, backend by backend") as res:
            rows: list[tuple[str, dict[str, str], str]] = []
            for slot in SLOTS:
                name, cfg, targets = self._conformance_channel(slot.key)
                cfg, by_hand = self._by_hand_for(slot.key, cfg)
                extra = (self.started[slot.key][1].conformance if slot.key in self.started
                         else {})
                if by_hand is not None:
                    extra = {**extra, "attended": True}
                picked = targets[-2:] if len(targets) >= 2 else targets
                if slot.role == "cloud":
                    picked, allowed = self._terminable(slot.key, name, targets)
                    if allowed:
                        extra = {**extra, "allow_terminate": True}
                nodes = {f"{name}-{i}": {"channels": [{"channel": name, "target": t}]}
                         for i, t in enumerate(picked)}
                target = {
                    "channels": {name: cfg},
                    "nodes": nodes,
                    "conformance": {"nodes": list(nodes), "allow_destructive": True,
                                    "settle_timeout_s": 20, "repeat": 2, **extra},
                }
                log = io.StringIO()
                t0 = time.perf_counter()
                with contextlib.redirect_stderr(log), _noticed_interrupt() as noticed:
                    summary = run_suite(target, power_on_by_hand=by_hand)
                data = summary.data
                if noticed or data.get("verdict") == "interrupted" or summary.exit_code == 130:
                    # the suite reports an interrupt as its own verdict; the demo stops
                    self.console.print(f"  {_esc(name)}: conformance sub-run interrupted")
                    raise KeyboardInterrupt
                rows.append((name, matrix_cells(data), str(data["verdict"])))
                c = data["counts"]
                self.console.print(
                    f"  {_esc(name)}: {_esc(data['verdict'])} ({c['pass']} pass, "
                    f"{c['fail']} fail, {c['skip']} skip, {c['not_tested']} not tested, "
                    f"{c['xfail']} xfail) in {time.perf_counter() - t0:.1f} s")
                for r in data["results"]:
                    if r["outcome"] == "fail":
                        self.console.print(f"    [red]FAIL[/red] {_esc(r['id'])}: "
                                           f"{_esc(r['message'])}")
            from rich.table import Table

            table = Table(title="advertised (graceful/hard) and verified: ok, FAIL, ? not "
                          "verified, - not advertised (and refused)", title_justify="left")
            table.add_column("backend")
            for verb in ("reboot", "shutdown", "power-on", "terminate"):
                table.add_column(verb)
            table.add_column("verdict")
            shown = {"pass": "[green]pass[/green]", "incomplete": "[yellow]incomplete[/yellow]"}
            for name, cells, verdict in rows:
                table.add_row(_esc(name), *(cells[v] for v in
                                            ("reboot", "shutdown", "power-on", "terminate")),
                              shown.get(verdict, f"[red]{_esc(verdict)}[/red]"))
            self.console.print(table)
            failed = [n for n, _, v in rows if v not in ("pass", "incomplete")]
            unproven = [n for n, _, v in rows if v == "incomplete"]
            verdict = ("yes" if not failed and not unproven else
                       f"no ({', '.join(failed)} failed)" if failed else
                       f"not verified ({', '.join(unproven)} incomplete)")
            self.console.print(f"conformant for every advertised verb: {_esc(verdict)}")
            if failed:
                raise RuntimeError(f"conformance failed for {', '.join(failed)}")
            res.note = (f"{len(rows) - len(unproven)} of {len(rows)} backend(s) conformant"
                        + (f"; {', '.join(unproven)} not fully verified" if unproven else ""))

    def _terminable(self, key: str, name: str, targets: list[Any]) -> tuple[list[Any], bool]:
        """The cloud machines the suite runs on, and whether it may terminate them: machines
        the deployment does not use where the peer has some; else, without ``--keep``, the
        deployment's (no step after the suite uses them); else, with ``--keep``, the
        deployment's without terminate (the kept config must keep every node it names)."""
        if key not in self.started:
            return targets[-2:], True  # the stand-in's own last two (no state file)
        own = [t for t in targets if t not in self.used.get(key, [])]
        if own:
            return own[-2:], True
        if not self.keep:
            return targets[-2:], True
        self.console.print(f"  [dim]{_esc(name)}: every instance is in the kept config; "
                           "terminate is not tested (--keep)[/dim]")
        return targets[-2:], False

    async def _by_hand(self, key: str, host: PowerHost, node: str) -> str:
        """A person at the rack presses ``node``'s power button; then the host reads the
        node back as any user would. Returns what that readback says (``on``, ``off``,
        ``unknown``): the demo never reports more than it read."""
        from powerplane.sim.channel import SimulatedChannel

        ref = host.nodes[node].channels[0]
        if key in self.started:
            name, peer = self.started[key]
            if peer.power_on_by_hand is None:
                raise RuntimeError(f"peer {name!r} offers no power button to press by hand "
                                   "(StartedPeer.power_on_by_hand)")
            peer.power_on_by_hand(ref.target)
        else:
            chan = host.channel(ref.channel)
            if not isinstance(chan, SimulatedChannel):
                raise RuntimeError(f"channel {ref.channel!r} is not a simulated stand-in: "
                                   "no power button to press by hand")
            chan.set_state(ref.target, "on")
        reading = await host.read_power_state(node)
        return reading.state.value

    def stop_peers(self) -> None:
        """Stop every started peer by its own handle, all at once; a peer not gone within
        :data:`STOP_GRACE_S` has its processes (and their children) killed, and is waited
        for :data:`REAP_S` more (its own stop then reaps them)."""
        failures: list[tuple[str, Exception]] = []

        def stop(name: str, chan: StartedPeer) -> None:
            try:
                chan.stop()
            except Exception as exc:
                failures.append((name, exc))

        stoppers = [(name, chan, threading.Thread(target=stop, args=(name, chan),
                                                  daemon=True, name=f"stop-{name}"))
                    for name, chan in self.started.values()]
        for _, _, thread in stoppers:
            thread.start()
        deadline = time.monotonic() + STOP_GRACE_S
        for _, _, thread in stoppers:
            thread.join(max(0.0, deadline - time.monotonic()))
        late = [(name, chan, thread) for name, chan, thread in stoppers if thread.is_alive()]
        if late:
            table = process_table()
            for _, chan, _ in late:
                live = {p for p in chan.pids if p in table and table[p][1] != "Z"}
                for pid in sorted(live | descendants(live, table)):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + REAP_S
            for _, _, thread in late:
                thread.join(max(0.0, deadline - time.monotonic()))
        for name, exc in failures:
            self.console.print(f"[red]could not stop {_esc(name)}:[/red] {_esc(exc)}")
        for name, _, thread in late:
            if thread.is_alive():
                self.console.print(f"[red]could not stop {_esc(name)}[/red] within "
                                   f"{STOP_GRACE_S + REAP_S:g} s, its processes killed")
        self.started.clear()

    def kept_pids(self) -> dict[str, list[int]]:
        """Per started peer, the processes of it still running (and their children)."""
        table = process_table()
        kept: dict[str, list[int]] = {}
        for name, chan in self.started.values():
            live = {p for p in chan.pids if p in table and table[p][1] != "Z"}
            kept[name] = sorted(live | descendants(live, table))
        return kept

    def print_keep(self) -> None:
        assert self.workdir is not None
        cfg = self.workdir / "powerplane.yaml"
        q = shlex.quote
        kept = self.kept_pids()
        pids = sorted({p for ps in kept.values() for p in ps})
        say = self.console.print
        say(f"[bold]peers left running[/bold]; config: {_esc(cfg)}")
        for name, ps in kept.items():
            what = ", ".join(str(p) for p in ps) if ps else "no process of its own found"
            say(f"  {_esc(name)}: pid {what}")
        standins = [f"sim-{s.key}" for s in SLOTS if s.key not in self.started]
        kept_by = "the simulated cluster" + (
            f" and the stand-ins ({', '.join(standins)})" if standins else "")
        say(f"  {kept_by} keep their state in {_esc(self.workdir)} (state_file): each "
            "command reads what the last one did")
        say(f"  powerplane --config {_esc(q(str(cfg)))} offers")
        say(f"  powerplane --config {_esc(q(str(cfg)))} state rf-node")
        say(f"  powerplane --config {_esc(q(str(cfg)))} invoke rf-node reboot --reason "
            "'kept demo: test reboot'")
        if pids:
            say(f"stop them all: kill {' '.join(str(p) for p in pids)}")
        else:
            say("stop them all: nothing to stop (no peer process is running)")
        say(f"then remove the directory: rm -rf {_esc(q(str(self.workdir)))}")


def peer_plugins(reg: Registry) -> dict[str, str]:
    """Per demo peer name, the plugin that registered it (the first of a name, as
    :attr:`Registry.demo_peers` keeps it)."""
    owners: dict[str, str] = {}
    order = {p.name: i for i, p in enumerate(reg.plugins)}
    impls = reg.manager.hook.register_demo_peers.get_hookimpls()
    for impl in sorted(impls, key=lambda i: order.get(i.plugin_name, -1)):
        found: list[Peer] = []
        try:
            impl.function(register=found.append)
        except Exception:  # Registry.demo_peers reports it as the plugin's failure
            continue
        for peer in found:
            owners.setdefault(peer.name, impl.plugin_name)
    return owners


@contextlib.contextmanager
def _noticed_interrupt() -> Iterator[list[bool]]:
    """Notice Ctrl-C (and SIGTERM, which the CLI turns into it) while a callee that catches
    KeyboardInterrupt itself runs: the list holds True once one came. The interrupt still
    goes where it went (the previous handler runs)."""
    noticed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield noticed
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        noticed.append(True)
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield noticed
    finally:
        signal.signal(signal.SIGINT, previous)
