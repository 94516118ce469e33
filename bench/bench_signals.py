"""Benchmark: Ctrl-C and SIGTERM against every kind of command, and how fast it is gone.

One row per (command, signal, moment): the time from the signal to the process's exit, the
exit code, and what it printed last on stderr (and, for the demo, its verdict line). Each
command runs as ``powerplane`` in a subprocess against a real peer on loopback that makes
it block where the row says:

- ``invoke``/``state`` on Redfish, a TCP listener whose backlog is full (the connect hangs:
  ``connect_s``/``read_s`` 20, as the issue measured 20.7 s), or one that never accepts (the
  handshake done, the request never read);
- ``invoke`` on IPMI, a UDP port that never answers (``connect_s``/``read_s`` 15);
- ``offers`` and ``invoke`` on pyghmi's BMC simulator with a user it does not know (the
  plugin's worker blocked in ``Session()``), with a signal and without one (``limits.timeout_s``
  8: the time from the host's answer to the exit);
- ``invoke`` on a DMTF mockup holding the Reset POST 4 s with ``limits.timeout_s`` 1 (no
  signal: the whole run), and the same BMC holding it 60 s, SIGINT once the POST arrived;
- ``maintenance run`` dispatching a reboot whose POST the mockup holds;
- ``conformance`` during a check (core's simulated channel, every call 200 ms), in this
  process and with ``--subprocess``, with each machine's restore outcome from results.json;
- ``demo`` inside a conformance sub-run and outside one (the real peers).

``python bench/bench_signals.py [ROW-PREFIX ...]`` prints the table (``-`` where a peer is
missing: say so, no row is invented); exits 0. Each row is a fresh process; a row whose
process is not gone 30 s after its signal is killed and says so.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

GIVE_UP_S = 30.0
"""How long a row waits for the process to be gone after its signal."""
REACH_S = 120.0
"""How long a row waits for its moment (the command reaching the blocked call)."""
PASSWORD_ENV = "PP_BENCH_SIGNALS_PASSWORD"


@dataclass
class Row:
    command: str
    signal: str
    moment: str
    seconds: float | None
    code: int | None
    said: str


class Proc:
    """``powerplane ARGS`` with its output read as it comes."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None,
                 cwd: Path | None = None, group: bool = False) -> None:
        self.lines: list[str] = []
        self.err: list[str] = []
        self.group = group
        """Signal its whole process group (what a terminal's Ctrl-C does)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "powerplane.cli", *args], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=group,
            env={**os.environ, "NO_COLOR": "1", **(env or {})})
        self._readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                         for s, b in ((self.proc.stdout, self.lines),
                                      (self.proc.stderr, self.err))]
        for r in self._readers:
            r.start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_line(self, pred: Callable[[str], bool], timeout: float = REACH_S) -> bool:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                if pred(self.lines[seen]):
                    return True
                seen += 1
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def finish(self, sig: signal.Signals | None) -> tuple[float | None, int | None]:
        """Send ``sig`` (None: none); seconds until gone (None: killed) and the code."""
        t0 = time.monotonic()
        if sig is not None and self.group:
            os.killpg(self.proc.pid, sig)
        elif sig is not None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=GIVE_UP_S if sig is not None else 10 * GIVE_UP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, None
        took = time.monotonic() - t0
        for r in self._readers:
            r.join(5)
        return took, code

    def said(self) -> str:
        words = [x.strip() for x in self.err if x.strip()]
        verdict = [x.strip() for x in self.lines if "demo " in x and " in " in x and (
            "passed" in x or "failed" in x or "interrupted" in x)]
        text = " / ".join(words[-3:])
        if verdict:
            text = " / ".join(p for p in (verdict[-1], text) if p)
        return text[:160]


def write(where: Path, doc: dict[str, Any]) -> Path:
    path = where / "powerplane.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def redfish_doc(endpoint: str, timeouts: dict[str, float], limit: float,
                **extra: Any) -> dict[str, Any]:
    return {"channels": {"bmc": {"type": "redfish", "endpoint": endpoint, "username": "admin",
                                 "password": {"env": PASSWORD_ENV}, "timeouts": timeouts,
                                 **extra.pop("channel", {})}},
            "nodes": {"r1": {"site": "lab", "channels": [
                {"channel": "bmc", "target": extra.pop("target", "/redfish/v1/Systems/1")}]}},
            "recovery": {"attendedRack": True}, "limits": {"timeout_s": limit}, **extra}


@contextmanager
def full_backlog() -> Iterator[int]:
    """A listener whose accept queue is full: a client's connect hangs in SYN_SENT."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(0)
    port = sock.getsockname()[1]
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    try:
        yield port
    finally:
        for c in fillers:
            c.close()
        sock.close()


