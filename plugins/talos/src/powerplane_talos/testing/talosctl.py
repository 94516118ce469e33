"""A stand-in for ``talosctl`` -- A TEST TOOL, NOT TALOSCTL.

It accepts the subset of talosctl's argv that the plugin's talosctl transport uses
and calls the Talos mock (or any Talos API) through the plugin's gRPC transport::

    talosctl-standin --talosconfig PATH [--context C] --nodes N reboot [--mode M] [--wait=false]
    talosctl-standin --talosconfig PATH [--context C] --nodes N shutdown [--force=B] [--wait=false]
    talosctl-standin --talosconfig PATH [--context C] --nodes N version

Failures go to stderr the way talosctl prints them (``rpc error: code = Unavailable
desc = ...``) with exit status 1, so the transport's stderr mapping is exercised end
to end. Real talosctl is not obtainable from any package registry here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    Timeouts,
    TLSVerificationFailed,
    Unreachable,
)
from powerplane_talos.config import RebootMode
from powerplane_talos.grpc_transport import GrpcTransport
from powerplane_talos.talosconfig import load_talosconfig

__all__ = ["go_style", "main"]

BANNER = "talosctl-standin: a TEST TOOL standing in for talosctl (it is not talosctl)"


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "1", "t"):
        return True
    if low in ("false", "0", "f"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def go_style(exc: ChannelError) -> str:
    """The error as talosctl would print it (gRPC-go's status text)."""
    text = exc.message
    if isinstance(exc, TLSVerificationFailed):
        return ('rpc error: code = Unavailable desc = connection error: desc = "transport: '
                'authentication handshake failed: tls: failed to verify certificate: '
                f'x509: {text}"')
    if isinstance(exc, AuthenticationFailed):
        if "permission denied" in text:
            return f"rpc error: code = PermissionDenied desc = {text}"
        if "unauthenticated" in text:
            return f"rpc error: code = Unauthenticated desc = {text}"
        return ('rpc error: code = Unavailable desc = connection error: desc = "transport: '
                f'authentication handshake failed: {text}"')
    if isinstance(exc, Unreachable):
        return f"rpc error: code = Unavailable desc = {text}"
    if isinstance(exc, ChannelTimeout | OutcomeUnknown):
        return f"rpc error: code = DeadlineExceeded desc = {text}"
    return f"rpc error: code = Unknown desc = {text}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="talosctl-standin", description=BANNER)
    parser.add_argument("--talosconfig", required=True)
    parser.add_argument("--context", default=None)
    parser.add_argument("-n", "--nodes", required=True)
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="stand-in only: deadline of the call (half of it for connecting)")
    sub = parser.add_subparsers(dest="command", required=True)
    reboot = sub.add_parser("reboot")
    reboot.add_argument("-m", "--mode", choices=[m.value for m in RebootMode],
                        default="default")
    reboot.add_argument("--wait", type=_bool, default=True)
    shutdown = sub.add_parser("shutdown")
    shutdown.add_argument("--force", type=_bool, default=False)
    shutdown.add_argument("--wait", type=_bool, default=True)
    sub.add_parser("version")
    return parser


async def _run(args: argparse.Namespace) -> str:
    creds = load_talosconfig(args.talosconfig, args.context)
    transport = GrpcTransport("talosctl-standin", creds,
                              Timeouts(connect_s=args.timeout / 2, read_s=args.timeout / 2))
    node = args.nodes.split(",")[0]
    try:
        if args.command == "reboot":
            await transport.reboot(node, RebootMode(args.mode))
            return ""
        if args.command == "shutdown":
            await transport.shutdown(node, args.force)
            return ""
        tag = await transport.version(node)
        return (f"Client:\n\tTag:         standin\nServer:\n\tNODE:        {node}\n"
                f"\tTag:         {tag}\n")
    finally:
        await transport.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``talosctl-standin`` and ``python -m powerplane_talos.testing.talosctl``."""
    args = _parser().parse_args(argv)
    try:
        out = asyncio.run(_run(args))
    except ValueError as exc:
        print(f"{BANNER}\nerror: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except ChannelError as exc:
        print(f"{BANNER}\nerror executing {args.command}: 1 error occurred:\n"
              f"\t* {args.nodes}: {go_style(exc)}", file=sys.stderr)
        raise SystemExit(1) from None
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
