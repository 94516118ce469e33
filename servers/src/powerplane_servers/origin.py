"""The ``Origin`` check of the auth-proxy mode: an unsafe request a browser sent from
another site is refused.

In the auth-proxy mode the identity comes from headers the proxy adds, and the browser
holds the proxy's credential (its cookie, a client certificate): any page the browser
opens could make it send a request the proxy would vouch for. So every unsafe method
(``POST``, ``PUT``, ``PATCH``, ``DELETE``) authenticated by the proxy is checked:

- ``Origin`` present: it must be the surface's own (its host and port those of the
  request's ``Host``) or one of ``proxy.allowed_origins``; else 403. ``Origin: null``
  (a sandboxed frame, a redirect across origins) is refused.
- ``Origin`` absent: browsers send it on every unsafe request (Fetch standard), so a
  request without it is a browser's only if it says so otherwise: ``Sec-Fetch-Site``
  other than ``same-origin`` is refused; a ``Cookie`` header without ``Sec-Fetch-Site``
  (an old browser carrying an ambient credential) is refused; a request with neither
  (a script, ``curl``: no credential a third site could borrow) is accepted.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping

__all__ = ["origin_refusal"]


def _netloc(origin: str) -> str:
    parsed = urllib.parse.urlsplit(origin.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return ""
    default = 443 if parsed.scheme == "https" else 80
    port = parsed.port or default
    return f"{parsed.hostname.lower()}:{port}"


def _host(host: str, scheme: str) -> str:
    default = 443 if scheme == "https" else 80
    parsed = urllib.parse.urlsplit(f"//{host.strip()}")
    try:
        port = parsed.port
    except ValueError:
        return ""
    if not parsed.hostname:
        return ""
    return f"{parsed.hostname.lower()}:{port or default}"


def origin_refusal(headers: Mapping[str, str], allowed: Iterable[str]) -> str | None:
    """Why an unsafe request with these headers is refused (see the module docstring), or
    None."""
    origin = headers.get("origin")
    fetch_site = headers.get("sec-fetch-site")
    if origin is not None:
        seen = _netloc(origin)
        if seen:
            if seen in {_netloc(a) for a in allowed}:
                return None
            host = headers.get("host") or ""
            # behind a TLS-terminating proxy the browser's scheme is not ours: the host
            # and port are compared, the port defaulted by the Origin's own scheme
            if seen in {_host(host, "http"), _host(host, "https")}:
                return None
        return ("an unsafe request from another origin (its Origin is not this surface's "
                "nor one of proxy.allowed_origins)")
    if fetch_site is not None:
        if fetch_site == "same-origin":
            return None
        return (f"an unsafe request a browser sent from {fetch_site} without an Origin "
                "header")
    if headers.get("cookie") is not None:
        return ("an unsafe request carrying cookies without an Origin or Sec-Fetch-Site "
                "header (a browser's must carry one)")
    return None
