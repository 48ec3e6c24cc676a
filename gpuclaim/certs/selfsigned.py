"""Issue a private CA and the webhook's serving certificate with `cryptography`.

Pure apart from key generation: the clock is an argument. Validity choices (see docs/certificates.md):
the CA lives 10 years like kubeadm's, because rotating it needs the overlap dance through every
webhook configuration; the serving certificate lives 1 year (kubeadm's serving certs, and below
the 398 days clients start to frown at), renewed automatically well before it ends.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpuclaim.certs import material

KeyType = Literal["ecdsa-p256", "rsa-2048", "rsa-3072"]
KEY_TYPES: tuple[KeyType, ...] = ("ecdsa-p256", "rsa-2048", "rsa-3072")

CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
#: notBefore is set this far in the past so an apiserver whose clock lags ours still accepts a fresh cert
BACKDATE = timedelta(minutes=5)


def new_key(key_type: KeyType = "ecdsa-p256") -> material.PrivateKey:
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "rsa-3072":
        return rsa.generate_private_key(public_exponent=65537, key_size=3072)
    raise ValueError(f"key type {key_type!r} not supported (one of {', '.join(KEY_TYPES)})")


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """Every name kube-apiserver or an in-cluster client may use for a Service."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


@dataclass(frozen=True, slots=True)
class Names:
    """Subject alternative names the serving certificate must carry, normalised for comparison."""

    dns: tuple[str, ...]
    ips: tuple[str, ...] = ()

    @classmethod
    def build(cls, dns: Iterable[str], ips: Iterable[str] = ()) -> Names:
        clean_dns: list[str] = []
        for name in dns:
            n = name.strip().lower().rstrip(".")
            if not n or any(c.isspace() for c in n) or len(n) > 253:
                raise ValueError(f"DNS name {name!r} is not a valid host name")
            clean_dns.append(n)
        clean_ips: list[str] = []
        for ip in ips:
            try:
                clean_ips.append(str(ipaddress.ip_address(ip.strip())))
            except ValueError:
                raise ValueError(f"IP address {ip!r} is not a valid IPv4 or IPv6 address") from None
        if not clean_dns and not clean_ips:
            raise ValueError("a serving certificate needs at least one DNS name or IP address")
        return cls(dns=tuple(dict.fromkeys(clean_dns)), ips=tuple(dict.fromkeys(clean_ips)))

    def matches(self, cert: x509.Certificate) -> bool:
        have_dns = {d.lower() for d in material.dns_names(cert)}
        return have_dns == set(self.dns) and set(material.ip_addresses(cert)) == set(self.ips)


def _ski(key: material.PrivateKey) -> x509.SubjectKeyIdentifier:
    return x509.SubjectKeyIdentifier.from_public_key(key.public_key())


def issue_ca(
    *, now: datetime, validity: timedelta = CA_VALIDITY, key_type: KeyType = "ecdsa-p256", name: str = "gpuclaim-ca"
) -> material.KeyPair:
    """A self-signed CA that may sign leaf certificates only (pathLen 0).

    The common name carries the issue time, as kube's own self-signed CAs do, so an old and a new CA
    in one bundle never share a subject: chain building stays unambiguous during a CA overlap.
    """
    now = material.utc(now)
    key = new_key(key_type)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}@{int(now.timestamp())}")])
    ski = _ski(key)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return material.KeyPair(cert=cert, key=key, cert_pem=material.cert_pem(cert), key_pem=material.key_pem(key))


def issue_serving(
    *,
    ca: material.KeyPair,
    names: Names,
    now: datetime,
    validity: timedelta = SERVING_VALIDITY,
    key_type: KeyType = "ecdsa-p256",
) -> material.KeyPair:
    """A TLS server certificate for `names`, signed by `ca`, never outliving the CA."""
    cn = names.dns[0] if names.dns else names.ips[0]
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in names.dns]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in names.ips]
    return _issue_leaf(ca=ca, subject_cn=cn[:64], usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans, now=now,
                       validity=validity, key_type=key_type, what="a serving certificate")


def issue_client(
    *,
    ca: material.KeyPair,
    name: str,
    now: datetime,
    validity: timedelta = SERVING_VALIDITY,
    key_type: KeyType = "ecdsa-p256",
) -> material.KeyPair:
    """A TLS client certificate (extendedKeyUsage clientAuth only, subject CN `name`, no SANs), signed by `ca`,
    never outliving it: what kube-scheduler presents to the extender (its extenders[].tlsConfig certFile)."""
    now = material.utc(now)  # a naive clock is refused before the name, as everywhere in this package
    if not name or len(name) > 64:
        raise ValueError(f"client certificate name {name!r}: 1 to 64 characters (a certificate's CN)")
    return _issue_leaf(ca=ca, subject_cn=name, usage=ExtendedKeyUsageOID.CLIENT_AUTH, sans=None, now=now,
                       validity=validity, key_type=key_type, what="a client certificate")


def _issue_leaf(
    *,
    ca: material.KeyPair,
    subject_cn: str,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None,
    now: datetime,
    validity: timedelta,
    key_type: KeyType,
    what: str,
) -> material.KeyPair:
    """A leaf certificate signed by `ca` for one extended key usage, never outliving the CA: the serving and the
    client certificate differ only in their subject, their usage and whether they carry SANs."""
    now = material.utc(now)
    key = new_key(key_type)
    not_after = min(now + validity, ca.not_after)
    if not_after <= now:
        raise ValueError(f"the CA has expired: cannot issue {what} from it")
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(now - BACKDATE, ca.not_before))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                # RSA key exchange needs keyEncipherment; ECDSA only ever signs
                digital_signature=True, content_commitment=False,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey), data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = (
        builder.add_extension(_ski(key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return material.KeyPair(cert=cert, key=key, cert_pem=material.cert_pem(cert), key_pem=material.key_pem(key))


def common_name(cert: x509.Certificate) -> str | None:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None
