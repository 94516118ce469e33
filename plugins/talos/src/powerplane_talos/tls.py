"""TLS contexts for mutual TLS with the Talos API (Ed25519 or ECDSA certificates).

Python's ``ssl`` loads a certificate chain only from paths, so the PEMs are handed to
it as anonymous memory files (:class:`~powerplane_talos.memfile.MemoryFile`): the key
is never written to a file on any disk, not even for the moment of loading, so no
kill at any moment can leave it behind. ALPN is set to ``h2``, as gRPC requires.
"""

from __future__ import annotations

import ssl

from powerplane_talos.memfile import MemoryFile
from powerplane_talos.talosconfig import normalize_key_pem

__all__ = ["client_context", "server_context"]


def _load_chain(ctx: ssl.SSLContext, crt: bytes, key: bytes) -> None:
    # load_cert_chain has no in-memory form: OpenSSL opens these /proc/self/fd paths
    with MemoryFile("talos-crt", crt) as crt_file, \
            MemoryFile("talos-key", normalize_key_pem(key)) as key_file:
        try:
            ctx.load_cert_chain(crt_file.path, key_file.path)
        except ssl.SSLError as exc:
            raise ValueError(
                f"the client certificate and key do not load ({exc.reason or 'bad PEM'})"
            ) from exc


def _load_ca(ctx: ssl.SSLContext, ca: bytes) -> None:
    try:
        ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError("the CA certificate does not load") from exc


def client_context(ca: bytes, crt: bytes | None, key: bytes | None) -> ssl.SSLContext:
    """A client context that trusts only ``ca`` and presents ``crt``/``key`` when given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_ca(ctx, ca)
    if crt is not None and key is not None:
        _load_chain(ctx, crt, key)
    ctx.set_alpn_protocols(["h2"])
    return ctx


def server_context(ca: bytes, crt: bytes, key: bytes) -> ssl.SSLContext:
    """A server context that requires a client certificate issued by ``ca``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_ca(ctx, ca)
    _load_chain(ctx, crt, key)
    ctx.set_alpn_protocols(["h2"])
    return ctx
