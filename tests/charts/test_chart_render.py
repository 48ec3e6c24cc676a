"""The chart renders with real Helm for every values set, passes Helm's lint, and every object it
emits is valid against the official Kubernetes 1.34 schemas (strict: unknown fields are errors)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import helm_python as helm
import pytest
from chart_helpers import CHART, NAMESPACE, VALUE_SETS, Rendered
from official_schemas import assert_valid

#: Custom resources have no schema in kubernetes-validate; their structure is checked below instead.
CRD_KINDS = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate"),
             ("monitoring.coreos.com/v1", "ServiceMonitor")}
SETS = sorted(VALUE_SETS)
_VALID: set[str] = set()


@pytest.mark.parametrize("values_set", SETS)
def test_every_builtin_object_is_valid_against_the_schemas_of_every_supported_minor(render: Any, values_set: str) -> None:
    rendered: Rendered = render(values_set)
    assert rendered.objects
    for obj in rendered:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        key = json.dumps(obj, sort_keys=True)
        if key not in _VALID:  # identical objects recur across values sets; validate each once
            assert_valid(obj)
            _VALID.add(key)


@pytest.mark.parametrize("values_set", SETS)
def test_object_names_are_unique_and_namespaced_objects_live_in_the_release_namespace(
    render: Any, values_set: str
) -> None:
    rendered: Rendered = render(values_set)
    keys = Counter((o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in rendered)
    assert [k for k, n in keys.items() if n > 1] == []
    for obj in rendered:
        ns = obj["metadata"].get("namespace")
        if ns is None:
            continue
        # The one exception: the second scheduler must read the apiserver's authentication config there.
        if ns == "kube-system":
            assert obj["kind"] == "RoleBinding"
            assert obj["roleRef"]["name"] == "extension-apiserver-authentication-reader"
        elif obj["metadata"]["name"].endswith("-fleet-viewer"):
            # the fleet's namespace viewers: a Role and its binding in each namespace they are for
            assert ns in {v["namespace"] for v in rendered.values["fleet"]["rbac"]["namespaceViewers"]}
        elif obj["metadata"]["name"].endswith("-fleet-dashboard"):
            # the Grafana dashboard goes where the Grafana sidecar looks
            assert ns == (rendered.values["fleet"]["dashboard"]["namespace"] or NAMESPACE)
        else:
            assert ns == NAMESPACE, obj["metadata"]


@pytest.mark.parametrize("kube_version", ["v1.35.0", "v1.36.0", "v1.37.2"])  # the supported minors
@pytest.mark.parametrize("values_set", SETS)
def test_helm_lint_reports_no_warnings_or_errors(values_set: str, kube_version: str) -> None:
    report = helm.lint(str(CHART), VALUE_SETS[values_set], strict=True, namespace=NAMESPACE, kube_version=kube_version)
    assert report["errors"] == []
    # Severity 1 is informational (e.g. "icon is recommended"); warnings (2) and errors (3) fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_certs_mode_decides_which_certificate_machinery_is_rendered(render: Any) -> None:
    kinds = {name: {o["kind"] for o in render(name)} for name in ("default", "cert-manager", "user-secret")}
    assert {"Job", "CronJob", "ValidatingAdmissionPolicy"} <= kinds["default"]
    assert "Certificate" not in kinds["default"]
    assert {"Certificate", "Issuer"} <= kinds["cert-manager"]
    assert not {"Job", "CronJob", "ValidatingAdmissionPolicy"} & kinds["cert-manager"]
    assert not {"Job", "CronJob", "Certificate", "Issuer"} & kinds["user-secret"]
    # The certs ServiceAccount and its RBAC exist only where `gpuclaim certs` runs.
    for name in ("cert-manager", "user-secret"):
        assert not [o for o in render(name) if o["metadata"]["name"].endswith("-certs")]


def test_cert_manager_objects_are_well_formed(render: Any) -> None:
    rendered: Rendered = render("cert-manager")
    serving = rendered.one("Certificate", "-serving")
    spec = serving["spec"]
    assert spec["secretName"] == "gc-gpuclaim-tls"
    # One certificate for both servers: the webhook's Service names, then the extender's.
    assert spec["dnsNames"] == [
        f"gc-gpuclaim-{svc}{suffix}"
        for svc in ("webhook", "extender")
        for suffix in ("", f".{NAMESPACE}", f".{NAMESPACE}.svc", f".{NAMESPACE}.svc.cluster.local")
    ]
    assert "server auth" in spec["usages"]
    assert spec["privateKey"] == {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    # The serving cert is signed by the chart's CA issuer, whose CA is a self-signed Certificate.
    ca_issuer = rendered.one("Issuer", "-ca")
    assert spec["issuerRef"] == {"name": ca_issuer["metadata"]["name"], "kind": "Issuer", "group": "cert-manager.io"}
    ca_cert = rendered.one("Certificate", "-ca")
    assert ca_cert["spec"]["isCA"] is True
    assert ca_issuer["spec"]["ca"]["secretName"] == ca_cert["spec"]["secretName"]
    selfsigned = rendered.one("Issuer", "-selfsigned")
    assert selfsigned["spec"] == {"selfSigned": {}}
    assert ca_cert["spec"]["issuerRef"]["name"] == selfsigned["metadata"]["name"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = rendered.one(kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{serving['metadata']['name']}"}


def test_cert_manager_with_an_existing_issuer_creates_no_ca_of_its_own(render: Any) -> None:
    rendered: Rendered = render("cert-manager-own-issuer")
    assert rendered.of_kind("Issuer") == []
    # the serving certificate and kube-scheduler's client certificate (extender.clientAuth), both from that issuer
    certs = rendered.of_kind("Certificate")
    assert [c["metadata"]["name"] for c in certs] == ["gc-gpuclaim-serving", "gc-gpuclaim-scheduler-client"]
    for cert in certs:
        assert cert["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}


def test_service_monitor_scrapes_the_metrics_port_of_both_services(render: Any) -> None:
    rendered: Rendered = render("strict")
    monitor = rendered.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    endpoint = {"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}
    assert monitor["spec"]["endpoints"] == [endpoint]
    services = rendered.of_kind("Service")
    assert len(services) == 2
    selector = monitor["spec"]["selector"]
    for svc in services:
        labels = svc["metadata"]["labels"]
        assert all(labels[k] == v for k, v in selector["matchLabels"].items())
        assert labels["app.kubernetes.io/component"] in selector["matchExpressions"][0]["values"]
        assert "metrics" in {p["name"] for p in svc["spec"]["ports"]}
    assert render("default").of_kind("ServiceMonitor") == []


def test_notes_tell_the_admin_how_to_wire_the_default_scheduler_or_that_the_second_one_is_used(render: Any) -> None:
    assert "gc-gpuclaim-scheduler-extender" in render("default").notes
    assert "nvidia.com/mig-*" in render("default").notes
    assert 'second scheduler "gpuclaim-scheduler"' in render("second-scheduler").notes
    assert "Scheduling" not in render("no-extender").notes


@pytest.mark.parametrize("values_set", SETS)
def test_every_service_has_its_ports_once_as_the_apiserver_requires(render: Any, values_set: str) -> None:
    """kube-apiserver's Service validation (not the OpenAPI schema above) refuses two ports of one number and
    protocol, or of one name: the "fleet" set had the fleet's Service port on 443, beside kube-scheduler's."""
    for svc in render(values_set).of_kind("Service"):
        ports = svc["spec"]["ports"]
        by_number = Counter((p["port"], p.get("protocol", "TCP")) for p in ports)
        by_name = Counter(p.get("name") for p in ports)
        assert max(by_number.values()) == 1 and max(by_name.values()) == 1, (svc["metadata"]["name"], ports)

