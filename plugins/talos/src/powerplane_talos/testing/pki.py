"""Certificates for the Talos mock and its tests: a CA, a server and clients.

Keys are Ed25519 (Talos's default) or ECDSA P-256. Ed25519 keys are written as
Talos writes them: PKCS#8 under the PEM header ``ED25519 PRIVATE KEY``; ECDSA keys as
``EC PRIVATE KEY``. A client certificate carries its Talos role as the subject's
organization (``os:admin``, ``os:reader``), as Talos's RBAC reads it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from powerplane_talos.talosconfig import normalize_key_pem

__all__ = ["Algorithm", "Pem", "issue", "load", "new_ca"]

Algorithm = Literal["ed25519", "ecdsa"]
"""Key algorithm: ``ed25519`` (Talos's default) or ``ecdsa`` (P-256)."""

_Key = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, both PEM."""

    cert: bytes
    key: bytes = field(repr=False)

    def save(self, directory: Path, stem: str) -> None:
        """Write ``stem.crt`` and ``stem.key`` (0600) under ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{stem}.crt").write_bytes(self.cert)
        key_path = directory / f"{stem}.key"
        key_path.write_bytes(self.key)
        key_path.chmod(0o600)


def load(directory: Path, stem: str) -> Pem:
    """Read back what :meth:`Pem.save` wrote."""
    return Pem((directory / f"{stem}.crt").read_bytes(), (directory / f"{stem}.key").read_bytes())


def _new_key(algorithm: Algorithm) -> _Key:
    if algorithm == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: _Key) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return pkcs8.replace(b"BEGIN PRIVATE KEY", b"BEGIN ED25519 PRIVATE KEY").replace(
            b"END PRIVATE KEY", b"END ED25519 PRIVATE KEY"
        )
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _load_key(pem: bytes) -> _Key:
    key = serialization.load_pem_private_key(normalize_key_pem(pem), password=None)
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError("expected an Ed25519 or ECDSA key")
    return key


def _sign(builder: x509.CertificateBuilder, key: _Key) -> x509.Certificate:
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(key, algo)


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return builder.not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(
        now + dt.timedelta(days=365)
    )


def new_ca(algorithm: Algorithm = "ed25519", name: str = "talos") -> Pem:
    """A self-signed CA (Talos's OS CA is named ``talos``)."""
    key = _new_key(algorithm)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    )
    cert = _sign(_validity(builder), key)
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(
    ca: Pem,
    common_name: str,
    *,
    algorithm: Algorithm = "ed25519",
    server: bool = False,
    organization: str | None = None,
    ips: tuple[str, ...] = ("127.0.0.1",),
    dns: tuple[str, ...] = ("localhost",),
) -> Pem:
    """A leaf certificate signed by ``ca``: a server (with SANs) or a client (with a role)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = _load_key(ca.key)
    key = _new_key(algorithm)
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = _sign(_validity(builder), ca_key)
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
