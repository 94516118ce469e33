"""``powerplane demo``: the whole framework on loopback peers, in a minute.

Peers come from plugins through the optional hook ``register_demo_peers``: each
:class:`DemoPeer` starts a real protocol peer (an emulator, a mock, a simulator) in a
temporary directory and returns a :class:`DemoChannel` — the channel config to use
against it, a few targets, and how to stop it. A role the installed plugins cannot
fill is played by core's ``simulated`` channel, and the output says so.

Every process a peer starts is stopped by its own handle, and the temporary
directory removed, on success, failure and Ctrl-C (unless ``--keep``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

if TYPE_CHECKING:
    from rich.console import Console

    from powerplane.host import PowerHost
    from powerplane.plugins import Registry

__all__ = ["Demo", "DemoChannel", "DemoPeer"]

Role = Literal["bmc", "inband", "pdu", "cloud"]
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
ROLES: tuple[Role, ...] = ("bmc", "inband", "pdu", "cloud")


@dataclass
class DemoChannel:
    """A started peer: the channel config that reaches it, its targets, how to stop it."""

    config: dict[str, Any]
    """The channel's config, ``type`` included; secrets as references to files it wrote."""
    targets: list[Any]
    """At least two targets (systems, node addresses, outlet sets, instance ids)."""
    stop: Callable[[], None]
    """Stops every process the peer started, by its own handle."""
    description: str
    """One line for people: what runs where."""
    power_on_by_hand: Callable[[Any], None] | None = None
    """For channels that cannot power on: a person at the rack presses the button."""
    conformance: dict[str, Any] = field(default_factory=dict)
    """Extra keys for the conformance section (declared defects as ``xfail``, ``negative``)."""


@dataclass(frozen=True)
class DemoPeer:
    """A real protocol peer a plugin can start on loopback for the demo."""

    name: str
    """Short name used by ``--only`` (``redfish``, ``talos``, ``pdu``, ``ec2``)."""
    role: Role
    """What it plays in the walkthrough: a BMC, an in-band OS API, a PDU, a cloud."""
    start: Callable[[Path], DemoChannel]
    """Start the peer in this directory (blocking, may take seconds); raise on failure."""


SIMULATED_STANDINS: dict[Role, dict[str, Any]] = {
    "bmc": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
            "transition_ms": 200},
    "inband": {"type": "simulated", "verbs": ["reboot", "shutdown"], "readback": "on-only",
               "transition_ms": 200},
    "pdu": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on"],
            "graceful": False},
    "cloud": {"type": "simulated", "verbs": ["reboot", "shutdown", "power-on", "terminate"]},
}


def _matrix(data: dict[str, Any]) -> dict[str, str]:
    """Per verb: advertised (graceful/hard) and verified by the suite, or not advertised."""
    advertised: dict[str, str] = {}
    for chan in data.get("channels", []):
        for caps in chan.get("capabilities", {}).values():
            verbs = caps.get("verbs", {}) if isinstance(caps, dict) else {}
            advertised.update(verbs)
    cells = {}
    for verb in ("reboot", "shutdown", "power-on", "terminate"):
        outcomes = [r["outcome"] for r in data.get("results", []) if r.get("verb") == verb]
        if verb not in advertised:
            lied = "fail" in outcomes
            cells[verb] = "[red]- but acted[/red]" if lied else "[dim]-[/dim]"
        elif "fail" in outcomes:
            cells[verb] = f"{advertised[verb]} [red]FAIL[/red]"
        elif "pass" in outcomes:
            cells[verb] = f"{advertised[verb]} [green]ok[/green]"
        else:
            cells[verb] = f"{advertised[verb]} [yellow]?[/yellow]"
    return cells


@dataclass
class StepResult:
    name: str
    ok: bool
    seconds: float
    note: str = ""


