"""``powerplane operator``: ``run`` (the operator's loop) and ``manifests`` (what installs it).

Added to the ``powerplane`` command by the ``powerplane.cli`` entry point ``operator`` of
this distribution. Exit codes as every powerplane command: 0 done (``--until-idle``:
nothing can advance), 1 a device, channel or the API server failed, 2 bad input: among
it every timing that is not a finite number at or above its minimum (NaN and infinities
too), an empty ``--context``, and a kubeconfig that cannot be used (named).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["operator_group"]


class Seconds(click.ParamType[float]):
    """A finite number of seconds at or above ``minimum``: NaN, an infinity or a number
    below it is a usage error naming the option (click's ``FloatRange`` lets NaN through:
    every comparison with it is false)."""

    name = "seconds"

    def __init__(self, minimum: float) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if number < self.minimum:
            self.fail(f"{value!r} is below the minimum of {self.minimum:g} s", param, ctx)
        return number


def _not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("an empty context names none (leave the option out to "
                                 "use the kubeconfig's current context)", ctx, param)
    return value


@click.group("operator", context_settings={"help_option_names": ["-h", "--help"]})
def operator_group() -> None:
    """The maintenance lifecycle as an operator on the cluster API."""


@operator_group.command("manifests")
@click.option("--namespace", default="powerplane-system", show_default=True,
              help="The operator's namespace (its Namespace, ServiceAccount, Deployment and "
              "leases).")
@click.option("--image", default="powerplane:0.1.0", show_default=True,
              help="The operator's container image (`./dev image` builds this tag).")
@click.option("--replicas", type=click.IntRange(1), default=2, show_default=True,
              help="Replicas of the operator's Deployment (one per site acts: the Lease "
              "holder; the others stand by).")
@click.option("--store-namespace", default=None,
              help="lifecycle.store.namespace (the node locks and Events of `maintenance "
              "request`); absent: the deployment file's, else --namespace.")
@click.option("--server", "server", is_flag=True,
              help="Also print `powerplane serve`'s ServiceAccount and roles (Kubernetes "
              "mode: TokenReview, reads, no Node or NodeMaintenance write; the "
              "impersonation role unbound).")
@click.pass_context
def manifests_cmd(ctx: click.Context, namespace: str, image: str, replicas: int,
                  store_namespace: str | None, server: bool) -> None:
    """Print the Namespace, CRDs, ServiceAccount, RBAC and Deployment as one multi-document
    YAML, and the roles of who runs `powerplane maintenance request` (unbound). The
    deployment file (--config, else $POWERPLANE_CONFIG, else ./powerplane.yaml when it
    exists) decides the Secrets granted and the writable volume; one that cannot run in the
    cluster (a SQLite store, a state_file outside /var/lib/powerplane) is exit 2."""
    import yaml

    from powerplane import PowerplaneError, load_config
    from powerplane.cli.kit import config_path
    from powerplane_kubernetes.operator.manifests import (
        MAINTAINER_LOCKS,
        crd_missing,
        manifests,
        server_manifests,
    )

    missing = crd_missing()
    if missing is not None:
        click.echo(f"note: {missing}", err=True)
    given = config_path(ctx)  # as every command finds it: --config, $POWERPLANE_CONFIG, ./
    path = Path(given or os.environ.get("POWERPLANE_CONFIG") or "powerplane.yaml")
    try:
        deployment = load_config(path) if given or path.exists() else None
        if deployment is None:
            click.echo(f"note: no deployment file ({path} does not exist): no Secret is "
                       "granted and no writable volume mounted", err=True)
        docs = manifests(namespace, image, replicas=replicas, store_namespace=store_namespace,
                         deployment=deployment)
        if server:
            locks = next((d["metadata"]["namespace"] for d in docs
                          if d["metadata"]["name"] == MAINTAINER_LOCKS), None)
            docs += server_manifests(namespace, locks)
    except PowerplaneError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True), nl=False)


@operator_group.command("run")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A kubeconfig for the leases and the store (it must exist); absent: "
              "lifecycle.cluster's kubeconfig, else as kubectl: in the cluster the pod's "
              "service account, else $KUBECONFIG, else ~/.kube/config.")
@click.option("--context", "kube_context", default=None, callback=_not_empty,
              help="The kubeconfig context (absent: its current context).")
@click.option("--site", "sites", multiple=True,
              help="A site this replica may act for (repeatable); absent: every site.")
@click.option("--until-idle", is_flag=True,
              help="Reconcile until nothing can advance, then exit 0 (scripts, tests).")
@click.option("--namespace", default=lambda: os.environ.get("POD_NAMESPACE", "powerplane-system"),
              show_default="$POD_NAMESPACE or powerplane-system",
              help="The namespace of the site leases.")
@click.option("--identity", default=None,
              help="This replica's lease holder identity; default $POD_NAME, else host-pid.")
@click.option("--http-port", type=click.IntRange(0, 65535), default=None,
              help="Serve /metrics, /healthz and /readyz on this port (0: a free one).")
@click.option("--http-host", default="0.0.0.0", show_default=True,
              help="The address --http-port serves /metrics, /healthz and /readyz on.")
@click.option("--lease-duration", type=Seconds(0.1), default=15.0,
              show_default=True, help="Seconds a lease is held without renewal.")
@click.option("--renew-deadline", type=Seconds(0.05), default=10.0,
              show_default=True,
              help="Seconds after the last renewal after which this replica stops acting.")
@click.option("--retry-period", type=Seconds(0.01), default=2.0,
              show_default=True, help="Seconds between renewals and acquire attempts.")
@click.option("--interval", type=Seconds(0.01), default=1.0, show_default=True,
              help="Seconds before a waiting maintenance is reconciled again; the store's poll "
                   "period when there is nothing to watch (SQLite).")
@click.option("--resync", type=Seconds(0.01), default=30.0, show_default=True,
              help="Seconds between full scans beside the watch's events (parked ones too).")
@click.option("--max-in-flight", type=click.IntRange(1), default=10, show_default=True,
              help="Maintenances driven at once per replica.")
@click.option("--timeout", type=Seconds(0.0), default=None,
              help="--until-idle: give up (exit 1) after this many seconds.")
@click.pass_context
def run_cmd(ctx: click.Context, kubeconfig: str | None, kube_context: str | None,
            sites: tuple[str, ...], until_idle: bool, namespace: str, identity: str | None,
            http_port: int | None, http_host: str, lease_duration: float,
            renew_deadline: float, retry_period: float, interval: float, resync: float,
            max_in_flight: int, timeout: float | None) -> None:
    """Watch NodeMaintenance objects and drive each through the lifecycle's Reconciler."""
    from powerplane_kubernetes.operator.run import OperatorOptions, main

    if renew_deadline >= lease_duration:
        click.echo("error: --renew-deadline must be shorter than --lease-duration "
                   f"({renew_deadline} >= {lease_duration})", err=True)
        sys.exit(2)
    if retry_period >= renew_deadline:
        click.echo("error: --retry-period must be shorter than --renew-deadline "
                   f"({retry_period} >= {renew_deadline})", err=True)
        sys.exit(2)
    root = ctx.find_root().obj or {}
    options = OperatorOptions(
        config=root.get("config"), kubeconfig=kubeconfig, context=kube_context,
        sites=tuple(sites), until_idle=until_idle, namespace=namespace,
        identity=identity or os.environ.get("POD_NAME") or f"{os.uname().nodename}-{os.getpid()}",
        http_port=http_port, http_host=http_host, lease_duration=lease_duration,
        renew_deadline=renew_deadline, retry_period=retry_period, interval=interval,
        max_in_flight=max_in_flight, timeout=timeout, resync=resync,
    )
    sys.exit(main(options))
