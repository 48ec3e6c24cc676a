"""Issue 14, finding 7 in the chart: optional verification of kube-apiserver's client certificate and an
optional NetworkPolicy that keeps the metrics port to the listed peers. Rendered with real Helm."""

from __future__ import annotations

from typing import Any

import yaml
from chart_helpers import NAMESPACE, Rendered, render_values

from gpuclaim.dra.config import load_config


def _container(rendered: Rendered, name: str) -> dict[str, Any]:
    deployment = next(d for d in rendered.of_kind("Deployment") if d["metadata"]["name"].endswith(name))
    return deployment["spec"]["template"]["spec"]


def test_client_auth_is_on_by_default_with_the_cluster_ca_and_the_documented_name() -> None:
    """Issue 22, item 6: off by default, 50,000 forged reviews made 50,000 templates. The default CA is the one
    Kubernetes publishes in every namespace; the name is the one docs/hardening.md has the admin issue."""
    rendered = render_values({})
    config = yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"])
    assert config["webhook"]["clientAuth"] == {"caFile": "/etc/gpuclaim/client-ca/ca.crt",
                                               "allowedNames": ["kube-apiserver-webhook-client"]}
    pod = _container(rendered, "-webhook")
    assert {"name": "client-ca", "configMap": {"name": "kube-root-ca.crt",
                                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}} in pod["volumes"]
    off = render_values({"webhook": {"clientAuth": {"enabled": False}}})
    assert "clientAuth" not in (yaml.safe_load(off.one("ConfigMap", "-config")["data"]["config.yaml"]) or {}).get(
        "webhook", {})
    assert all(v["name"] != "client-ca" for v in _container(off, "-webhook")["volumes"])


def test_client_auth_mounts_the_named_ca_and_configures_the_webhook() -> None:
    rendered = render_values({"webhook": {"clientAuth": {"caConfigMap": "apiserver-client-ca",
                                                         "allowedNames": ["kube-apiserver"]}}})
    config = yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"])
    assert config["webhook"]["clientAuth"] == {"caFile": "/etc/gpuclaim/client-ca/ca.crt",
                                               "allowedNames": ["kube-apiserver"]}
    assert load_config(config).webhook.client_auth.allowed_names == ("kube-apiserver",)  # the server takes it
    pod = _container(rendered, "-webhook")
    assert {"name": "client-ca", "configMap": {"name": "apiserver-client-ca",
                                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}} in pod["volumes"]
    (container,) = pod["containers"]
    assert {"name": "client-ca", "mountPath": "/etc/gpuclaim/client-ca", "readOnly": True} in container[
        "volumeMounts"]
    extender = _container(rendered, "-extender")
    assert all(v["name"] != "client-ca" for v in extender["volumes"])


def test_the_network_policy_keeps_the_metrics_port_to_the_listed_peers() -> None:
    assert render_values({}).of_kind("NetworkPolicy") == []
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    rendered = render_values({"metrics": {"networkPolicy": {"enabled": True, "from": [peer]}}})
    policies = {p["metadata"]["name"]: p for p in rendered.of_kind("NetworkPolicy")}
    assert len(policies) == 2
    for policy in policies.values():
        assert policy["metadata"]["namespace"] == NAMESPACE
        open_port, metrics = policy["spec"]["ingress"]
        assert "from" not in open_port and open_port["ports"][0]["port"] in (8443, 8444, 8080, 9443)
        assert metrics["from"] == [peer] and metrics["ports"] == [{"port": 9090, "protocol": "TCP"}]
    only_tls = render_values({"metrics": {"networkPolicy": {"enabled": True}}})
    for policy in only_tls.of_kind("NetworkPolicy"):
        assert len(policy["spec"]["ingress"]) == 1  # nobody may scrape: the metrics port is closed
