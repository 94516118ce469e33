"""Throwaway certificate authorities and the certificates they sign, as files.

One implementation for every peer: HTTPS emulators (ECDSA P-256 or RSA server
certificates with IP and DNS names) and mutual-TLS peers such as Talos (Ed25519 keys,
client certificates whose subject organization carries a role). ``cryptography`` is
imported only when a certificate is made, so importing this module needs nothing beyond
the standard library.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    _Key = Ed25519PrivateKey | EllipticCurvePrivateKey | RSAPrivateKey

__all__ = ["KeyAlgorithm", "KeyFormat", "TLSFiles", "issue_cert", "make_ca"]

KeyAlgorithm = Literal["ecdsa", "ed25519", "rsa"]
"""A key type: ``ecdsa`` (P-256, signed with SHA-256), ``ed25519``, ``rsa`` (2048 bits)."""

KeyFormat = Literal["pkcs8", "traditional"]
"""How a private key is written: PKCS#8 (``PRIVATE KEY``), or OpenSSL's traditional form
(``EC PRIVATE KEY``, ``RSA PRIVATE KEY``; Ed25519 has none and is written as PKCS#8)."""

_STANDARD_LABELS = (b"PRIVATE KEY", b"EC PRIVATE KEY", b"RSA PRIVATE KEY")
_PEM_LABEL = re.compile(rb"-----(BEGIN|END) ([A-Z0-9 ]+)-----")


@dataclass(frozen=True)
class TLSFiles:
    """A certificate, its private key and the CA certificate that signed it, as PEM files."""

    cert: Path
    """The certificate (for a CA: itself, the bundle a client verifies against)."""
    key: Path
    """Its private key (unencrypted PEM, mode 0600)."""
    ca: Path
    """The certificate of the CA that signed it (for a CA: the same file as ``cert``)."""

    def cert_pem(self) -> bytes:
        """The certificate's PEM bytes."""
        return self.cert.read_bytes()

    def key_pem(self) -> bytes:
        """The private key's PEM bytes."""
        return self.key.read_bytes()


def make_ca(
    directory: Path,
    label: str = "powerplane-test",
    *,
    algorithm: KeyAlgorithm = "ecdsa",
    common_name: str | None = None,
    organization: str | None = None,
    key_format: KeyFormat = "pkcs8",
    key_label: str | None = None,
    days: int = 365,
) -> TLSFiles:
    """A self-signed CA: writes ``<label>-ca.pem`` and ``<label>-ca.key`` in ``directory``.

    Its subject is ``common_name`` (default ``"<label> CA"``) and, if given, the
    ``organization`` (Talos names its OS CA ``O=talos``). ``key_label`` replaces the PEM
    label of the key file (Talos writes Ed25519 keys as ``ED25519 PRIVATE KEY``).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    key = _new_key(algorithm)
    subject = _subject(common_name if common_name is not None else f"{label} CA", organization)
    builder = (
        _validity(x509.CertificateBuilder(), days)
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(ca=True, algorithm=algorithm), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
    )
    cert = _sign(builder, key)
    files = TLSFiles(cert=directory / f"{label}-ca.pem", key=directory / f"{label}-ca.key",
                     ca=directory / f"{label}-ca.pem")
    _write(files, cert.public_bytes(serialization.Encoding.PEM),
           _key_pem(key, key_format, key_label))
    return files


def issue_cert(
    ca: TLSFiles,
    directory: Path,
    names: Sequence[str] = ("127.0.0.1", "localhost"),
    *,
    stem: str = "server",
    common_name: str | None = None,
    organization: str | None = None,
    client: bool = False,
    algorithm: KeyAlgorithm = "ecdsa",
    key_format: KeyFormat = "pkcs8",
    key_label: str | None = None,
    days: int = 365,
) -> TLSFiles:
    """A leaf certificate signed by ``ca``: writes ``<stem>.pem`` and ``<stem>.key``.

    ``names`` become the subject alternative names (an IP address where one parses, else
    a DNS name); the common name defaults to the first of them (else ``stem``). A server
    certificate (the default) is for TLS server authentication; with ``client`` it is for
    client authentication instead, and ``organization`` carries the client's role (Talos
    reads ``os:admin``/``os:reader`` there). ``ca`` may use any :data:`KeyAlgorithm`,
    independent of ``algorithm``; ``key_format``/``key_label`` as in :func:`make_ca`.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = _load_key(ca.key.read_bytes())
    key = _new_key(algorithm)
    cn = common_name if common_name is not None else (names[0] if names else stem)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _validity(x509.CertificateBuilder(), days)
        .subject_name(_subject(cn, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False, algorithm=algorithm), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
    )
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False
        )
    cert = _sign(builder, ca_key)
    files = TLSFiles(cert=directory / f"{stem}.pem", key=directory / f"{stem}.key", ca=ca.cert)
    _write(files, cert.public_bytes(serialization.Encoding.PEM),
           _key_pem(key, key_format, key_label))
    return files


def _new_key(algorithm: KeyAlgorithm) -> _Key:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if algorithm == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if algorithm == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key algorithm must be 'ecdsa', 'ed25519' or 'rsa', not {algorithm!r}")


def _subject(common_name: str, organization: str | None) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    if common_name:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _general_name(name: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _key_usage(*, ca: bool, algorithm: KeyAlgorithm) -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True, content_commitment=False,
        key_encipherment=not ca and algorithm == "rsa", data_encipherment=False,
        key_agreement=False, key_cert_sign=ca, crl_sign=ca,
        encipher_only=False, decipher_only=False,
    )


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    return builder.not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(
        now + dt.timedelta(days=days)
    )


def _sign(builder: x509.CertificateBuilder, key: _Key) -> x509.Certificate:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ed25519

    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(key, algorithm)


def _key_pem(key: _Key, key_format: KeyFormat, key_label: str | None) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if key_format not in ("pkcs8", "traditional"):
        raise ValueError(f"key format must be 'pkcs8' or 'traditional', not {key_format!r}")
    traditional = key_format == "traditional" and not isinstance(key, ed25519.Ed25519PrivateKey)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL if traditional
        else serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    if key_label is not None:
        label = key_label.encode("ascii")
        pem = _PEM_LABEL.sub(lambda m: b"-----" + m[1] + b" " + label + b"-----", pem)
    return pem


def _load_key(pem: bytes) -> _Key:
    """Read a key :func:`_key_pem` wrote, whatever its PEM label."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    def standard(match: re.Match[bytes]) -> bytes:
        if match[2] in _STANDARD_LABELS:
            return match[0]
        return b"-----" + match[1] + b" PRIVATE KEY-----"  # a relabelled PKCS#8 key

    key = serialization.load_pem_private_key(_PEM_LABEL.sub(standard, pem), password=None)
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
                      | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported CA key type {type(key).__name__}")
    return key


def _write(files: TLSFiles, cert: bytes, key: bytes) -> None:
    import os

    files.cert.parent.mkdir(parents=True, exist_ok=True)
    files.cert.write_bytes(cert)
    fd = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    files.key.chmod(0o600)