def rows_redfish(tmp: Path) -> Iterator[Row]:
    env = {PASSWORD_ENV: "bench"}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with full_backlog() as port:
            config = write(tmp, redfish_doc(f"http://127.0.0.1:{port}",
                                            {"connect_s": 20, "read_s": 20}, 60))
            p = Proc(["--config", str(config), "invoke", "r1", "reboot", "--yes", "--reason",
                      "bench"], env)
            time.sleep(3)  # imports, config, the connect under way (it cannot be observed)
            took, code = p.finish(sig)
            yield Row("invoke (redfish)", sig.name, "during connect (backlog full)", took, code,
                      p.said())
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        config = write(tmp, redfish_doc(f"http://127.0.0.1:{listener.getsockname()[1]}",
                                        {"connect_s": 20, "read_s": 20}, 60))
        for args, what in ((["invoke", "r1", "reboot", "--yes", "--reason", "bench"],
                            "invoke (redfish)"), (["state", "r1"], "state (redfish)")):
            p = Proc(["--config", str(config), *args], env)
            select.select([listener], [], [], REACH_S)  # its connection waits, unaccepted
            took, code = p.finish(signal.SIGINT)
            yield Row(what, "SIGINT", "request sent, never read", took, code, p.said())
            while select.select([listener], [], [], 0)[0]:
                listener.accept()[0].close()


def rows_ipmi(tmp: Path) -> Iterator[Row]:
    env = {PASSWORD_ENV: "bench"}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
            silent.bind(("127.0.0.1", 0))
            silent.settimeout(REACH_S)
            config = write(tmp, {
                "channels": {"bmc": {"type": "ipmi", "username": "oper",
                                     "password": {"env": PASSWORD_ENV},
                                     "timeouts": {"connect_s": 15, "read_s": 15}}},
                "nodes": {"i1": {"site": "lab", "channels": [
                    {"channel": "bmc", "target": f"127.0.0.1:{silent.getsockname()[1]}"}]}},
                "recovery": {"attendedRack": True}, "limits": {"timeout_s": 60}})
            p = Proc(["--config", str(config), "invoke", "i1", "reboot", "--yes", "--reason",
                      "bench"], env)
            silent.recvfrom(4096)
            took, code = p.finish(sig)
            yield Row("invoke (ipmi)", sig.name, "silent UDP port, first datagram sent", took,
                      code, p.said())


