"""The Servers surface: ``powerplane serve``, an HTTP API and a page under the deployment's
authority (its policy, its audit, its lifecycle's store).

Modules, top first (each imports only those below it; an import contract in the
workspace's ``pyproject.toml``): ``cli`` (the command); ``app`` (the ASGI application:
routes, problem documents, who is asking); ``session`` (the page's login: code flow with
PKCE); ``auth`` (OIDC bearer tokens, Kubernetes TokenReview, the auth proxy), ``surface`` (the
deployment served: host, lifecycle, local runner, or the gateway acting as the caller);
``gateway`` (Kubernetes mode's seam: the plugin's gateway, by entry point); ``guards``
(headers and the body limit), ``models``, ``origin`` (the auth-proxy mode's ``Origin``
check), ``problems``, ``ratelimit`` (a token bucket per identity, bounded), ``settings``.
"""
