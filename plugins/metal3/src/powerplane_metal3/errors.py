"""What the ``metal3`` channel meets (lightkube's ``ApiError``, httpx2's transport errors, an
answer that is not a BareMetalHost), mapped into powerplane's tree.

``writing``: the request changes the BareMetalHost (a ``PATCH`` of ``spec.online`` or of
an annotation), so no answer once it may have left is :class:`~powerplane.OutcomeUnknown`.

=================================================================  ==========================
what happened                                                      powerplane class
=================================================================  ==========================
HTTP 401, 403 (the kubeconfig's user is not known, or not allowed) ``AuthenticationFailed``
HTTP 404 (no such BareMetalHost; the metal3.io API not installed)  ``RefusedByDevice``
HTTP 409 on a write (the host changed since it was read; not       ``RefusedByDevice``
applied), after the channel's own retries
any other 4xx, any 5xx (422 the CRD's schema, 429 throttled, ...)  ``RefusedByDevice``
connection refused, DNS failure (``ConnectError``)                 ``Unreachable``
the API server's certificate did not verify                        ``TLSVerificationFailed``
no connection in time (``ConnectTimeout``, ``PoolTimeout``)        ``ChannelTimeout``
a write timed out or dropped after it may have left                ``OutcomeUnknown``
a read timed out (``ReadTimeout``, ``WriteTimeout``)               ``ChannelTimeout``
any other transport failure of a read                              ``ProtocolError``
an answer that is not the JSON the API defines (``ValueError``)    ``ProtocolError``
=================================================================  ==========================

The rows are core's one rule for status codes (``powerplane.status_error``; the
certificate row ``powerplane.is_tls_failure``): 401 and 403 are
``AuthenticationFailed``, every other 4xx and every 5xx ``RefusedByDevice`` with the API
server's own message. Messages name the BareMetalHost and the API server's words, never a
token (the kubeconfig's credentials are not in any exception text lightkube or httpx2 make).
"""

from __future__ import annotations

import httpx2

from powerplane import (
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    TLSVerificationFailed,
    Unreachable,
    is_tls_failure,
    status_error,
)
from powerplane_kubernetes.errors import answer_of

__all__ = ["map_error", "raise_mapped"]


def map_error(exc: BaseException, *, writing: bool = False) -> type[ChannelError]:
    """The powerplane class for one failure of a request to the API server."""
    answer = answer_of(exc)
    if answer is not None:
        return status_error(answer.code) if 400 <= answer.code <= 599 else ProtocolError
    if isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout):
        return ChannelTimeout  # no connection: nothing left
    if isinstance(exc, httpx2.ConnectError):
        return TLSVerificationFailed if is_tls_failure(exc) else Unreachable
    if writing and isinstance(exc, httpx2.HTTPError | OSError):
        return OutcomeUnknown  # it may have been written: it may have been applied
    if isinstance(exc, httpx2.TimeoutException):
        return ChannelTimeout
    if isinstance(exc, OSError):
        return Unreachable
    return ProtocolError


def raise_mapped(exc: BaseException, what: str, *, channel: str, target: object,
                 writing: bool = False) -> ChannelError:
    """The error to raise ``from exc`` for ``what`` ("reading BareMetalHost m/h0")."""
    cls = map_error(exc, writing=writing)
    answer = answer_of(exc)
    if answer is not None:
        words = f": {answer.message}" if answer.message else ""
        text = f"{what}: HTTP {answer.code} {answer.reason}{words}".rstrip()
    else:
        text = f"{what}: {type(exc).__name__}"
        detail = str(exc).strip()
        if detail and cls is not OutcomeUnknown:
            text += f" ({detail[:200]})"
    return cls(text, channel=channel, target=target)
