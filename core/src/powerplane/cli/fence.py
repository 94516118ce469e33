"""``fence_powerplane``: ClusterLabs' fence-agent interface over a powerplane deployment.

Pacemaker's fencer (and anything else that calls ``fence_*`` agents, such as medik8s'
fence-agents-remediation) runs an agent with its options as ``key=value`` lines on standard
input, or, for people, as long options (``--action off --plug node-1``); see
``docs/reference/servers.md`` ("fence_powerplane"). The agent's "device" is a deployment file
(``config=``), its plugs are the deployment's nodes (``plug=``, also ``port=``, else
``nodename=``).

Every action goes through :class:`powerplane.PowerHost` exactly as ``powerplane
invoke`` and ``powerplane state`` do, opened by the one runtime (the CLI's
:func:`open_host`: the lifecycle's guard where the deployment has a ``lifecycle:``
section, the deployment's policy and audit trail, this process's OS user as the identity):

- ``off`` is ``shutdown`` under the rule: where no channel of the node can power it back on
  and no attendance is declared, it is refused with the rule's reason (exit 1, nothing
  sent). After it is sent the node is read back for ``power_timeout`` seconds and ``off`` is
  claimed only when a channel reads off: an ``unknown`` reading is a failure;
- ``on`` is ``power-on``, read back until the node reads on;
- ``reboot`` is off (read back off) then on (``method=onoff``, the default, as the fencing
  library does); where power-on is not available for the node, off-then-on would leave the
  machine off, so the node's own reboot verb is used instead (a power cycle, as
  ``method=cycle``): only a hard one, since a graceful OS restart does not fence a hung node;
- ``status``: exit 0 on, 2 off, 1 unknown or no reading; ``monitor``: 0 when the node (or,
  without a plug, every channel of every node you may read) answers; ``list`` and
  ``list-status``: the nodes you may read (``servers:read``);
- ``metadata``: XML valid against fence-agents' ``metadata.rng``; ``validate-all``: the
  deployment loads and the plug, when given, is one of its nodes.

Exit codes are the interface's: 0 success, 1 failure (a refusal, bad input, a device that
failed, an outcome not observed), 2 only for ``status``/``monitor`` of a node that reads off.
The agent takes no secret: a ``password``-like option is refused on the command line and
ignored on standard input, and no value of an unknown option is ever printed.

Placed in :mod:`powerplane.cli` (the commands layer) because it is a command: it builds its
host with the CLI's :func:`open_host` and runs it with :func:`run_async`, which no layer
below the commands may import.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

import click

from powerplane.cli._common import open_host, run_async

if TYPE_CHECKING:
    from powerplane.capabilities import Verb
    from powerplane.host import InvokeResult, NodeReading, Plan
    from powerplane.runtime import PowerHost

__all__ = ["ACTIONS", "MAX_STDIN", "FenceOptions", "main", "metadata", "parse_argv",
           "parse_stdin", "read_stdin", "run"]

AGENT = "fence_powerplane"

ACTIONS = ("on", "off", "reboot", "status", "monitor", "list", "list-status", "metadata",
           "validate-all")
"""The actions of the interface this agent implements."""

ALIASES = {"meta-data": "metadata", "enable": "on", "disable": "off"}
"""Other spellings callers use for an action (OCF's ``meta-data``; fabric fencing's words)."""

OK, FAILED, OFF = 0, 1, 2
"""The interface's exit codes: success; failure; ``status`` of a node that reads off."""

SECRET_WORDS = ("passw", "secret", "token", "community", "key")
"""Option names that carry a secret in other agents: refused on argv, ignored on stdin."""


@dataclass(frozen=True)
class Param:
    """One option: its stdin name, its long (and short) option, type and metadata text."""

    name: str
    longopt: str
    short: str | None
    metavar: str
    kind: str  # boolean | string | second | integer | select
    shortdesc: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    deprecated: bool = False
    obsoletes: str | None = None

    @property
    def getopt(self) -> str:
        long = (f"--{self.longopt}" if self.kind == "boolean"
                else f"--{self.longopt}=[{self.metavar}]")
        return f"-{self.short}, {long}" if self.short else long