@dataclass
class Demo:
    """The walkthrough. ``run()`` returns the exit status: 0 only if every step succeeded."""

    console: Console
    only: set[str] | None = None
    keep: bool = False
    workdir: Path | None = None
    registry: Registry | None = None
    started: dict[Role, tuple[str, DemoChannel]] = field(default_factory=dict)
    results: list[StepResult] = field(default_factory=list)
    _sim_hand: Any = None

    # -- scaffolding --------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[StepResult]:
        self.console.rule(f"[bold]{len(self.results) + 1}. {title}")
        res = StepResult(title, True, 0.0)
        t0 = time.perf_counter()
        try:
            yield res
        except Exception as exc:
            res.ok = False
            res.note = f"{type(exc).__name__}: {exc}"
            self.console.print(f"[red]step failed:[/red] {res.note}")
        finally:
            res.seconds = time.perf_counter() - t0
            self.results.append(res)

    def run(self) -> int:
        from powerplane.plugins import registry as load

        reg = self.registry or load()
        self.registry = reg
        own_dir = self.workdir is None
        self.workdir = self.workdir or Path(tempfile.mkdtemp(prefix="powerplane-demo-"))
        t0 = time.perf_counter()
        try:
            self.show_plugins(reg)
            self.start_peers(reg)
            config_path = self.write_config()
            asyncio.run(self.walk(config_path))
            self.conformance()
        except KeyboardInterrupt:
            self.console.print("[yellow]interrupted: stopping peers[/yellow]")
            self.results.append(StepResult("interrupted", False, 0.0))
        finally:
            if self.keep:
                self.print_keep()
            else:
                self.stop_peers()
                if own_dir and self.workdir is not None:
                    shutil.rmtree(self.workdir, ignore_errors=True)
        wall = time.perf_counter() - t0
        failed = [r for r in self.results if not r.ok]
        self.console.rule("[bold]summary")
        for r in self.results:
            mark = "[green]ok[/green]" if r.ok else "[red]FAILED[/red]"
            note = f" - {r.note}" if r.note else ""
            self.console.print(f"  {mark}  {r.name} ({r.seconds:.1f} s){note}")
        verdict = "[green]demo passed[/green]" if not failed else "[red]demo failed[/red]"
        self.console.print(f"{verdict} in {wall:.1f} s")
        return 0 if not failed else 1

    # -- steps --------------------------------------------------------------------------------
    def show_plugins(self, reg: Registry) -> None:
        from rich.table import Table

        with self.step("plugins: what was discovered"):
            table = Table(show_header=True)
            for col in ("plugin", "distribution", "version", "channel types", "demo peers"):
                table.add_column(col)
            for p in reg.plugins:
                peers = [n for n, peer in reg.demo_peers.items()
                         if reg.owners.get(p.channel_types[0] if p.channel_types else "") == p.name
                         or n == p.name]
                table.add_row(p.name, p.distribution, p.version, ", ".join(p.channel_types),
                              ", ".join(peers))
            self.console.print(table)
            for f in reg.failures:
                self.console.print(f"  [red]failed[/red] {f.name}: {f.error}")

    def start_peers(self, reg: Registry) -> None:
        assert self.workdir is not None
        with self.step("peers: starting real protocol peers on loopback") as res:
            wanted = [p for p in reg.demo_peers.values()
                      if self.only is None or p.name in self.only]
            for peer in wanted:
                if peer.role in self.started:
                    continue
                t0 = time.perf_counter()
                where = self.workdir / peer.name
                where.mkdir(parents=True, exist_ok=True)
                try:
                    chan = peer.start(where)
                except Exception as exc:
                    self.console.print(f"  [yellow]skipped[/yellow] {peer.name}: could not start "
                                       f"({type(exc).__name__}: {exc})")
                    continue
                self.started[peer.role] = (peer.name, chan)
                self.console.print(f"  [green]started[/green] {peer.name} "
                                   f"({time.perf_counter() - t0:.1f} s): {chan.description}")
            for role in ROLES:
                if role not in self.started:
                    self.console.print(f"  [dim]{role}: no peer started; core's simulated "
                                       "channel stands in[/dim]")
            res.note = f"{len(self.started)} real peer(s)"

    def _channel(self, role: Role) -> tuple[str, dict[str, Any], list[Any]]:
        if role in self.started:
            name, chan = self.started[role]
            return name, chan.config, chan.targets
        cfg = dict(SIMULATED_STANDINS[role])
        cfg["machines"] = {f"{role}-m{i}": "on" for i in range(4)}
        return f"sim-{role}", cfg, list(cfg["machines"])

    def write_config(self) -> Path:
        assert self.workdir is not None
        bmc, bmc_cfg, bmc_t = self._channel("bmc")
        inb, inb_cfg, inb_t = self._channel("inband")
        pdu, pdu_cfg, pdu_t = self._channel("pdu")
        cloud, cloud_cfg, cloud_t = self._channel("cloud")
        doc: dict[str, Any] = {
            "channels": {bmc: bmc_cfg, inb: inb_cfg, pdu: pdu_cfg, cloud: cloud_cfg},
            "nodes": {
                "rf-node": {"site": "plant-a", "labels": {}, "channels": [
                    {"channel": bmc, "target": bmc_t[0]}]},
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
                             "talos-attended": ["batch-2"]},
                    "pdbs": {"cache": {"pods": ["cache-0"], "allowed_disruptions": 1}},
                    "eviction_ticks": 1,
                    "labels": {n: {CONTROL_PLANE: ""} for n in
                               ("talos-only", "talos-pdu", "ec2-repairable")},
                },
                "tick_s": 0.2,
                "ready_timeout_s": 60,
                "readback_window_s": 20,
                "readback_cadence_s": 0.3,
            },
        }
        path = self.workdir / "powerplane.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    async def walk(self, config_path: Path) -> None:
        from powerplane.host import PowerHost

        host = PowerHost.from_config(config_path)
        async with host:
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
                        cells.append(f"[green]{verb.channel}[/green] ({mode})")
                        if verb.recovery:
                            notes.append(f"{offer.node}: {verb.verb} recoverable: "
                                         f"{verb.recovery}")
                    else:
                        cells.append("[red]withheld[/red]")
                        if verb.verb.value in ("shutdown", "terminate") and (
                            "does not advertise" not in verb.reason
                        ):
                            notes.append(f"{offer.node}: {verb.reason}")
                table.add_row(offer.node, offer.site or "", *cells)
            self.console.print(table)
            for note in notes:
                self.console.print(f"  {note}")

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
                        why = f" [dim]({t.why})[/dim]" if t.why else ""
                        self.console.print(
                            f"  {time.perf_counter() - t0:5.1f} s  {node}: "
                            f"[bold]{t.to.value}[/bold]{why}")
                    seen[name] = len(m.status.history)
                if all(until(m) for m in current.values()):
                    return current
                if time.perf_counter() - t0 > timeout:
                    phases = ", ".join(f"{n}: {m.phase.value}" for n, m in current.items())
                    raise RuntimeError(f"did not settle within {timeout:g} s ({phases})")
                status.update(", ".join(f"{n}: {m.phase.value}" for n, m in current.items()))
                await asyncio.sleep(life.config.tick_s)

    async def maintenance_reboot(self, host: PowerHost) -> None:
        from powerplane.lifecycle import Ceremony, Lifecycle, Phase

        with self.step("maintenance: reboot rf-node through the lifecycle") as res:
            life = Lifecycle.for_host(host)
            try:
                m = await life.request("rf-node", "reboot", Ceremony(
                    reason="demo: kernel 6.12 security update", actor="demo",
                    confirm_node="rf-node", ack_preflight=True))
                pre = m.spec.preflight
                self.console.print(f"  requested {m.name}: pods {', '.join(pre.pods)}; "
                                   f"power {pre.power.get('verb')} via "
                                   f"{pre.power.get('channel')}")
                done = await self._drive(life, {"rf-node": m.name},
                                         lambda m: m.phase is Phase.COMPLETE)
                final = done["rf-node"]
                res.note = f"{final.phase.value}, {len(final.status.dispatches)} dispatch"
            finally:
                life.close()

    async def shutdown_and_return(self, host: PowerHost) -> None:
        from powerplane.lifecycle import Ceremony, Lifecycle, Phase

        with self.step("maintenance: shutdown with PowerOffConfirmed, then return") as res:
            life = Lifecycle.for_host(host)
            try:
                names = {}
                for node in ("rf-node", "talos-attended"):
                    m = await life.request(node, "shutdown", Ceremony(
                        reason="demo: PSU replacement", actor="demo", confirm_node=node,
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
                    self.console.print(f"  {node}: PowerOffConfirmed=[{color}]{cond.status}"
                                       f"[/{color}] ({cond.message})")
                if parked["rf-node"].condition("PowerOffConfirmed").status != "True":
                    raise RuntimeError("the BMC node was not observed off")
                if parked["talos-attended"].condition("PowerOffConfirmed").status != "Unknown":
                    raise RuntimeError("the in-band node must stay Unknown: it cannot see off")
                back = Ceremony(reason="demo: PSU replaced, back to service", actor="demo")
                life.return_to_service("rf-node", back)
                self.console.print("  rf-node: return requested (power-on through the host)")
                self._by_hand("inband", host, "talos-attended")
                life.return_to_service("talos-attended", back, machine_on=True)
                self.console.print("  talos-attended: a person powered it on at the rack and "
                                   "confirmed it; return requested")
                await self._drive(life, names, lambda m: m.phase is Phase.COMPLETE)
                res.note = "True on the BMC, Unknown in-band, both Complete"
            finally:
                life.close()

    def conformance(self) -> None:
        """Run the conformance suite against each backend; print advertised vs verified."""
        import contextlib
        import importlib
        import io

        with self.step("conformance: advertised versus verified, backend by backend") as res:
            try:
                api = importlib.import_module("powerplane_conformance.api")
            except ImportError as exc:
                raise RuntimeError("powerplane-conformance is not installed") from exc
            rows: list[tuple[str, dict[str, str], int]] = []
            for role in ROLES:
                name, cfg, targets = self._channel(role)
                extra = self.started[role][1].conformance if role in self.started else {}
                picked = targets[-2:] if len(targets) >= 2 else targets
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
                with contextlib.redirect_stderr(log):
                    summary = api.run_suite(target)
                data = summary.data
                rows.append((name, _matrix(data), summary.exit_code))
                c = data["counts"]
                self.console.print(
                    f"  {name}: {data['verdict']} ({c['pass']} pass, {c['fail']} fail, "
                    f"{c['skip']} skip, {c['not_tested']} not tested, {c['xfail']} xfail) "
                    f"in {time.perf_counter() - t0:.1f} s")
                for r in data["results"]:
                    if r["outcome"] == "fail":
                        self.console.print(f"    [red]FAIL[/red] {r['id']}: {r['message']}")
            from rich.table import Table

            table = Table(title="advertised (graceful/hard) and verified: ok, FAIL, ? not "
                          "tested, - not advertised (and refused)", title_justify="left")
            table.add_column("backend")
            for verb in ("reboot", "shutdown", "power-on", "terminate"):
                table.add_column(verb)
            table.add_column("conformant")
            for name, cells, code in rows:
                table.add_row(name, *(cells[v] for v in
                                             ("reboot", "shutdown", "power-on", "terminate")),
                              "[green]yes[/green]" if code == 0 else "[red]no[/red]")
            self.console.print(table)
            failed = [n for n, _, code in rows if code != 0]
            verdict = "yes" if not failed else f"no ({', '.join(failed)})"
            self.console.print(f"conformant for every advertised verb: {verdict}")
            if failed:
                raise RuntimeError(f"conformance failed for {', '.join(failed)}")
            res.note = f"{len(rows)} backend(s) conformant"

    def _by_hand(self, role: Role, host: PowerHost, node: str) -> None:
        spec = host.nodes[node]
        ref = spec.channels[0]
        if role in self.started:
            hand = self.started[role][1].power_on_by_hand
            if hand is not None:
                hand(ref.target)
            return
        chan = host.channel(ref.channel)
        set_state = getattr(chan, "set_state", None)
        if set_state is not None:
            set_state(ref.target, "on")

    def stop_peers(self) -> None:
        for name, chan in self.started.values():
            try:
                chan.stop()
            except Exception as exc:
                self.console.print(f"[red]could not stop {name}:[/red] {exc}")
        self.started.clear()

    def print_keep(self) -> None:
        assert self.workdir is not None
        cfg = self.workdir / "powerplane.yaml"
        self.console.print(f"[bold]peers left running[/bold]; config: {cfg}")
        self.console.print(f"  powerplane --config {cfg} offers")
        self.console.print(f"  powerplane --config {cfg} state rf-node")
        self.console.print(f"  powerplane --config {cfg} invoke rf-node reboot --reason test")
        self.console.print(f"  (stop them with: rm -rf {self.workdir} after killing the "
                           "processes listed above)")
