"""Certificate files on disk: hot reload into a live SSLContext, and writing a pair atomically.

Kubernetes updates a Secret volume by swapping a `..data` symlink, so inotify-style events are
unreliable (and absent on some filesystems); the reloader polls the content digest instead.
`SSLContext.load_cert_chain` on the context a server is already using changes what NEW handshakes
present; every open connection keeps the certificate it was set up with, so nothing is dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa

from gpuclaim.certs import context, material
from gpuclaim.tasks import running

log = logging.getLogger("gpuclaim.certs")


class CertReloader:
    """Owns the certificate of one server context: initial load, then `run()` polls for changes.

    A pair that does not parse, or whose key does not match the certificate (one file of two
    rewritten so far), is never loaded: the previous pair keeps serving and the files are tried
    again at every poll until they are consistent.
    """

    def __init__(self, context: ssl.SSLContext, *, cert_file: Path, key_file: Path, interval: float = 10.0) -> None:
        if interval <= 0:
            raise ValueError("certs reload interval must be positive")
        self.context = context
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.interval = interval
        self._digest: bytes | None = None
        self._rejected: bytes | None = None
        self._pair: material.KeyPair | None = None
        self.reloads = 0
        self.failures = 0
        self.client_ca_file: Path | None = None
        self._client_ca_digest: bytes | None = None
        self._client_ca_rejected: bytes | None = None

    @property
    def loaded(self) -> bool:
        """True once a good pair is in the context (a readiness condition)."""
        return self._pair is not None

    @property
    def not_after(self) -> datetime | None:
        return None if self._pair is None else self._pair.not_after

    def expiry_timestamp(self) -> float:
        """notAfter of the certificate being served, in Unix seconds; 0 before the first load.

        For `gpuclaim_certs_expiry_timestamp_seconds`: `Gauge(...).set_function(reloader.expiry_timestamp)`.
        """
        return 0.0 if self._pair is None else self._pair.not_after.timestamp()

    @property
    def fingerprint(self) -> str | None:
        return None if self._pair is None else material.fingerprint(self._pair.cert)

    def load(self) -> bool:
        """Load the files if their content changed and is a usable pair. True if a new pair went live.

        Raises `material.MaterialError` / `OSError` only when nothing was ever loaded, so a server
        refuses to start without a certificate but never stops serving one it already has.
        """
        try:
            cert_pem = self.cert_file.read_bytes()
            key_pem = self.key_file.read_bytes()
        except OSError as exc:
            return self._reject(None, f"cannot read certificate files: {exc}", exc)
        digest = hashlib.sha256(cert_pem + b"\0" + key_pem).digest()
        if digest == self._digest:
            return False
        try:
            pair = material.load_pair(cert_pem, key_pem)
            # the validated bytes are what gets loaded: the files may change again under us
            _load_into(self.context, cert_pem, key_pem)
        except (material.MaterialError, ssl.SSLError) as exc:
            return self._reject(digest, str(exc), exc)
        if self._pair is not None and _algorithm(self._pair) != _algorithm(pair):
            # OpenSSL keeps one certificate per key algorithm in a context; the old one stays and is
            # still chosen by clients that only accept that algorithm
            log.warning(
                "serving key algorithm changed from %s to %s: restart the server to drop the old certificate",
                _algorithm(self._pair), _algorithm(pair),
            )
        self._digest, self._pair, self._rejected = digest, pair, None
        self.reloads += 1
        log.info(
            "loaded serving certificate",
            extra={"fingerprint": material.fingerprint(pair.cert), "not_after": pair.not_after.isoformat()},
        )
        return True

    def require_client_certificates(self, ca_file: Path) -> None:
        """Mutual TLS: every handshake must present a client certificate `ca_file` (a PEM bundle) signed, or it
        fails. The bundle is loaded now (an unusable one raises: a server must not start refusing everyone, nor
        open to everyone) and polled with the pair; a changed bundle's CAs are added as it changes (OpenSSL
        cannot remove a CA from a live context: a retired CA stays trusted until restart, but its key is gone
        with it, so nothing new is signed by it)."""
        self.client_ca_file = Path(ca_file)
        self.context.verify_mode = ssl.CERT_REQUIRED
        self._client_ca_digest = None
        if not self.load_client_ca():
            raise material.MaterialError(f"{ca_file}: no client CA loaded")

    def load_client_ca(self) -> bool:
        """Load the client CA bundle if its content changed and parses. True if new CAs went live. Raises only
        before the first load (as `load`)."""
        if self.client_ca_file is None:
            return False
        first = self._client_ca_digest is None
        try:
            pem = self.client_ca_file.read_bytes()
            digest = hashlib.sha256(pem).digest()
            if digest == self._client_ca_digest:
                return False
            cas = [c for c in material.parse_certs(pem, what=str(self.client_ca_file)) if material.is_ca(c)]
            if not cas:
                raise material.MaterialError(f"{self.client_ca_file}: no CA certificate in the bundle")
            self.context.load_verify_locations(cadata=material.bundle_pem(cas).decode("ascii"))
        except (OSError, material.MaterialError, ssl.SSLError, ValueError) as exc:
            if first:
                raise
            if _failure_key(exc) != self._client_ca_rejected:
                log.warning("keeping the current client CAs: %s", exc)
            self._client_ca_rejected = _failure_key(exc)
            return False
        self._client_ca_digest, self._client_ca_rejected = digest, None
        log.info("loaded client CA bundle", extra={"cas": [material.fingerprint(c) for c in cas]})
        return True

    def _reject(self, digest: bytes | None, reason: str, exc: Exception) -> bool:
        self.failures += 1
        if self._pair is None:
            raise exc
        if digest is None or digest != self._rejected:  # once per bad content, not at every poll
            log.warning("keeping the current serving certificate: %s", reason)
        self._rejected = digest
        return False

    async def cleanup_ctx(self, _app: object) -> AsyncIterator[None]:
        """For `app.cleanup_ctx.append(reloader.cleanup_ctx)`: the poll task lives as long as the app."""
        async with running(self.run(), "gpuclaim-certs-reload"):
            yield

    async def run(self) -> None:
        """Poll forever; cancel to stop. Errors are logged, never raised (the old pair keeps serving)."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.load()
            except Exception:  # only reachable before the first successful load
                log.exception("serving certificate still not loadable")
            self.load_client_ca()  # never raises once loaded, and it was loaded before the server started