PARAMS: tuple[Param, ...] = (
    Param("action", "action", "o", "action", "string",
          "Fencing action: on, off, reboot, status, monitor, list, list-status, metadata, "
          "validate-all", default="reboot"),
    Param("plug", "plug", "n", "node", "string",
          "The node of the deployment to act on (a node name of the config file)",
          obsoletes="port"),
    Param("port", "plug", "n", "node", "string",
          "The node of the deployment to act on (a node name of the config file)",
          deprecated=True),
    Param("config", "config", "c", "file", "string",
          "The powerplane deployment file (default: $POWERPLANE_CONFIG, else "
          "./powerplane.yaml); its channels hold every address and secret reference"),
    Param("method", "method", "m", "method", "select",
          "Reboot by off then on (onoff), or by the node's hard reboot verb (cycle)",
          default="onoff", choices=("onoff", "cycle")),
    Param("power_timeout", "power-timeout", None, "seconds", "second",
          "Read the node back for up to this many seconds after off or on", default="20"),
    Param("delay", "delay", None, "seconds", "second",
          "Wait this many seconds before off or reboot", default="0"),
    Param("reason", "reason", None, "text", "string",
          "Why, recorded in the audit trail with the act (default: the action, by the "
          "fencer)"),
    Param("hazard_reason", "hazard-reason", None, "text", "string",
          "With a lifecycle: section, the typed reason for consuming the last of the "
          "quorum margin"),
    Param("separator", "separator", "C", "char", "string",
          "Separator of the fields list and list-status print", default=","),
)

_BY_NAME = {p.name: p for p in PARAMS}
_BY_LONG = {p.longopt: p for p in PARAMS if not p.deprecated}
_BY_SHORT = {p.short: p for p in PARAMS if p.short and not p.deprecated}
_FLAGS = {"help": "help", "version": "version"}
_STDIN_ONLY = {"option": "action", "nodename": "nodename"}
"""Names read on stdin besides the parameters: ``option`` (the old name of ``action``) and
``nodename`` (the node the fencer is fencing, used when no plug is given)."""


class FenceUsage(Exception):
    """Bad input to the agent (exit 1, the message on stderr, no value of an option in it)."""


@dataclass
class FenceOptions:
    """The agent's options after parsing."""

    action: str = "reboot"
    plug: str | None = None
    nodename: str | None = None
    config: str | None = None
    method: str = "onoff"
    power_timeout: float = 20.0
    delay: float = 0.0
    reason: str | None = None
    hazard_reason: str | None = None
    separator: str = ","
    help: bool = False
    version: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def node(self) -> str | None:
        """The node to act on: the plug (``port``), else the fencer's ``nodename``."""
        return self.plug or self.nodename

    def recorded_reason(self) -> str:
        if self.reason and self.reason.strip():
            return self.reason
        return f"{AGENT} {self.action}, requested by the fencer"


# -- parsing -----------------------------------------------------------------------------------
def _secret_like(name: str) -> bool:
    low = name.lower()
    return any(word in low for word in SECRET_WORDS)


def parse_argv(argv: Sequence[str]) -> dict[str, str]:
    """Long (``--plug=n1``, ``--plug n1``) and short (``-n n1``) options into stdin names.

    An unknown option is refused naming the option only; a secret-like one (``--password``)
    says why the agent takes no secret on its command line. No value is ever echoed.
    """
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in _FLAGS:
                out[_FLAGS[name]] = "1"
                continue
            param = _BY_LONG.get(name)
        elif arg.startswith("-") and len(arg) >= 2:
            name, value = arg[1], arg[2:]
            eq = "=" if value else ""
            if name == "h":
                out["help"] = "1"
                continue
            param = _BY_SHORT.get(name)
        else:
            raise FenceUsage(f"unexpected argument at position {i} (options are --name=value)")
        if param is None:
            dashes = "--" if arg.startswith("--") else "-"
            if _secret_like(name):
                raise FenceUsage(
                    f"{dashes}{name}: {AGENT} takes no secret on its command line; the "
                    "deployment's channels hold secret references ({env: NAME} or "
                    "{file: PATH})")
            raise FenceUsage(f"unknown option {dashes}{name}")
        if not eq:
            if i >= len(argv):
                raise FenceUsage(f"option --{param.longopt} needs a value")
            value = argv[i]
            i += 1
        out[param.name] = value
    return out


