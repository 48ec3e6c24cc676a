"""Render charts/gpuclaim with real Helm (helm-python-sdk, Helm's Go engine over a C ABI) once per
values set and hand the parsed manifests to the tests."""

from __future__ import annotations

import base64
import datetime
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import helm_python as helm
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "gpuclaim"
RELEASE = "gc"
NAMESPACE = "gpuclaim-system"


def _test_ca_pem() -> bytes:
    """A real CA certificate, for the user-provided-Secret mode's caBundle."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


USER_CA_B64 = base64.b64encode(_test_ca_pem()).decode()

#: The values sets every manifest-level test runs against.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "cert-manager": {"certs": {"mode": "cert-manager"}},
    "cert-manager-own-issuer": {
        "certs": {"mode": "cert-manager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}
    },
    "second-scheduler": {"scheduler": {"second": {"enabled": True, "replicas": 2}}},
    "no-extender": {"extender": {"enabled": False}},
    "no-gc": {"config": {"gc": {"enabled": False}}},
    "quota": {"config": {"quota": {"enabled": True}}},
    "user-secret": {"certs": {"mode": "secret", "secretName": "my-webhook-tls", "caBundle": USER_CA_B64}},
    "strict": {
        "webhook": {
            "replicas": 3,
            "antiAffinity": "hard",
            "priorityClassName": "system-cluster-critical",
            "mutating": {"failurePolicy": "Fail", "timeoutSeconds": 3},
            "validating": {"failurePolicy": "Fail"},
            "excludeNamespaces": ["monitoring"],
            "matchResources": {"names": ["nvidia.com/gpu", "gpu.example.com/gpu"], "prefixes": []},
        },
        "extender": {"replicas": 1, "antiAffinity": "none"},
        "scheduler": {"extender": {"filter": True, "weight": 10, "httpTimeout": "500ms"}},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "image": {"digest": "sha256:" + "a" * 64},
    },
    "no-validation": {"webhook": {"validating": {"enabled": False}}},
    "fleet": {
        "fleet": {
            "port": 9444,
            "servicePort": 8080,
            "rbac": {
                "viewers": [{"kind": "Group", "name": "gpu-admins", "apiGroup": "rbac.authorization.k8s.io"}],
                "namespaceViewers": [
                    {"namespace": "team-a", "subjects": [{"kind": "Group", "name": "team-a-developers",
                                                          "apiGroup": "rbac.authorization.k8s.io"}]},
                    {"namespace": "team-b", "subjects": [{"kind": "ServiceAccount", "name": "ci",
                                                          "namespace": "team-b"}]},
                ],
            },
            "dashboard": {"enabled": True, "namespace": "monitoring", "folder": "GPUs"},
        },
    },
    "no-fleet": {"fleet": {"enabled": False}},
}


@dataclass(frozen=True)
class Rendered:
    objects: tuple[dict[str, Any], ...]
    notes: str
    values: dict[str, Any]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name_suffix: str = "") -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, f"expected one {kind} *{name_suffix}, found {[o['metadata']['name'] for o in found]}"
        return found[0]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.objects)


@functools.cache
def _chart() -> helm.Chart:
    return helm.Chart.load(str(CHART))


@functools.cache
def _render(name: str) -> Rendered:
    return render_values(VALUE_SETS[name])


def render_values(values: dict[str, Any]) -> Rendered:
    chart = _chart()
    out = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True, revision=1)
    objects: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(objects=tuple(objects), notes=notes, values=chart.merge_values(values))


_CEL_ENV = celpy.Environment()


@functools.cache
def cel_program(expression: str) -> celpy.Runner:
    """Compile with cel-python; a syntax error raises CELParseError."""
    return _CEL_ENV.program(_CEL_ENV.compile(expression))


def cel_eval(expression: str, **activation: Any) -> Any:
    return cel_program(expression).evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
