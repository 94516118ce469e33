"""Checking Talos PEMs at config load: each parses as what it claims, and the pair matches.

A talosconfig's or an inline config's ``ca``, ``crt`` and ``key`` are checked here, so a
certificate that is not PEM, a key that does not parse (or is passphrase-protected),
or a key that is not the certificate's is a config error before any channel is made.
Messages name the field, never a value. Imported only when a config is validated, so
plugin discovery does not import ``cryptography``.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from powerplane_talos.talosconfig import Credentials, normalize_key_pem

__all__ = ["check_ca", "check_certificate", "check_credentials", "check_key", "check_pair"]

_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def check_ca(pem: bytes, what: str) -> None:
    """``pem`` holds one or more PEM certificates (the Talos OS CA)."""
    try:
        found = x509.load_pem_x509_certificates(pem)
    except ValueError:
        found = []
    if not found:
        raise ValueError(f"{what} is not a PEM certificate (expected the Talos OS CA)")


def check_certificate(pem: bytes, what: str) -> x509.Certificate:
    """``pem`` holds a PEM certificate (the client certificate); it, parsed."""
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise ValueError(f"{what} is not a PEM certificate") from None


def check_key(pem: bytes, what: str) -> PrivateKeyTypes:
    """``pem`` holds an unencrypted PEM private key (Talos's header accepted); it, parsed."""
    try:
        return serialization.load_pem_private_key(normalize_key_pem(pem), password=None)
    except TypeError:
        raise ValueError(
            f"{what} is encrypted; give the unencrypted key (Talos keys have no passphrase)"
        ) from None
    except UnsupportedAlgorithm:
        raise ValueError(f"{what} uses a key algorithm this system cannot load") from None
    except ValueError:
        raise ValueError(f"{what} is not a PEM private key") from None


def check_pair(crt: x509.Certificate, key: PrivateKeyTypes, what: str) -> None:
    """The key is the private half of the certificate's public key."""
    if crt.public_key().public_bytes(*_SPKI) != key.public_key().public_bytes(*_SPKI):
        raise ValueError(f"{what} is not the private key of the client certificate 'crt'")


def check_credentials(creds: Credentials) -> None:
    """Every PEM of ``creds`` parses, and its key matches its certificate."""
    check_ca(creds.ca, f"{creds.source}: 'ca'")
    if creds.crt is not None and creds.key is not None:
        crt = check_certificate(creds.crt, f"{creds.source}: 'crt'")
        key = check_key(creds.key, f"{creds.source}: 'key'")
        check_pair(crt, key, f"{creds.source}: 'key'")