MAX_STDIN = 65_536
"""The most standard input the agent reads (bytes): the interface's options are a few short
lines; more is refused (exit 1) before anything is parsed."""

_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
"""What an option's name looks like: an unknown one is named in its warning; a line that is
not ``key=value`` with such a name is named by its number only (a password typed on a line
of its own is never printed)."""


def read_stdin(source: IO[str]) -> str:
    """Standard input, at most :data:`MAX_STDIN` characters (:class:`FenceUsage` beyond)."""
    text = source.read(MAX_STDIN + 1)
    if len(text) > MAX_STDIN:
        raise FenceUsage(f"standard input is longer than {MAX_STDIN} bytes: the options are "
                         "key=value lines, one per option; nothing was read further")
    return text


def parse_stdin(text: str) -> tuple[dict[str, str], list[str]]:
    """``key=value`` lines as the interface says: ``#`` lines and blank lines skipped, the
    last of a repeated key wins, quotes around a value dropped, ``-`` and ``_`` in a name
    alike. Unknown names are ignored, each with a warning naming it (never its value);
    secret-like names are ignored and said to be; a line that is not ``key=value`` (or
    whose name is not an option's name) is ignored with a warning naming its number only."""
    out: dict[str, str] = {}
    warnings: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not _OPTION_NAME.fullmatch(name):
            warnings.append(f"ignoring line {number} of standard input: not key=value with "
                            "an option's name (the line is not shown)")
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if name in _BY_NAME:
            out["plug" if name == "port" else name] = value
        elif name in _STDIN_ONLY:
            out[_STDIN_ONLY[name]] = value
        elif _secret_like(name):
            warnings.append(f"ignoring option {name!r}: {AGENT} reads secrets only through "
                            "the deployment's secret references")
        else:
            warnings.append(f"ignoring unknown option {name!r}")
    return out, warnings


def _seconds(raw: str, what: str) -> float:
    from powerplane.host.invoking import MAX_WAIT_S

    try:
        value = float(raw)
    except ValueError:
        raise FenceUsage(f"{what} must be a number of seconds") from None
    if math.isnan(value) or not 0 <= value <= MAX_WAIT_S:
        raise FenceUsage(f"{what} must be seconds from 0 to {MAX_WAIT_S:g}")
    return value


def options_of(raw: dict[str, str], warnings: Sequence[str] = ()) -> FenceOptions:
    """Parsed options checked: the action known, numbers finite, the method a choice."""
    opts = FenceOptions(warnings=list(warnings))
    opts.help = raw.get("help", "0") not in ("0", "")
    opts.version = raw.get("version", "0") not in ("0", "")
    action = raw.get("action", "reboot").strip().lower()
    action = ALIASES.get(action, action)
    if action not in ACTIONS and not (opts.help or opts.version):
        raise FenceUsage(f"Unrecognised action {action!r} (one of {', '.join(ACTIONS)})")
    opts.action = action
    for key in ("plug", "nodename", "config", "reason", "hazard_reason"):
        value = raw.get(key)
        if value is not None and value.strip():
            setattr(opts, key, value.strip() if key != "reason" else value)
    method = raw.get("method", "onoff").strip().lower()
    if method not in ("onoff", "cycle"):
        raise FenceUsage("method must be onoff or cycle")
    opts.method = method
    opts.power_timeout = _seconds(raw.get("power_timeout", "20"), "power_timeout")
    opts.delay = _seconds(raw.get("delay", "0"), "delay")
    opts.separator = raw.get("separator", ",") or ","
    return opts