def rows_pyghmi(tmp: Path) -> Iterator[Row]:
    try:
        from powerplane_ipmi.testing import PyghmiBmc
    except ImportError as exc:
        yield Row("offers (ipmi)", "-", f"pyghmi simulator missing: {exc}", None, None, "")
        return
    with PyghmiBmc(tmp / "pyghmi") as bmc:
        config = write(tmp, {
            "channels": {"bmc": {"type": "ipmi", "username": "nosuchuser",
                                 "password": {"file": str(bmc.secret_file("oper"))},
                                 "timeouts": {"connect_s": 2, "read_s": 3}}},
            "nodes": {"i1": {"site": "lab", "channels": [
                {"channel": "bmc", "target": bmc.address}]}},
            "recovery": {"attendedRack": True}, "limits": {"timeout_s": 8}})
        p = Proc(["--config", str(config), "offers"])
        time.sleep(1.5)  # inside the session setup (the plugin gives up after connect_s 2)
        took, code = p.finish(signal.SIGINT)
        yield Row("offers (ipmi, unknown user)", "SIGINT", "1.5 s in, in the session setup",
                  took, code, p.said())
        for args, what in ((["offers"], "offers (ipmi, unknown user)"),
                           (["invoke", "i1", "reboot", "--yes", "--reason", "bench"],
                            "invoke (ipmi, unknown user)")):
            p = Proc(["--config", str(config), *args])
            took, code = p.finish(None)
            yield Row(what, "none", "whole run (limits.timeout_s 8)", took, code, p.said())


def rows_held_reset(tmp: Path) -> Iterator[Row]:
    try:
        from powerplane_redfish.testing.dmtf import mockups_dir
        from powerplane_redfish.testing.mockup import MockupServer
    except ImportError as exc:
        yield Row("invoke (redfish)", "-", f"mockup missing: {exc}", None, None, "")
        return
    server = MockupServer(mockups_dir() / "public-rackmount1").start()
    try:
        env = {PASSWORD_ENV: server.password}
        target = server.systems[0]
        reset = ("POST", target + "/Actions/ComputerSystem.Reset")

        def doc(limit: float, **extra: Any) -> dict[str, Any]:
            d = redfish_doc(server.endpoint, {"connect_s": 5, "read_s": 90}, limit,
                            target=target, **extra)
            d["channels"]["bmc"].update(username=server.username, auth="session")
            return d

        server.reset_delay_s = 4.0
        config = write(tmp, doc(1))
        t0 = time.monotonic()
        p = Proc(["--config", str(config), "invoke", "r1", "reboot", "--yes", "--reason",
                  "bench"], env)
        _, code = p.finish(None)
        yield Row("invoke (redfish)", "none", "reset held 4 s, limits.timeout_s 1 (whole run)",
                  time.monotonic() - t0, code, p.said())
        server.reset_delay_s = 60.0
        before = server.requests.count(reset)
        config = write(tmp, doc(300))
        p = Proc(["--config", str(config), "invoke", "r1", "reboot", "--yes", "--reason",
                  "bench"], env)
        deadline = time.monotonic() + REACH_S
        while server.requests.count(reset) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        took, code = p.finish(signal.SIGINT)
        yield Row("invoke (redfish)", "SIGINT", "reset POST arrived, answer held", took, code,
                  p.said())
        # maintenance run: the reboot's POST held
        server.reset_delay_s = 0.0
        store = tmp / "maint"
        store.mkdir(exist_ok=True)
        config = write(store, doc(300, lifecycle={
            "store": str(store / "powerplane.db"),
            "cluster": {"type": "simulated", "state_file": str(store / "cluster.json")},
            "tick_s": 0.2, "ready_timeout_s": 60, "no_control_plane": True}))
        req = subprocess.run(
            [sys.executable, "-m", "powerplane.cli", "--config", str(config), "maintenance",
             "request", "r1", "--intent", "reboot", "--reason", "bench: kernel update",
             "--confirm-node", "r1", "--ack-preflight"],
            capture_output=True, text=True, env={**os.environ, **env}, timeout=REACH_S,
            check=False)
        if req.returncode != 0:
            yield Row("maintenance run", "-", "request refused", None, req.returncode,
                      (req.stderr or req.stdout).strip()[-160:])
            return
        server.reset_delay_s = 60.0
        before = server.requests.count(reset)
        p = Proc(["--config", str(config), "maintenance", "run"], env)
        deadline = time.monotonic() + REACH_S
        while server.requests.count(reset) == before and time.monotonic() < deadline:
            if p.proc.poll() is not None:
                break
            time.sleep(0.02)
        took, code = p.finish(signal.SIGINT)
        yield Row("maintenance run", "SIGINT", "reboot dispatched, answer held", took, code,
                  p.said())
    finally:
        server.stop()


