"""Signed checkpoints: an Ed25519 key seals a trail at each append.

Where the deployment names a key (``audit: {key: {file: /etc/powerplane/audit.key}}``, a
PEM private key as ``openssl genpkey -algorithm ed25519`` writes it, or any secret
reference holding one), each append ends with a checkpoint entry (:mod:`.chain`): how many
records the trail holds, the hash of its last entry, the time, the key's id, and the
Ed25519 signature over that checkpoint's canonical encoding. The signature is made with
``cryptography``'s Ed25519 (no primitive of our own).

A checkpoint is what catches what a chain alone cannot: a trail written again from the
first entry with every hash recomputed (wholesale replacement: no one without the key can
sign its checkpoints), and the newest entries cut off (truncation): the newest checkpoint
says how many entries the trail held and which was the last, so a trail cut inside the
last append fails, and one cut at an older checkpoint is caught against the head an
inspector kept (``powerplane audit verify`` prints it; ``--expect-head HASH`` checks it).

The key id is the first 16 hex digits of the SHA-256 of the raw public key. An inspector
verifies with the public key alone (``powerplane audit verify --public-key FILE``, a PEM
public key): the private key never has to leave the plant's custody.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from powerplane.authority.chain import canonical
from powerplane.errors import ConfigError, ConfigProblem
from powerplane.secrets import SecretRef

__all__ = ["Seal", "Signer", "key_id", "load_public", "signer_of"]


def key_id(public: Ed25519PublicKey) -> str:
    """The id a checkpoint names its signer by."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class Seal:
    """Checks checkpoints against one public key."""

    def __init__(self, public: Ed25519PublicKey) -> None:
        self.public = public
        self.id = key_id(public)

    @classmethod
    def from_pem(cls, data: bytes, where: str) -> Seal:
        """A seal from a PEM public key (or a private key, whose public half is taken)."""
        try:
            key: Any = serialization.load_pem_public_key(data)
        except ValueError:
            try:
                key = serialization.load_pem_private_key(data, password=None).public_key()
            except (ValueError, TypeError):
                raise ConfigError([ConfigProblem("", "not a PEM Ed25519 key")],
                                  source=where) from None
        if not isinstance(key, Ed25519PublicKey):
            raise ConfigError([ConfigProblem("", "not an Ed25519 key")], source=where)
        return cls(key)

    def problem(self, body: dict[str, Any], signature: Any) -> str | None:
        """Why a checkpoint does not verify under this key (None: it does)."""
        if body.get("key") != self.id:
            return (f"a checkpoint signed by an unknown signer (key {body.get('key')!r}; "
                    f"the key given is {self.id})")
        if not isinstance(signature, str):
            return "a checkpoint without its signature"
        try:
            self.public.verify(base64.b64decode(signature, validate=True), canonical(body))
        except (InvalidSignature, ValueError):
            return "a checkpoint whose signature does not verify (changed, or forged)"
        return None


class Signer:
    """Signs checkpoints with one private key (see the module docstring)."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self.private = private
        self.seal = Seal(private.public_key())

    @classmethod
    def from_pem(cls, data: bytes, where: str) -> Signer:
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise ConfigError([ConfigProblem("audit.key", "not a PEM private key without a "
                                             "passphrase (openssl genpkey -algorithm "
                                             "ed25519)")], source=where) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError([ConfigProblem("audit.key", "not an Ed25519 key")],
                              source=where)
        return cls(key)

    def sign(self, body: dict[str, Any]) -> str:
        """The base64 signature of a checkpoint's canonical encoding."""
        return base64.b64encode(self.private.sign(canonical(body))).decode("ascii")


def signer_of(key: SecretRef, source: str) -> Signer:
    """The signer of the deployment's ``audit.key``: a ``{file: PATH}`` key read as a file
    that grants power (refused, exit 2, where anyone else could have written it: sshd's
    StrictModes, :func:`powerplane.files.trust_problems`); any other reference revealed."""
    if key.file is not None:
        from powerplane.files import read_text

        path = Path(key.file)
        if not path.is_absolute() and not source.startswith("<"):
            path = Path(source).parent / path
        text, _ = read_text(path, str(path), f"the audit key {path} does not exist",
                            grants="the audit key")
        return Signer.from_pem(text.encode("utf-8"), str(path))
    return Signer.from_pem(key.reveal().encode("utf-8"), source)


def load_public(path: Path) -> Seal:
    """The seal of a PEM public (or private) key file an inspector gives."""
    from powerplane.files import read_text

    text, _ = read_text(path, str(path), f"key file {path} does not exist")
    return Seal.from_pem(text.encode("utf-8"), str(path))
