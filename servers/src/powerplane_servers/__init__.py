"""The Servers surface: ``powerplane serve``, an HTTP API and a page under the deployment's
authority (its policy, its audit, its lifecycle's store).

Modules, top first (each imports only those below it; an import contract in the
workspace's ``pyproject.toml``): ``cli`` (the command); ``app`` (the ASGI application,
only assembled: settings, state, middleware, routers, static files), ``demo`` (the demo
fleet and issuer); ``routes`` (an ``APIRouter`` per resource: the session and page,
servers, maintenances, audit); ``deps`` (who is asking, as FastAPI dependencies:
authentication, the identity, the rate limits, the ``Origin`` check), ``errors`` (every
error as a problem document); ``session`` (the page's sessions and logins under way);
``auth`` (OIDC bearer tokens, Kubernetes TokenReview, the auth proxy), ``surface`` (the
deployment served: host, lifecycle, local runner, or the gateway acting as the caller);
``gateway`` (Kubernetes mode's seam: the plugin's gateway, by entry point); ``actions``
(every entry point and its action), ``guards`` (headers and the body limit), ``models``,
``origin`` (the auth-proxy mode's ``Origin`` check), ``problems``, ``ratelimit`` (a token
bucket per identity, bounded), ``settings``.
"""