def rows_conformance(tmp: Path) -> Iterator[Row]:
    for sig, mode in ((signal.SIGINT, ()), (signal.SIGTERM, ()),
                      (signal.SIGINT, ("--subprocess",)), (signal.SIGTERM, ("--subprocess",))):
        where = tmp / f"conf-{sig.name}{'-sub' if mode else ''}"
        where.mkdir(exist_ok=True)
        target = write(where, {
            "channels": {"lab": {"type": "simulated", "machines": {"a": "on", "b": "on"},
                                 "latency_ms": 200}},
            "nodes": {"a": {"channels": [{"channel": "lab", "target": "a"}]},
                      "b": {"channels": [{"channel": "lab", "target": "b"}]}},
            "conformance": {"nodes": ["a", "b"], "allow_destructive": True}})
        p = Proc(["conformance", "--target", str(target), "--yes", "--report",
                  str(where / "r.json"), *mode])
        time.sleep(6)  # collection done, a check under way
        took, code = p.finish(sig)
        yield Row("conformance (simulated)" + (" --subprocess" if mode else ""), sig.name,
                  "6 s in, during a check", took, code, p.said() + _restores(where / "r.json"))


def _restores(report: Path) -> str:
    """`` / restore: a@lab restored, b@lab sent_not_confirmed`` from results.json."""
    import json

    try:
        cut = json.loads(report.read_text(encoding="utf-8")).get("interrupted") or {}
    except (OSError, ValueError):
        return " / no results.json"
    return " / restore: " + ", ".join(f"{m['subject']} {m.get('restore')}"
                                      for m in cut.get("machines", []))


def rows_demo(tmp: Path) -> Iterator[Row]:
    sub_run = ("in a conformance sub-run",
               lambda line: line.lstrip().startswith(("redfish: ", "sim-bmc: ")), 1.0)
    outside = ("outside a sub-run (maintenance step)",
               lambda line: "maintenance: reboot rf-node" in line, 0.0)
    for sig, (what, pred, after), group in (
        (signal.SIGINT, sub_run, False), (signal.SIGTERM, sub_run, False),
        (signal.SIGINT, outside, False), (signal.SIGINT, sub_run, True),
    ):
        p = Proc(["demo"], cwd=tmp, group=group)
        if not p.wait_line(pred):
            p.finish(signal.SIGKILL)
            yield Row("demo", sig.name, what, None, None, "the moment never came")
            continue
        time.sleep(after)
        took, code = p.finish(sig)
        how = sig.name + (" to its process group (a terminal's Ctrl-C)" if group else "")
        yield Row("demo", how, what, took, code, p.said())


GROUPS: dict[str, Callable[[Path], Iterator[Row]]] = {
    "redfish": rows_redfish, "ipmi": rows_ipmi, "pyghmi": rows_pyghmi,
    "held": rows_held_reset, "conformance": rows_conformance, "demo": rows_demo,
}


def main(argv: list[str]) -> int:
    wanted = argv or list(GROUPS)
    rows: list[Row] = []
    for name in wanted:
        with tempfile.TemporaryDirectory(prefix=f"bench-signals-{name}-") as tmp:
            for row in GROUPS[name](Path(tmp)):
                rows.append(row)
                print(f"  measured: {row.command} / {row.signal} / {row.moment}", flush=True,
                      file=sys.stderr)
    print("| command | signal | moment | signal to exit | exit | printed (last lines) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        secs = "killed" if r.seconds is None and r.code is None else (
            f"{r.seconds:.2f} s" if r.seconds is not None else "-")
        said = r.said.replace("|", "\\|")
        print(f"| {r.command} | {r.signal} | {r.moment} | {secs} | "
              f"{r.code if r.code is not None else '-'} | {said} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
