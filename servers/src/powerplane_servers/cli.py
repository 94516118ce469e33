"""``powerplane serve``: the Servers surface on uvicorn.

Plain HTTP only on a loopback address: any other bind address needs ``--tls-cert`` and
``--tls-key``, or ``--insecure-bind-anywhere`` (behind a TLS-terminating proxy).
"""

from __future__ import annotations

import functools
import sys

import click

from powerplane.cli.kit import config_path, handle_errors

__all__ = ["serve_cmd"]


@click.command("serve")
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8480, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on.")
@click.option("--settings", "settings_file", type=click.Path(dir_okay=False),
              help="The surface's settings (oidc:, proxy:, limits:) as YAML.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False),
              help="TLS certificate file (PEM, with its chain).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False),
              help="TLS private key file (PEM).")
@click.option("--insecure-bind-anywhere", is_flag=True,
              help="Serve plain HTTP on a non-loopback address (a proxy terminates TLS).")
@click.option("--demo", is_flag=True,
              help="Serve a demo fleet of simulated machines with a loopback OIDC issuer and "
                   "two users (an admin, a cordon-only engineer); prints the URL and logins.")
@click.option("--no-runner", is_flag=True,
              help="Record maintenances only; another process runs them "
                   "(`powerplane maintenance run`).")
@click.pass_context
@handle_errors
def serve_cmd(ctx: click.Context, bind: str, port: int, settings_file: str | None,
              tls_cert: str | None, tls_key: str | None, insecure_bind_anywhere: bool,
              demo: bool, no_runner: bool) -> None:
    """The Servers surface: an HTTP API under /api/v1 and a page, under the deployment's
    policy and audit (the identity from OIDC tokens, the page's login or an auth proxy).
    With the kubernetes lifecycle store: a gateway client of the NodeMaintenance API that
    acts as its caller (bearer tokens reviewed by the API server's TokenReview)."""
    import contextlib
    import tempfile
    from pathlib import Path

    import uvicorn

    from powerplane import ConfigError, ConfigProblem, load_config
    from powerplane_servers.app import create_app
    from powerplane_servers.auth import is_loopback
    from powerplane_servers.settings import load_settings
    from powerplane_servers.surface import open_surface

    if (tls_cert is None) != (tls_key is None):
        click.echo("error: --tls-cert and --tls-key go together", err=True)
        sys.exit(2)
    tls = tls_cert is not None
    if not tls and not is_loopback(bind) and not insecure_bind_anywhere:
        click.echo(f"error: plain HTTP on {bind} would carry tokens and sessions in the "
                   "clear: give --tls-cert and --tls-key, or bind a loopback address, or "
                   "--insecure-bind-anywhere behind a TLS-terminating proxy", err=True)
        sys.exit(2)
    with contextlib.ExitStack() as stack:
        if demo:
            from powerplane_servers.demo import USERS, demo_fleet, demo_issuer

            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="powerplane-serve-demo-")))
            config: str | None = str(demo_fleet(folder))
            issuer, settings = stack.enter_context(demo_issuer())
        else:
            config = config_path(ctx)
            try:
                settings = load_settings(settings_file)
            except (OSError, ValueError) as exc:
                click.echo(f"error: --settings {settings_file}: {exc}", err=True)
                sys.exit(2)
        deployment = load_config(config)
        store = (deployment.lifecycle or {}).get("store")
        kube = isinstance(store, dict) and store.get("type") == "kubernetes"
        if settings.oidc is None and settings.proxy is None and not kube:
            click.echo("error: no way to authenticate: give --settings with an oidc: or "
                       "proxy: section (or serve a deployment whose lifecycle store is "
                       "{type: kubernetes}: its API server's TokenReview)", err=True)
            sys.exit(2)
        if not (deployment.lifecycle or "lifecycle" in (deployment.raw or {})):
            raise ConfigError([ConfigProblem(
                "lifecycle", "this deployment has no lifecycle: section, and `powerplane "
                "serve` records maintenances in its store (for example: lifecycle: {store: "
                "./powerplane.db, cluster: {type: simulated}})")], source=deployment.source)
        opener = functools.partial(open_surface, config,
                                   runner=settings.runner == "local" and not no_runner,
                                   kubernetes=settings.kubernetes)
        app = create_app(settings, opener, tls=tls)
        scheme = "https" if tls else "http"
        url = f"{scheme}://{bind}:{port}/"
        click.echo(f"serving on {url} (API: /api/v1, OpenAPI: /api/v1/openapi.json)")
        if demo:
            click.echo(f"demo issuer {issuer}; open {url} and log in (the issuer asks for a "
                       "user name, no password):")
            for user, groups in USERS.items():
                what = ("an admin: every action" if "plant-admins" in groups
                        else "a maintenance engineer: cordon and uncordon only")
                click.echo(f"  {user}  ({what})")
        sys.stdout.flush()
        uvicorn.run(app, host=bind, port=port, ssl_certfile=tls_cert, ssl_keyfile=tls_key,
                    log_level="warning", access_log=False, server_header=False,
                    proxy_headers=False, h11_max_incomplete_event_size=64 * 1024)
