"""What the PDU drivers meet (pysnmp, httpx, HTTP status codes), mapped into powerplane's tree.

Every failure of the SNMP and the Redfish driver goes through :func:`map_error`, which
returns the most specific class of powerplane's tree; the driver raises it ``from`` the
original with a message naming the PDU. ``switching``: the request changes an outlet (an
SNMP SET, a Redfish ``#Outlet.PowerControl`` POST). The table:

================================================================  ==========================
what happened                                                      powerplane class
================================================================  ==========================
SNMP: no response to a GET (host down; v1/v2c: also a wrong        ``ChannelTimeout``
community, the agent is silent)
SNMP: no response to a SET (it left and may have been applied)     ``OutcomeUnknown``
SNMP: v3 wrong digest, unknown user or security name, decryption   ``AuthenticationFailed``
failure, unsupported security level, not in time window, unknown
community
SNMP: any other error indication (parse error, ...)                ``ProtocolError``
SNMP: an error status in the response (notWritable, genErr, ...)   ``RefusedByDevice``
SNMP: the address cannot be resolved; a socket error (``OSError``) ``Unreachable``
SNMP: any other pysnmp error (``PySnmpError``)                     ``ProtocolError``
HTTP: connection refused, DNS failure (``ConnectError``)           ``Unreachable``
HTTP: the certificate did not verify                               ``TLSVerificationFailed``
HTTP: no connection in time (``ConnectTimeout``, ``PoolTimeout``)  ``ChannelTimeout``
HTTP: no answer in time to a read (``ReadTimeout``,                ``ChannelTimeout``
``WriteTimeout``)
HTTP: a switching POST timed out or its connection dropped after   ``OutcomeUnknown``
it may have been written (any other ``httpx.HTTPError``)
HTTP: any other httpx failure of a read (``ReadError``,            ``ProtocolError``
``RemoteProtocolError``, ``TooManyRedirects``, ...)
HTTP 401, 403                                                      ``AuthenticationFailed``
HTTP other 4xx (404 no such outlet, 409 locked, ...)               ``RefusedByDevice``
HTTP 5xx (503 relay board busy, ...)                               ``RefusedByDevice``
a body that is not JSON, or not an object                          ``ProtocolError``
================================================================  ==========================

The HTTP rows are core's one rule for status codes (``powerplane.status_error``; the
certificate row ``powerplane.is_tls_failure``): 401 and 403
are ``AuthenticationFailed``; every other 4xx and every 5xx is ``RefusedByDevice`` with the
PDU's own message (the PDU, or the service in front of it, answered: it is not
``Unreachable``); a state-changing request dropped or timed out after it was written is
``OutcomeUnknown``, whatever an earlier attempt answered. A session is re-opened once on a
401 (a 401 was not applied); a 403 is not retried.

No message carries a community, a key or a password: the drivers name the PDU by its
feed and endpoint, and the error indication by its class.
"""

from __future__ import annotations

import httpx
from pysnmp.error import PySnmpError
from pysnmp.proto import errind

from powerplane import (
    AuthenticationFailed,
    ChannelError,
    ChannelTimeout,
    OutcomeUnknown,
    ProtocolError,
    TLSVerificationFailed,
    Unreachable,
    is_tls_failure,
    status_error,
)

__all__ = ["SNMP_AUTH_INDICATIONS", "map_error"]

SNMP_AUTH_INDICATIONS: tuple[type[errind.ErrorIndication], ...] = (
    errind.WrongDigest,
    errind.UnknownUserName,
    errind.AuthenticationFailure,
    errind.AuthenticationError,
    errind.DecryptionError,
    errind.UnknownSecurityName,
    errind.UnsupportedSecurityLevel,
    errind.UnknownCommunityName,
    errind.NotInTimeWindow,
)
"""The pysnmp error indications that mean the credentials were not accepted."""


def map_error(
    error: BaseException | errind.ErrorIndication | int, *, switching: bool = False
) -> type[ChannelError]:
    """The powerplane class for one failure of a PDU driver.

    ``error``: an HTTP error status, an ``httpx`` exception, a pysnmp error indication,
    a ``PySnmpError`` or an ``OSError``. ``switching``: the request changes an outlet, so
    no answer once it may have left is :class:`~powerplane.OutcomeUnknown`.
    """
    if isinstance(error, bool):
        raise TypeError("map_error takes a status code, an exception or an error indication")
    if isinstance(error, int):
        return status_error(error)
    if isinstance(error, errind.ErrorIndication):
        if isinstance(error, errind.RequestTimedOut):
            return OutcomeUnknown if switching else ChannelTimeout
        if isinstance(error, SNMP_AUTH_INDICATIONS):
            return AuthenticationFailed
        return ProtocolError
    if isinstance(error, httpx.HTTPError):
        return _map_httpx(error, switching)
    if isinstance(error, PySnmpError):
        return ProtocolError
    if isinstance(error, OSError):
        return Unreachable
    return ProtocolError


def _map_httpx(error: httpx.HTTPError, switching: bool) -> type[ChannelError]:
    if isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ChannelTimeout  # no connection: nothing left
    if isinstance(error, httpx.ConnectError):
        return TLSVerificationFailed if is_tls_failure(error) else Unreachable
    if switching:
        return OutcomeUnknown  # it may have been written: it may have been applied
    if isinstance(error, httpx.TimeoutException):
        return ChannelTimeout
    return ProtocolError
