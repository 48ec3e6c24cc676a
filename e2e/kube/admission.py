"""kube-apiserver's client certificate for webhooks, set up as a cluster admin does it (docs/hardening.md).

The chart verifies the caller of `/mutate` and `/validate` by default (`webhook.clientAuth`: a certificate of the
cluster CA, published in every namespace as `kube-root-ca.crt`, naming `kube-apiserver-webhook-client`).
kube-apiserver presents one only when its admission configuration (`--admission-control-config-file`) points
the webhook plugins at a kubeconfig whose user entry, named after the webhook's address, holds it. Here that
address is the loopback URL the install rewrites the registrations to, so the webhook's port is chosen before
the apiserver starts.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpuclaim.certs import material

#: the chart's default `webhook.clientAuth.allowedNames`
CLIENT_NAME = "kube-apiserver-webhook-client"
VALIDITY = timedelta(days=365)


def client_certificate(ca: material.KeyPair, *, now: datetime, name: str = CLIENT_NAME) -> material.KeyPair:
    """A client certificate (`clientAuth` usage) for `name`, signed by the cluster CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(min(now + VALIDITY, ca.not_after))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca.key, hashes.SHA256()))
    return material.KeyPair(cert=cert, key=key, cert_pem=material.cert_pem(cert), key_pem=material.key_pem(key))


def write_config(directory: Path, *, client: material.KeyPair, webhook_address: str) -> Path:
    """The AdmissionConfiguration for `--admission-control-config-file` and the kubeconfig it names; returns the
    former. `webhook_address`: host:port of the webhook's URL (for a Service: `<name>.<namespace>.svc`)."""
    cert, key = directory / "webhook-client.crt", directory / "webhook-client.key"
    cert.write_bytes(client.cert_pem)
    key.write_bytes(client.key_pem)
    key.chmod(0o600)
    kubeconfig = directory / "webhook-client.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": webhook_address, "user": {"client-certificate": str(cert), "client-key": str(key)}}]}))
    kubeconfig.chmod(0o600)
    plugin = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
              "kubeConfigFile": str(kubeconfig)}
    config = directory / "admission.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": name, "configuration": plugin}
                    for name in ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")]}, sort_keys=False))
    return config