def reloading_server_context(
    *, cert_file: Path, key_file: Path, min_version: str = "1.2", interval: float = 10.0
) -> CertReloader:
    """The servers' entry point: a server context with the pair loaded (or an error raised: a server
    must not start without a certificate) and its reloader. Serve `reloader.context`, register
    `reloader.cleanup_ctx`, and read `reloader.loaded` / `reloader.expiry_timestamp()`."""
    reloader = CertReloader(
        context.server_context(min_version=min_version), cert_file=cert_file, key_file=key_file, interval=interval
    )
    reloader.load()
    return reloader


def _failure_key(exc: Exception) -> bytes:
    """A stable key for one failure, so each bad content is logged once rather than at every poll."""
    return hashlib.sha256(str(exc).encode()).digest()


def _algorithm(pair: material.KeyPair) -> str:
    return "RSA" if isinstance(pair.key, rsa.RSAPrivateKey) else "ECDSA"


def _load_into(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` only takes paths: go through a private temporary directory."""
    with tempfile.TemporaryDirectory(prefix="gpuclaim-certs-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        context.load_cert_chain(certfile=str(cert_path), keyfile=str(key_path))


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write via a temporary file in the same directory and rename, so readers see old or new, never half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_dir(directory: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The files of `names` that exist in `directory` (a local stand-in for the Secret's data)."""
    out: dict[str, bytes] = {}
    for name in names:
        path = Path(directory) / name
        if path.is_file():
            out[name] = path.read_bytes()
    return out


def write_dir(directory: Path, data: dict[str, bytes], *, private: frozenset[str]) -> list[str]:
    """Write changed files atomically (keys 0600, the rest 0644); return the names written.

    The key is written before the certificate, so a reloader polling the directory sees a new key
    with the old certificate (refused as a mismatch) rather than the reverse, and never a torn file.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name in sorted(data, key=lambda n: (n not in private, n)):
        path = directory / name
        if path.is_file() and path.read_bytes() == data[name]:
            continue
        write_atomic(path, data[name], mode=0o600 if name in private else 0o644)
        written.append(name)
    return written


def remove_files(directory: Path, names: Iterable[str]) -> list[str]:
    """Remove the files of `names` that exist in `directory` (material a rotation step retired); return the names
    removed. Called after `write_dir`, so a reader never finds the new signer missing."""
    removed: list[str] = []
    for name in names:
        path = Path(directory) / name
        if path.is_file():
            path.unlink()
            removed.append(name)
    return removed
