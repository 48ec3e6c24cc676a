"""The stored form: a `kubernetes.io/tls` Secret's data (or the same keys as files in a directory).

`tls.crt`/`tls.key` are the serving pair and `ca.crt` the trust bundle, so the Secret mounts as a
standard TLS volume; the CA keys below are gpuclaim's own (Secret keys allow `[-._a-zA-Z0-9]+`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from gpuclaim.certs import material, rotation

TLS_CRT, TLS_KEY, CA_CRT = "tls.crt", "tls.key", "ca.crt"
SIGNER_CRT, SIGNER_KEY = "ca-signer.crt", "ca-signer.key"
NEXT_CRT, NEXT_KEY = "ca-next.crt", "ca-next.key"
PREVIOUS_CRT = "ca-previous.crt"
#: kube-scheduler's client certificate for the extender (mutual TLS): mounted by the scheduler, never the servers
CLIENT_CRT, CLIENT_KEY = "client.crt", "client.key"
ALL_KEYS = (TLS_CRT, TLS_KEY, CA_CRT, SIGNER_CRT, SIGNER_KEY, NEXT_CRT, NEXT_KEY, PREVIOUS_CRT, CLIENT_CRT, CLIENT_KEY)
#: files that hold private keys: written 0600 in a directory
PRIVATE_KEYS = frozenset({TLS_KEY, SIGNER_KEY, NEXT_KEY, CLIENT_KEY})
SECRET_TYPE = "kubernetes.io/tls"
LABELS = {"app.kubernetes.io/name": "gpuclaim", "app.kubernetes.io/component": "certs"}


def encode(m: rotation.Material) -> dict[str, bytes]:
    """Raw bytes per key (base64 happens in `to_secret`)."""
    if m.signer is None or m.serving is None:
        raise ValueError("cannot store material without a CA and a serving certificate")
    out = {
        TLS_CRT: m.serving.cert_pem,
        TLS_KEY: m.serving.key_pem,
        CA_CRT: m.bundle_pem(),
        SIGNER_CRT: m.signer.cert_pem,
        SIGNER_KEY: m.signer.key_pem,
    }
    if m.next is not None:
        out[NEXT_CRT], out[NEXT_KEY] = m.next.cert_pem, m.next.key_pem
    if m.previous is not None:
        out[PREVIOUS_CRT] = material.cert_pem(m.previous)
    if m.client is not None:
        out[CLIENT_CRT], out[CLIENT_KEY] = m.client.cert_pem, m.client.key_pem
    return out


def decode(data: Mapping[str, bytes]) -> rotation.Material:
    """Whatever is usable; each unusable part is left out and named in `problems` (never raises)."""
    problems: list[str] = []

    def pair(crt: str, key: str, what: str) -> material.KeyPair | None:
        if crt not in data and key not in data:
            return None
        try:
            return material.load_pair(data.get(crt, b""), data.get(key, b""), what=what)
        except material.MaterialError as exc:
            problems.append(f"{crt}/{key}: {exc}")
            return None

    signer = pair(SIGNER_CRT, SIGNER_KEY, "CA")
    if signer is not None and not material.is_ca(signer.cert):
        problems.append(f"{SIGNER_CRT}: not a CA certificate")
        signer = None
    serving = pair(TLS_CRT, TLS_KEY, "serving")
    nxt = pair(NEXT_CRT, NEXT_KEY, "next CA")
    client = pair(CLIENT_CRT, CLIENT_KEY, "client")
    previous = None
    if PREVIOUS_CRT in data:
        try:
            previous = material.parse_certs(data[PREVIOUS_CRT], what=PREVIOUS_CRT)[0]
        except material.MaterialError as exc:
            problems.append(str(exc))
    if nxt is not None and previous is not None:
        # only one rotation can be in flight; the switch already happened if a previous CA exists
        problems.append(f"{NEXT_CRT} and {PREVIOUS_CRT} both present: dropped {NEXT_CRT}")
        nxt = None
    return rotation.Material(signer=signer, serving=serving, next=nxt, previous=previous, client=client,
                             problems=tuple(problems))


def secret_data(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    """Decode `data` of a Secret object (base64 values); a bad value reads as empty, which decode() reports."""
    if not secret:
        return {}
    out: dict[str, bytes] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            out[str(key)] = b""
    return out


def to_secret(*, name: str, namespace: str, data: Mapping[str, bytes],
              base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A v1 Secret carrying `data`, keeping metadata (resourceVersion, labels, annotations) of `base`."""
    meta: dict[str, Any] = {}
    if base:
        meta = {k: v for k, v in (base.get("metadata") or {}).items() if k not in ("managedFields",)}
    meta["name"], meta["namespace"] = name, namespace
    meta["labels"] = {**(meta.get("labels") or {}), **LABELS}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": SECRET_TYPE,
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in sorted(data.items())},
    }
