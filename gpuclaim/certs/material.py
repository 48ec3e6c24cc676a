"""PEM material: parse certificates and keys, check that a key belongs to a certificate.

Everything here is pure: bytes in, values out, errors as `MaterialError` with a one-line reason.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class MaterialError(ValueError):
    """A certificate or key that cannot be used, with the reason."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate (first of `chain`) with its private key, plus the PEM they came from."""

    cert: x509.Certificate
    key: PrivateKey
    cert_pem: bytes
    key_pem: bytes

    @property
    def not_before(self) -> datetime:
        return self.cert.not_valid_before_utc

    @property
    def not_after(self) -> datetime:
        return self.cert.not_valid_after_utc


def parse_certs(pem: bytes, *, what: str = "certificate") -> list[x509.Certificate]:
    """All certificates in a PEM bundle; at least one, or `MaterialError`."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise MaterialError(f"{what}: not a PEM certificate bundle ({exc})") from None
    if not certs:
        raise MaterialError(f"{what}: no certificate in the PEM data")
    return certs


def parse_key(pem: bytes, *, what: str = "private key") -> PrivateKey:
    try:
        key: PrivateKeyTypes = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise MaterialError(f"{what}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise MaterialError(f"{what}: unsupported key type {type(key).__name__} (want ECDSA or RSA)")
    return key


def public_key_bytes(cert_or_key: x509.Certificate | PrivateKey) -> bytes:
    pub = cert_or_key.public_key()
    return pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_pair(cert_pem: bytes, key_pem: bytes, *, what: str = "serving") -> KeyPair:
    """Parse a cert (chain) + key and refuse a key that does not belong to the first certificate.

    A Secret volume being updated, or an operator copying files one at a time, can briefly show a
    new certificate next to the old key; loading that would break every new handshake.
    """
    cert = parse_certs(cert_pem, what=f"{what} certificate")[0]
    key = parse_key(key_pem, what=f"{what} key")
    if public_key_bytes(cert) != public_key_bytes(key):
        raise MaterialError(f"{what} key does not match the {what} certificate (half-written pair?)")
    return KeyPair(cert=cert, key=key, cert_pem=cert_pem, key_pem=key_pem)


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER encoding, hex: how certificates are told apart in logs and output."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def bundle_pem(certs: list[x509.Certificate]) -> bytes:
    return b"".join(cert_pem(c) for c in certs)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def dns_names(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(san.get_values_for_type(x509.DNSName))


def ip_addresses(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(str(ip) for ip in san.get_values_for_type(x509.IPAddress))


def is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """True if `ca` signed `cert` (name and signature both checked)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def utc(ts: datetime) -> datetime:
    """Refuse naive datetimes early: every clock in this package is timezone-aware UTC."""
    if ts.tzinfo is None:
        raise ValueError("naive datetime: pass a timezone-aware UTC time")
    return ts.astimezone(UTC)
