"""SNMPv3 USM: config protocol names to pysnmp's protocol identifiers."""

from __future__ import annotations

from typing import Any

from pysnmp.hlapi.v3arch.asyncio import auth as _auth

from powerplane_pdu.config import AuthProtocol, PrivProtocol

__all__ = ["auth_protocol", "priv_protocol"]

_AUTH: dict[AuthProtocol, Any] = {
    AuthProtocol.MD5: _auth.USM_AUTH_HMAC96_MD5,
    AuthProtocol.SHA: _auth.USM_AUTH_HMAC96_SHA,
    AuthProtocol.SHA224: _auth.USM_AUTH_HMAC128_SHA224,
    AuthProtocol.SHA256: _auth.USM_AUTH_HMAC192_SHA256,
    AuthProtocol.SHA384: _auth.USM_AUTH_HMAC256_SHA384,
    AuthProtocol.SHA512: _auth.USM_AUTH_HMAC384_SHA512,
}

_PRIV: dict[PrivProtocol, Any] = {
    PrivProtocol.DES: _auth.USM_PRIV_CBC56_DES,
    PrivProtocol.TRIPLE_DES: _auth.USM_PRIV_CBC168_3DES,
    PrivProtocol.AES: _auth.USM_PRIV_CFB128_AES,
    PrivProtocol.AES192: _auth.USM_PRIV_CFB192_AES,
    PrivProtocol.AES256: _auth.USM_PRIV_CFB256_AES,
}


def auth_protocol(proto: AuthProtocol | None) -> Any:
    """pysnmp's identifier for ``proto`` (no authentication when None)."""
    return _auth.USM_AUTH_NONE if proto is None else _AUTH[proto]


def priv_protocol(proto: PrivProtocol | None) -> Any:
    """pysnmp's identifier for ``proto`` (no privacy when None)."""
    return _auth.USM_PRIV_NONE if proto is None else _PRIV[proto]
