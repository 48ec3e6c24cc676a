"""Build the `ssl.SSLContext`s: the servers' (TLS 1.2 minimum by default, 1.3 when offered) and a
client's that trusts only a given CA bundle, as kube-apiserver does with a webhook's caBundle."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Literal

TLSVersionName = Literal["1.2", "1.3"]
TLS_VERSIONS: dict[str, ssl.TLSVersion] = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
# the spellings people copy from Go (kube-apiserver's --tls-min-version) and OpenSSL
_ALIASES = {"tlsv1.2": "1.2", "tlsv1.3": "1.3", "versiontls12": "1.2", "versiontls13": "1.3"}


def tls_version(value: str, *, field: str = "tls.minVersion") -> ssl.TLSVersion:
    """Map a config value to a TLS version; 1.0 and 1.1 are refused on purpose (RFC 8996)."""
    key = str(value).strip()
    key = _ALIASES.get(key.lower(), key)
    try:
        return TLS_VERSIONS[key]
    except KeyError:
        raise ValueError(f"{field}: unsupported TLS version {value!r} (one of {', '.join(TLS_VERSIONS)})") from None


def server_context(
    *, cert_file: Path | None = None, key_file: Path | None = None, min_version: str = "1.2"
) -> ssl.SSLContext:
    """A server context. OpenSSL negotiates the highest version both sides offer, so 1.3 is used
    whenever the client has it (kube-apiserver does); `min_version` only decides who is refused.

    The certificate may be loaded later (by `files.CertReloader`), which is why it is optional here.
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = tls_version(min_version)
    ctx.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    # ticket keys live as long as the process and are never rotated: without tickets, forward secrecy
    # does not hinge on them (apiservers keep connections alive, so resumption would save little)
    ctx.options |= ssl.OP_NO_TICKET
    # ...and no TLS 1.3 tickets at all: with OP_NO_TICKET OpenSSL issues *stateful* tickets and keeps every
    # session in the context's server cache (up to 20,480 entries, ~2 MB per 1,000 handshakes measured), which
    # showed up as steady RSS growth under a load of new connections. No tickets, no cache entries (TLS 1.2
    # clients still get session IDs cached; Python exposes no switch for that, and the cache size bounds it).
    ctx.num_tickets = 0
    if cert_file is not None or key_file is not None:
        if cert_file is None or key_file is None:
            raise ValueError("give both the certificate and the key file, or neither")
        ctx.load_cert_chain(certfile=str(cert_file), keyfile=str(key_file))
    return ctx


def client_context(
    *, ca_pem: bytes | None = None, ca_file: Path | None = None, min_version: str = "1.2"
) -> ssl.SSLContext:
    """A client context that trusts exactly the given CA bundle (no system roots) and checks the host name."""
    if (ca_pem is None) == (ca_file is None):
        raise ValueError("give exactly one of ca_pem or ca_file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname + CERT_REQUIRED, no default roots
    ctx.minimum_version = tls_version(min_version)
    if ca_pem is not None:
        ctx.load_verify_locations(cadata=ca_pem.decode("ascii"))
    else:
        ctx.load_verify_locations(cafile=str(ca_file))
    return ctx
