"""Every pod the chart creates is hardened and bounded; the servers get the CLI contract of
DESIGN.md, HTTPS probes, two webhook replicas spread across nodes and a PodDisruptionBudget."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import VALUE_SETS, Rendered, render_values

SETS = sorted(VALUE_SETS)


def pod_specs(rendered: Rendered) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for obj in rendered:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "Job"):
            out.append((f"{kind}/{name}", obj["spec"]["template"]["spec"]))
        elif kind == "CronJob":
            out.append((f"{kind}/{name}", obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return out


@pytest.mark.parametrize("values_set", SETS)
def test_every_pod_meets_the_restricted_pod_security_standard_and_is_bounded(render: Any, values_set: str) -> None:
    specs = pod_specs(render(values_set))
    assert specs
    for where, spec in specs:
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True, where
        assert psc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert "hostNetwork" not in spec and "hostPID" not in spec, where
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert set(c["resources"]) == {"requests", "limits"}, where
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), where
            # A read-only root needs a writable /tmp for Python's tempfile users.
            assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"]), where


def server(rendered: Rendered, component: str) -> dict[str, Any]:
    return rendered.one("Deployment", f"-{component}")


@pytest.mark.parametrize("component", ["webhook", "extender"])
def test_servers_get_the_designed_cli_flags_and_mount_config_and_tls(render: Any, component: str) -> None:
    dep = server(render("default"), component)
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["args"] == [
        component,
        "--config=/etc/gpuclaim/config/config.yaml",
        "--listen=0.0.0.0:8443",
        "--tls-cert=/etc/gpuclaim/tls/tls.crt",
        "--tls-key=/etc/gpuclaim/tls/tls.key",
        "--metrics-listen=0.0.0.0:9090",
        # the extender also serves the fleet view on a port of its own (docs/fleet.md)
        *(["--fleet-listen=0.0.0.0:8444"] if component == "extender" else []),
    ]
    assert c["image"] == "ghcr.io/gpuclaim/gpuclaim:0.1.0"
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "gc-gpuclaim-config"
    assert volumes["tls"]["secret"]["secretName"] == "gc-gpuclaim-tls"
    # No subPath: kubelet must be able to swap the files on rotation.
    assert all("subPath" not in m for m in c["volumeMounts"])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"https": 8443, "metrics": 9090, **({"fleet": 8444} if component == "extender" else {})}


NO_EXTENDER_MTLS = {"extender": {"clientAuth": {"enabled": False}}}


@pytest.mark.parametrize("component", ["webhook", "extender"])
def test_probes_use_healthz_and_readyz(component: str) -> None:
    (c,) = server(render_values(NO_EXTENDER_MTLS), component)["spec"]["template"]["spec"]["containers"]
    # readiness and start-up over the TLS port (what kube-apiserver and kube-scheduler call); liveness on the
    # metrics port, which a flood of connections to the TLS port does not fill
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}


@pytest.mark.parametrize("values", [{}, {"metrics": {"networkPolicy": {"enabled": True}}}], ids=["default", "netpol"])
def test_the_extender_under_mutual_tls_is_probed_on_the_metrics_port(values: dict[str, Any]) -> None:
    """kubelet presents no client certificate, and the TLS port (extender.clientAuth, on by default) completes no
    handshake without one: every probe asks the metrics port, which serves /readyz too."""
    (c,) = server(render_values(values), "extender")["spec"]["template"]["spec"]["containers"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTP"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}


@pytest.mark.parametrize("component", ["webhook", "extender"])
def test_liveness_stays_on_the_tls_port_under_the_metrics_network_policy(component: str) -> None:
    rendered = render_values({"metrics": {"networkPolicy": {"enabled": True}}, **NO_EXTENDER_MTLS})
    (c,) = server(rendered, component)["spec"]["template"]["spec"]["containers"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}


def test_webhook_runs_two_replicas_spread_across_nodes_with_a_disruption_budget(render: Any) -> None:
    rendered: Rendered = render("default")
    dep = server(rendered, "webhook")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    anti = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = dep["spec"]["selector"]["matchLabels"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    pdb = rendered.one("PodDisruptionBudget", "-webhook")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert "priorityClassName" not in dep["spec"]["template"]["spec"]


def test_hard_anti_affinity_priority_class_and_digest_are_honoured(render: Any) -> None:
    rendered: Rendered = render("strict")
    dep = server(rendered, "webhook")
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 3
    assert spec["priorityClassName"] == "system-cluster-critical"
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert spec["containers"][0]["image"] == "ghcr.io/gpuclaim/gpuclaim@sha256:" + "a" * 64
    # A single extender replica gets no PDB (it would block every drain) and no anti-affinity.
    assert not [p for p in rendered.of_kind("PodDisruptionBudget") if p["metadata"]["name"].endswith("-extender")]
    assert "affinity" not in server(rendered, "extender")["spec"]["template"]["spec"]


def test_services_route_443_to_the_https_port(render: Any) -> None:
    for svc in render("default").of_kind("Service"):
        ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
        fleet = {"fleet": (8444, "fleet")} if svc["metadata"]["name"].endswith("-extender") else {}
        assert ports == {"https": (443, "https"), "metrics": (9090, "metrics"), **fleet}


def test_certs_job_runs_gpuclaim_certs_for_the_webhook_service_and_release_configurations(render: Any) -> None:
    rendered: Rendered = render("default")
    job = rendered.one("Job")
    cron = rendered.one("CronJob")
    assert job["metadata"]["name"] == "gc-gpuclaim-certs-1"  # revision-suffixed: Job templates are immutable
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    job_spec = job["spec"]["template"]["spec"]
    assert job_spec == cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job_spec["serviceAccountName"] == "gc-gpuclaim-certs"
    (c,) = job_spec["containers"]
    (script,) = c["args"]
    (invocation,) = re.findall(r"gpuclaim certs [^|]*", script)
    assert invocation.split() == [
        "gpuclaim",
        "certs",
        "--namespace=gpuclaim-system",
        "--service=gc-gpuclaim-webhook",
        "--secret=gc-gpuclaim-tls",
        "--webhook-selector=app.kubernetes.io/name=gpuclaim,app.kubernetes.io/instance=gc",
        "--dns=gc-gpuclaim-extender",
        "--dns=gc-gpuclaim-extender.gpuclaim-system",
        "--dns=gc-gpuclaim-extender.gpuclaim-system.svc",
        "--dns=gc-gpuclaim-extender.gpuclaim-system.svc.cluster.local",
        "--client-name=gpuclaim-scheduler",  # kube-scheduler's, for the extender's mutual TLS
        "-o",
        "json",
    ]
    # Run for real against the API double in test_chart_certs_job.py.
    # The selector must select this release's webhook configurations (and so nothing else of ours).
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        labels = rendered.one(kind)["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "gpuclaim" and labels["app.kubernetes.io/instance"] == "gc"


def test_a_config_change_rolls_the_server_pods() -> None:
    from chart_helpers import render_values

    def checksum(values: dict[str, Any]) -> str:
        dep = render_values(values).one("Deployment", "-webhook")
        return dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"config": {"logging": {"level": "debug"}}})


@pytest.mark.parametrize("values_set", SETS)
def test_mounted_secrets_are_readable_by_the_non_root_user_and_nobody_else(render: Any, values_set: str) -> None:
    for where, spec in pod_specs(render(values_set)):
        for volume in spec.get("volumes", []):
            if "secret" not in volume:
                continue
            mode = volume["secret"].get("defaultMode", 0o644)
            if mode & 0o004:
                # world-readable only for public material (the CA certificate)
                assert [i["key"] for i in volume["secret"]["items"]] == ["ca.crt"], where
            else:
                psc = spec["securityContext"]
                assert mode & 0o040 and psc["fsGroup"] == psc["runAsGroup"], where


def _said(kind: str, get: dict[str, Any]) -> str:
    over = "over HTTPS" if get["scheme"] == "HTTPS" else f"over plain HTTP on the {get['port']} port"
    return f"{kind} on `{get['path']}` {over}"


def test_install_md_describes_the_probes_the_default_chart_renders(render: Any) -> None:
    """docs/install.md once said liveness was probed over HTTPS while the chart probes the metrics port."""
    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text().split())
    for component, rendered in (("webhook", render("default")), ("extender", render("default")),
                                ("extender", render_values({"extender": {"clientAuth": {"enabled": False}}}))):
        (c,) = server(rendered, component)["spec"]["template"]["spec"]["containers"]
        for kind in ("startup", "liveness", "readiness"):
            probe = f"{kind}Probe"
            assert _said(kind, c[probe]["httpGet"]) in page, _said(kind, c[probe]["httpGet"])
