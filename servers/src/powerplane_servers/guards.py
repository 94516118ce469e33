"""What every response and request passes through: security headers and the body limit
(the per-identity rate limit is :mod:`.ratelimit`)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "BodyLimit", "SecurityHeaders"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
       "form-action 'self'")
"""No inline script, no other origin, never framed."""


class SecurityHeaders:
    """CSP, nosniff, no framing, no referrer; HSTS when served over TLS; no caching of the
    API's answers."""

    def __init__(self, app: ASGIApp, *, tls: bool) -> None:
        self.app = app
        self.tls = tls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {k.lower() for k, _ in headers}
                add = [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
                ]
                if self.tls:
                    add.append((b"strict-transport-security", b"max-age=31536000"))
                if path.startswith("/api/") or path.startswith("/auth/"):
                    add.append((b"cache-control", b"no-store"))
                headers.extend((k, v) for k, v in add if k not in have)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _problem(status: int, title: str, detail: str) -> bytes:
    return json.dumps({"type": "about:blank", "title": title, "status": status,
                       "detail": detail, "cause": "usage", "error": "RequestTooLarge",
                       "exitCode": 2}).encode()


class BodyLimit:
    """Refuses a request body over ``limit`` bytes (413, a problem document), by its
    Content-Length or, for a chunked one, as it arrives."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    size = self.limit + 1
                if size > self.limit:
                    await self._refuse(send)
                    return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = _problem(413, "Request body too large",
                        f"the body is over the limit of {self.limit} bytes")
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/problem+json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"content-security-policy", CSP.encode()),
                                (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