# -- metadata ----------------------------------------------------------------------------------
def metadata() -> str:
    """The agent's metadata, in the shape fence-agents' ``metadata.rng`` defines."""
    lines = [
        '<?xml version="1.0" ?>',
        f'<resource-agent name="{AGENT}" shortdesc='
        f'{quoteattr("Fence agent for powerplane: power fencing under the recoverability rule")}>',
        "<longdesc>" + escape(
            f"{AGENT} fences the nodes of a powerplane deployment file through their power "
            "channels (Redfish, IPMI, PDUs, cloud APIs, ...), under powerplane's rule: off is "
            "a shutdown, offered only where some channel of the node can power it back on or "
            "a person is declared present; an unrecoverable off is refused with the reason. "
            "Off is claimed only when the node is read back off. Acts are decided by the "
            "deployment's policy and recorded in its audit trail, as the fencer's OS user. "
            "Addresses and secrets live in the deployment file, never in the agent's "
            "options.") + "</longdesc>",
        "<vendor-url>docs/reference/servers.md#fence_powerplane (powerplane)</vendor-url>",
        "<parameters>",
    ]
    for p in PARAMS:
        attrs = f'name="{p.name}" unique="0" required="0"'
        if p.deprecated:
            attrs += ' deprecated="1"'
        if p.obsoletes:
            attrs += f' obsoletes="{p.obsoletes}"'
        default = f" default={quoteattr(p.default)}" if p.default is not None else ""
        lines.append(f"\t<parameter {attrs}>")
        lines.append(f"\t\t<getopt mixed={quoteattr(p.getopt)} />")
        if p.kind == "select":
            lines.append(f'\t\t<content type="select"{default}>')
            lines += [f"\t\t\t<option value={quoteattr(c)} />" for c in p.choices]
            lines.append("\t\t</content>")
        else:
            lines.append(f'\t\t<content type="{p.kind}"{default} />')
        lines.append(f'\t\t<shortdesc lang="en">{escape(p.shortdesc)}</shortdesc>')
        lines.append("\t</parameter>")
    lines += ["</parameters>", "<actions>"]
    for action in ACTIONS:
        extra = ' automatic="0"' if action == "on" else ""
        lines.append(f'\t<action name="{action}"{extra} />')
    lines += ["</actions>", "</resource-agent>"]
    return "\n".join(lines) + "\n"


USAGE = f"""Usage: {AGENT} [options]   (or key=value lines on standard input)
Options:
""" + "\n".join(
    f"   {p.getopt:<34} {p.shortdesc}" for p in PARAMS if not p.deprecated
) + """
   -h, --help                         This help
   --version                          The version
Exit codes: 0 success; 1 failure or refusal; 2 status: the node reads off.
"""


