"""Issue 14, finding 7 in the chart: optional verification of kube-apiserver's client certificate and an
optional NetworkPolicy that keeps the metrics port to the listed peers, and (issue 22) the extender's fleet port to
its own. Rendered with real Helm; the policies validated against the official schemas of every supported minor."""

from __future__ import annotations

from typing import Any

import yaml
from chart_helpers import NAMESPACE, Rendered, render_values
from official_schemas import assert_valid

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
    for name, policy in policies.items():
        assert policy["metadata"]["namespace"] == NAMESPACE
        open_port, metrics, *fleet = policy["spec"]["ingress"]
        assert "from" not in open_port and open_port["ports"] == [{"port": 8443, "protocol": "TCP"}]
        assert metrics["from"] == [peer] and metrics["ports"] == [{"port": 9090, "protocol": "TCP"}]
        # the extender's fleet port stays open: the policy is there for the metrics port
        assert fleet == ([{"ports": [{"port": 8444, "protocol": "TCP"}]}] if name.endswith("-extender") else [])
    only_tls = render_values({"metrics": {"networkPolicy": {"enabled": True}}})
    for policy in only_tls.of_kind("NetworkPolicy"):
        # nobody may scrape: the metrics port is closed
        assert all(rule["ports"][0]["port"] != 9090 for rule in policy["spec"]["ingress"])


FLEET_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}


def _extender_policy(rendered: Rendered) -> dict[str, Any]:
    (policy,) = [p for p in rendered.of_kind("NetworkPolicy") if p["metadata"]["name"].endswith("-extender")]
    assert_valid(policy)  # the official schema of every supported minor
    return policy


def test_the_fleet_port_is_kept_to_its_listed_peers_in_the_extenders_policy() -> None:
    """The fleet port (fleet.port, or config fleet.listen's) gets its rule in the extender's one policy: the policy
    rendered for the fleet port alone keeps the TLS and metrics ports open, as their own parts are off."""
    rendered = render_values({"fleet": {"port": 9444, "networkPolicy": {"enabled": True, "from": [FLEET_PEER]}}})
    assert [p["metadata"]["name"] for p in rendered.of_kind("NetworkPolicy")] == ["gc-gpuclaim-extender"]
    tls, metrics, fleet = _extender_policy(rendered)["spec"]["ingress"]
    assert tls == {"ports": [{"port": 8443, "protocol": "TCP"}]}
    assert metrics == {"ports": [{"port": 9090, "protocol": "TCP"}]}
    assert fleet == {"from": [FLEET_PEER], "ports": [{"port": 9444, "protocol": "TCP"}]}
    # the port the extender serves the fleet on when config fleet.listen names it and the chart passes no flag
    from_config = render_values({"fleet": {"enabled": False, "networkPolicy": {"enabled": True, "from": [FLEET_PEER]}},
                                 "config": {"fleet": {"listen": "0.0.0.0:9555"}}})
    assert _extender_policy(from_config)["spec"]["ingress"][2] == {
        "from": [FLEET_PEER], "ports": [{"port": 9555, "protocol": "TCP"}]}


def test_a_fleet_policy_without_peers_closes_the_fleet_port_and_one_without_a_fleet_port_renders_nothing() -> None:
    closed = render_values({"fleet": {"networkPolicy": {"enabled": True}},
                            "metrics": {"networkPolicy": {"enabled": True, "from": [FLEET_PEER]}}})
    ports = [rule["ports"][0]["port"] for rule in _extender_policy(closed)["spec"]["ingress"]]
    assert ports == [8443, 9090]  # no rule for 8444: nobody reaches it over the pod network
    assert render_values({"fleet": {"enabled": False, "networkPolicy": {"enabled": True}}}).of_kind(
        "NetworkPolicy") == []
    assert render_values({"extender": {"enabled": False}, "fleet": {"networkPolicy": {"enabled": True}}}).of_kind(
        "NetworkPolicy") == []
