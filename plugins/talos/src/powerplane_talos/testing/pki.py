"""Certificates for the Talos mock and its tests, made by :mod:`powerplane.testing`.

Talos's own conventions, on top of :func:`powerplane.testing.make_ca` and
:func:`powerplane.testing.issue_cert`: the OS CA's subject is ``O=talos``; keys are
Ed25519 (Talos's default) written as Talos writes them, PKCS#8 under the PEM label
``ED25519 PRIVATE KEY``, or ECDSA P-256 as ``EC PRIVATE KEY``; a client certificate
carries its Talos role as the subject's organization (``os:admin``, ``os:reader``), as
Talos's RBAC reads it. Every key is a file (mode 0600) in the directory given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from powerplane.testing import KeyFormat, TLSFiles, issue_cert, make_ca

__all__ = ["CA_LABEL", "Algorithm", "Pem", "issue", "load", "new_ca"]

Algorithm = Literal["ed25519", "ecdsa"]
"""Key algorithm: ``ed25519`` (Talos's default) or ``ecdsa`` (P-256)."""

CA_LABEL = "talos"
"""The CA's files are ``talos-ca.pem`` and ``talos-ca.key``."""


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, as the files :mod:`powerplane.testing` wrote."""

    files: TLSFiles

    @property
    def cert(self) -> bytes:
        """The certificate's PEM."""
        return self.files.cert_pem()

    @property
    def key(self) -> bytes:
        """The private key's PEM (Talos's label for Ed25519)."""
        return self.files.key_pem()


def _key_options(algorithm: Algorithm) -> tuple[KeyFormat, str | None]:
    if algorithm == "ed25519":
        return "pkcs8", "ED25519 PRIVATE KEY"
    if algorithm == "ecdsa":
        return "traditional", None
    raise ValueError(f"algorithm must be 'ed25519' or 'ecdsa', not {algorithm!r}")


def new_ca(directory: Path, algorithm: Algorithm = "ed25519") -> Pem:
    """A self-signed CA named as Talos names its OS CA (``O=talos``), in ``directory``."""
    key_format, key_label = _key_options(algorithm)
    return Pem(make_ca(directory, CA_LABEL, algorithm=algorithm, common_name="",
                       organization="talos", key_format=key_format, key_label=key_label))


def issue(
    ca: Pem,
    directory: Path,
    common_name: str,
    *,
    algorithm: Algorithm = "ed25519",
    server: bool = False,
    organization: str | None = None,
    stem: str | None = None,
) -> Pem:
    """A leaf certificate signed by ``ca``: ``directory/<stem>.pem`` and ``.key`` (``stem``
    defaults to ``common_name``).

    A server certificate names ``127.0.0.1`` and ``localhost``; a client certificate names
    nothing and carries its role as ``organization`` (``os:admin``, ``os:reader``).
    """
    key_format, key_label = _key_options(algorithm)
    names = ("127.0.0.1", "localhost") if server else ()
    return Pem(issue_cert(ca.files, directory, names, stem=stem or common_name,
                          common_name=common_name, organization=organization,
                          client=not server, algorithm=algorithm, key_format=key_format,
                          key_label=key_label))


def load(directory: Path, stem: str) -> Pem:
    """What :func:`new_ca` (``stem`` ``"ca"``) or :func:`issue` wrote in ``directory``."""
    ca = directory / f"{CA_LABEL}-ca.pem"
    if stem == "ca":
        return Pem(TLSFiles(cert=ca, key=directory / f"{CA_LABEL}-ca.key", ca=ca))
    return Pem(TLSFiles(cert=directory / f"{stem}.pem", key=directory / f"{stem}.key", ca=ca))