# -- the actions -------------------------------------------------------------------------------
class _Out:
    """What the agent says: results on stdout, failures and notes on stderr (as written)."""

    def __init__(self, stdout: IO[str], stderr: IO[str]) -> None:
        self.stdout = stdout
        self.stderr = stderr

    def say(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def note(self, text: str) -> None:
        self.stderr.write(text + "\n")

    def fail(self, text: str) -> int:
        self.stderr.write(f"Failed: {text}\n")
        return FAILED


def _context(opts: FenceOptions, own_process: bool) -> click.Context:
    """A root context as ``powerplane --config FILE`` makes, for the CLI's host builder."""
    from powerplane.cli import OWN_PROCESS, cli

    return click.Context(cli, info_name=AGENT,
                         obj={"config": opts.config, OWN_PROCESS: own_process})


def _need_node(opts: FenceOptions) -> str:
    node = opts.node
    if node is None:
        raise FenceUsage("You have to enter a plug: the node name (plug=, port= or "
                         "nodename=)")
    return node


def _readings(reading: NodeReading) -> str:
    parts = [f"{r.channel} ({r.error or r.state.value}): {r.detail}".rstrip(": ")
             for r in reading.readings]
    return "; ".join(parts) or "the node has no channel configured"


async def _may_read(host: PowerHost, nodes: Sequence[str]) -> None:
    """``servers:read`` for each node, as ``powerplane state`` asks (a denial recorded)."""
    from powerplane.authority.actions import Action
    from powerplane.errors import UnknownNode

    known = host.nodes
    for node in nodes:
        if node not in known:
            raise UnknownNode(node, list(known))
    await host.authority.require_all(Action.READ, [(n, known[n]) for n in nodes])


async def _plan(host: PowerHost, node: str, verb: Verb, opts: FenceOptions) -> Plan:
    """What ``invoke`` would send, after the policy, the rule and the guard (raises the
    refusal, nothing sent)."""
    plans = await host.plan([node], verb, opts.recorded_reason(),
                            hazard_reason=opts.hazard_reason)
    plan = plans[node]
    if isinstance(plan, Exception):
        raise plan
    return plan


async def _status(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.channel import PowerState

    node = _need_node(opts)
    await _may_read(host, [node])
    reading = await host.read_power_state(node)
    if reading.state is PowerState.ON:
        out.say("Status: ON")
        return OK
    if reading.state is PowerState.OFF:
        out.say("Status: OFF")
        return OFF
    if not reading.observed:
        return out.fail(f"Unable to obtain the status of {node}: {_readings(reading)}")
    return out.fail(f"the status of {node} is unknown: {_readings(reading)}")


async def _monitor(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.authority.actions import Action

    if opts.node is not None:
        node = opts.node
        await _may_read(host, [node])
        reading = await host.read_power_state(node)
        if not reading.observed:
            return out.fail(f"Unable to obtain the status of {node}: {_readings(reading)}")
        return OK
    refs = list(host.nodes.items())
    shown = await host.authority.permitted(Action.READ, refs)
    if refs and not shown:
        return out.fail("you may read none of the deployment's nodes (servers:read)")
    await host.discover(shown)
    failed = [(n, e) for n in shown if (e := host.discovery_error(n)) is not None]
    for node, error in failed:
        out.note(f"Failed: {node}: {type(error).__name__}: {error}")
    return FAILED if failed else OK


async def _list(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.authority.actions import Action
    from powerplane.channel import PowerState

    shown = await host.authority.permitted(Action.READ, list(host.nodes.items()))
    sep = opts.separator
    if opts.action == "list":  # no alias: pacemaker takes every field for a target name
        for node in shown:
            out.say(f"{node}{sep}")
        return OK
    readings = await host.read_many(shown, every_channel=False)
    for node in shown:
        state = readings[node].state
        word = state.value.upper() if state is not PowerState.UNKNOWN else "UNKNOWN"
        out.say(f"{node}{sep}{sep}{word}")
    return OK


async def _before(host: PowerHost, node: str, out: _Out) -> NodeReading | None:
    """The node read before a verb is sent (as the fencing library reads it first); None,
    said, when no channel produced a reading (then nothing is sent)."""
    reading = await host.read_power_state(node)
    if not reading.observed:
        out.fail(f"Unable to obtain the status of {node}; nothing was sent: "
                 f"{_readings(reading)}")
        return None
    return reading


async def _send(host: PowerHost, node: str, verb: Verb, opts: FenceOptions) -> InvokeResult:
    return await host.invoke(node, verb, opts.recorded_reason(), wait=opts.power_timeout,
                             hazard_reason=opts.hazard_reason)


def _off_result(result: InvokeResult, opts: FenceOptions, out: _Out) -> bool:
    """Whether the node was read back off after the shutdown (said either way)."""
    from powerplane.channel import PowerState

    if result.readback is PowerState.OFF:
        return True
    if result.readback is PowerState.UNKNOWN:
        out.fail(f"{result.node} reads unknown after off (shutdown accepted via channel "
                 f"{result.channel}): no channel could read it off, so off is not claimed")
    else:
        out.fail(f"Timed out waiting to power OFF: {result.node} still reads "
                 f"{result.readback.value if result.readback else 'nothing'} after "
                 f"{opts.power_timeout:g} s (shutdown accepted via channel {result.channel})")
    return False


def _on_result(result: InvokeResult, opts: FenceOptions, out: _Out) -> bool:
    from powerplane.channel import PowerState

    if result.readback is PowerState.ON:
        return True
    out.fail(f"Timed out waiting to power ON: {result.node} reads "
             f"{result.readback.value if result.readback else 'nothing'} after "
             f"{opts.power_timeout:g} s (accepted via channel {result.channel})")
    return False


async def _off(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.capabilities import Verb
    from powerplane.channel import PowerState

    node = _need_node(opts)
    plan = await _plan(host, node, Verb.SHUTDOWN, opts)
    before = await _before(host, node, out)
    if before is None:
        return FAILED
    if before.state is PowerState.OFF:
        out.say("Success: Already OFF")
        return OK
    if plan.graceful:
        out.note(f"note: the shutdown offered for {node} is graceful (channel "
                 f"{plan.channel}): off is claimed only when the node reads off")
    await _delay(opts)
    if not _off_result(await _send(host, node, Verb.SHUTDOWN, opts), opts, out):
        return FAILED
    out.say("Success: Powered OFF")
    return OK


async def _on(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.capabilities import Verb
    from powerplane.channel import PowerState

    node = _need_node(opts)
    await _plan(host, node, Verb.POWER_ON, opts)
    before = await _before(host, node, out)
    if before is None:
        return FAILED
    if before.state is PowerState.ON:
        out.say("Success: Already ON")
        return OK
    if not _on_result(await _send(host, node, Verb.POWER_ON, opts), opts, out):
        return FAILED
    out.say("Success: Powered ON")
    return OK


async def _reboot(host: PowerHost, opts: FenceOptions, out: _Out) -> int:
    from powerplane.capabilities import Verb
    from powerplane.channel import PowerState
    from powerplane.errors import PowerplaneError

    node = _need_node(opts)
    if opts.method == "cycle":
        return await _cycle(host, node, opts, out)
    try:
        await _plan(host, node, Verb.POWER_ON, opts)
    except PowerplaneError as exc:
        # off then on would leave the machine off: the node's own reboot instead
        out.note(f"note: power-on is not available for {node} ({exc}): off then on would "
                 "leave it off; rebooting with its reboot verb instead (a power cycle)")
        return await _cycle(host, node, opts, out)
    off = await _plan(host, node, Verb.SHUTDOWN, opts)
    before = await _before(host, node, out)
    if before is None:
        return FAILED
    await _delay(opts)
    if before.state is not PowerState.OFF:
        if off.graceful:
            out.note(f"note: the shutdown offered for {node} is graceful (channel "
                     f"{off.channel}): off is claimed only when the node reads off")
        if not _off_result(await _send(host, node, Verb.SHUTDOWN, opts), opts, out):
            return FAILED
    try:
        on = await _send(host, node, Verb.POWER_ON, opts)
        powered = _on_result(on, opts, out)
    except PowerplaneError as exc:  # the off half is done: the node is fenced
        out.note(f"error: power-on of {node} after off failed: {type(exc).__name__}: {exc}")
        powered = False
    if not powered:
        out.note(f"error: {node} was fenced (read off) but did not read on again")
    out.say("Success: Rebooted")
    return OK


async def _cycle(host: PowerHost, node: str, opts: FenceOptions, out: _Out) -> int:
    """The node's reboot verb, hard only (a graceful OS restart fences nothing), read back
    on; the off in between is the device's power cycle, not observed."""
    from powerplane.capabilities import Verb
    from powerplane.channel import PowerState

    plan = await _plan(host, node, Verb.REBOOT, opts)
    if plan.graceful:
        return out.fail(f"the reboot offered for {node} (channel {plan.channel}) is graceful, "
                        "a sequenced OS restart, which does not fence a hung node; nothing "
                        "was sent")
    before = await _before(host, node, out)
    if before is None:
        return FAILED
    if before.state is PowerState.OFF:
        out.say("Success: Already OFF")
        return OK
    await _delay(opts)
    if not _on_result(await _send(host, node, Verb.REBOOT, opts), opts, out):
        return FAILED
    out.say("Success: Rebooted")
    return OK


async def _delay(opts: FenceOptions) -> None:
    if opts.delay > 0:
        await asyncio.sleep(opts.delay)


def _validate(opts: FenceOptions, ctx: click.Context, out: _Out) -> int:
    from powerplane.cli._common import load_deployment
    from powerplane.errors import UnknownNode

    deployment = load_deployment(ctx)
    node = opts.node
    if node is not None and node not in deployment.nodes:
        raise UnknownNode(node, list(deployment.nodes))
    return OK


_Run = Callable[["PowerHost", FenceOptions, _Out], Awaitable[int]]
_HOST_ACTIONS: dict[str, _Run] = {
    "status": _status,
    "monitor": _monitor,
    "list": _list,
    "list-status": _list,
    "off": _off,
    "on": _on,
    "reboot": _reboot,
}
"""Each action that needs a host, and its coroutine (the host the runtime's: the
lifecycle's guard on reboot, shutdown and terminate, as for ``powerplane invoke``)."""


def run(argv: Sequence[str] | None = None, *, stdin: IO[str] | None = None,
        stdout: IO[str] | None = None, stderr: IO[str] | None = None,
        own_process: bool = False) -> int:
    """The agent: options from ``argv`` when there are any, else from ``stdin``; the exit
    code returned."""
    from powerplane.cli._common import Interrupted
    from powerplane.errors import PowerplaneError

    args = list(sys.argv[1:] if argv is None else argv)
    source = sys.stdin if stdin is None else stdin
    out = _Out(sys.stdout if stdout is None else stdout, sys.stderr if stderr is None else stderr)
    try:
        if args:
            opts = options_of(parse_argv(args))
        elif source.isatty():
            out.note(USAGE.rstrip())
            return out.fail("no options: give them as long options, or as key=value lines "
                            "on standard input")
        else:
            opts = options_of(*parse_stdin(read_stdin(source)))
    except FenceUsage as exc:
        return out.fail(str(exc))
    except UnicodeDecodeError:
        return out.fail("the options are not UTF-8 text")
    for warning in opts.warnings:
        out.note(f"warning: {warning}")
    if opts.help:
        out.say(USAGE.rstrip())
        return OK
    if opts.version:
        from importlib.metadata import version

        out.say(f"{AGENT} (powerplane {version('powerplane')})")
        return OK
    if opts.action == "metadata":
        out.stdout.write(metadata())
        return OK
    ctx = _context(opts, own_process)
    try:
        if opts.action == "validate-all":
            return _validate(opts, ctx, out)
        action = _HOST_ACTIONS[opts.action]

        async def go() -> int:
            async with open_host(ctx, nodes=()) as host:
                return await action(host, opts, out)

        return run_async(go())
    except FenceUsage as exc:
        return out.fail(str(exc))
    except PowerplaneError as exc:
        return out.fail(f"{type(exc).__name__}: {exc}")
    except ValueError as exc:  # bad input to the host (a reason it refuses)
        return out.fail(str(exc))
    except Interrupted as exc:
        out.fail("interrupted")
        for call in exc.calls:
            out.note(f"  {call.words()}")
        return FAILED


def main() -> None:
    """Console-script entry point of ``fence_powerplane`` (SIGTERM, which the fencer sends
    at its timeout, stops it as Ctrl-C does: exit 1 with the requests in flight named)."""
    from powerplane.cli import terminate_as_interrupt

    terminate_as_interrupt()
    sys.exit(run(own_process=True))
