"""Issue 22 in the chart: the extender's mutual TLS (on by default: the client CA and the one accepted name in
the config, the certs Job issuing kube-scheduler's client certificate, the second scheduler and the default-
scheduler snippet presenting it, cert-manager's second Certificate) and the opt-in NetworkPolicies of both TLS
ports. Rendered with real Helm; tests/realkube/test_realkube_extender_auth.py runs it against the real ones."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from chart_helpers import NAMESPACE, USER_CA_B64, Rendered, render_values

from gpuclaim.dra.config import load_config

SECOND = {"scheduler": {"second": {"enabled": True}}}
OFF = {"extender": {"clientAuth": {"enabled": False}}}
PEER = {"ipBlock": {"cidr": "10.0.0.0/24"}}


def _pod(rendered: Rendered, suffix: str) -> dict[str, Any]:
    deployment = next(d for d in rendered.of_kind("Deployment") if d["metadata"]["name"].endswith(suffix))
    return deployment["spec"]["template"]["spec"]


def _config(rendered: Rendered) -> dict[str, Any]:
    return yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"]) or {}


def _entries(rendered: Rendered, key: str) -> list[dict[str, Any]]:
    """The extenders[] of the ConfigMap whose `key` holds them (the second scheduler's config.yaml, or the
    default-scheduler snippet extenders.yaml)."""
    docs = [yaml.safe_load(m["data"][key]) for m in rendered.of_kind("ConfigMap") if key in (m.get("data") or {})]
    (doc,) = [d for d in docs if isinstance(d, dict) and "extenders" in d]
    return list(doc["extenders"])


def test_mutual_tls_is_on_by_default_with_the_serving_ca_and_one_name() -> None:
    rendered = render_values({})
    config = _config(rendered)
    assert config["extender"]["clientAuth"] == {"caFile": "/etc/gpuclaim/tls/ca.crt",
                                                "allowedNames": ["gpuclaim-scheduler"]}
    assert load_config(config).extender.client_auth.allowed_names == ("gpuclaim-scheduler",)  # the server takes it
    tls = next(v for v in _pod(rendered, "-extender")["volumes"] if v["name"] == "tls")
    assert [i["key"] for i in tls["secret"]["items"]] == ["tls.crt", "tls.key", "ca.crt"]
    (script,) = rendered.one("Job")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--client-name=gpuclaim-scheduler" in script
    # the webhook mounts no more than before
    webhook_tls = next(v for v in _pod(rendered, "-webhook")["volumes"] if v["name"] == "tls")
    assert [i["key"] for i in webhook_tls["secret"]["items"]] == ["tls.crt", "tls.key"]
    # the snippet for a default scheduler presents the files NOTES tells the admin to copy
    (entry,) = _entries(rendered, "extenders.yaml")
    assert entry["tlsConfig"] == {"insecure": False, "serverName": "gc-gpuclaim-extender.gpuclaim-system.svc",
                                  "caFile": "/etc/kubernetes/gpuclaim/ca.crt",
                                  "certFile": "/etc/kubernetes/gpuclaim/client.crt",
                                  "keyFile": "/etc/kubernetes/gpuclaim/client.key"}
    assert "/etc/kubernetes/gpuclaim/client.crt" in rendered.notes and "client\\.key" in rendered.notes


def test_turned_off_nothing_of_it_is_rendered() -> None:
    rendered = render_values({**OFF, **SECOND})
    assert "clientAuth" not in _config(rendered).get("extender", {})
    (script,) = rendered.one("Job")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--client-name" not in script
    (entry,) = _entries(rendered, "config.yaml")
    assert "certFile" not in entry["tlsConfig"] and "keyFile" not in entry["tlsConfig"]
    assert all(v["name"] != "client" for v in _pod(rendered, "-scheduler")["volumes"])


@pytest.mark.parametrize(("values", "secret", "items"), [
    ({}, "gc-gpuclaim-tls", ["client.crt", "client.key"]),
    ({"certs": {"mode": "secret", "secretName": "mine", "caBundle": USER_CA_B64}}, "mine", ["client.crt", "client.key"]),
    ({"certs": {"mode": "cert-manager"}}, "gc-gpuclaim-scheduler-client", ["tls.crt", "tls.key"]),
], ids=["builtin", "user-secret", "cert-manager"])  # fmt: skip
def test_the_second_scheduler_presents_the_client_certificate(values: dict[str, Any], secret: str,
                                                              items: list[str]) -> None:
    rendered = render_values({**values, **SECOND})
    pod = _pod(rendered, "-scheduler")
    client = next(v for v in pod["volumes"] if v["name"] == "client")
    assert client["secret"]["secretName"] == secret
    assert [(i["key"], i["path"]) for i in client["secret"]["items"]] == list(zip(items, ["client.crt", "client.key"],
                                                                              strict=True))
    assert client["secret"]["defaultMode"] == 0o440  # the key: readable by the pod's group only
    (container,) = pod["containers"]
    assert {"name": "client", "mountPath": "/etc/gpuclaim/client", "readOnly": True} in container["volumeMounts"]
    (entry,) = _entries(rendered, "config.yaml")
    assert entry["tlsConfig"]["certFile"] == "/etc/gpuclaim/client/client.crt"
    assert entry["tlsConfig"]["keyFile"] == "/etc/gpuclaim/client/client.key"
    if values.get("certs", {}).get("mode") == "cert-manager":
        cert = next(c for c in rendered.of_kind("Certificate") if c["metadata"]["name"] == secret)
        assert cert["spec"]["secretName"] == secret and cert["spec"]["commonName"] == "gpuclaim-scheduler"
        assert cert["spec"]["usages"] == ["client auth", "digital signature"]
        serving = next(c for c in rendered.of_kind("Certificate") if c["metadata"]["name"].endswith("-serving"))
        assert cert["spec"]["issuerRef"] == serving["spec"]["issuerRef"]  # the serving Secret's ca.crt signs it


def test_a_custom_name_reaches_the_certificate_and_the_config() -> None:
    rendered = render_values({"extender": {"clientAuth": {"name": "sched.example"}}})
    assert _config(rendered)["extender"]["clientAuth"]["allowedNames"] == ["sched.example"]
    (script,) = rendered.one("Job")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert re.search(r"--client-name=sched\.example\b", script)


def _policies(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"].removeprefix("gc-gpuclaim-"): p for p in rendered.of_kind("NetworkPolicy")}


def test_the_tls_port_policies_admit_only_their_peers_and_the_scheduler_pods() -> None:
    rendered = render_values({"webhook": {"networkPolicy": {"enabled": True, "from": [PEER]}},
                              "extender": {"networkPolicy": {"enabled": True}}, **SECOND})
    policies = _policies(rendered)
    assert set(policies) == {"webhook", "extender"}
    for name, policy in policies.items():
        assert policy["metadata"]["namespace"] == NAMESPACE and policy["spec"]["policyTypes"] == ["Ingress"]
        tls, metrics, *fleet = policy["spec"]["ingress"]
        assert tls["ports"] == [{"port": 8443, "protocol": "TCP"}]
        assert metrics == {"ports": [{"port": 9090, "protocol": "TCP"}]}  # no metrics policy: open
        assert fleet == ([{"ports": [{"port": 8444, "protocol": "TCP"}]}] if name == "extender" else [])  # open
        if name == "webhook":
            assert tls["from"] == [PEER]
    (scheduler_peer,) = policies["extender"]["spec"]["ingress"][0]["from"]
    labels = next(d for d in rendered.of_kind("Deployment") if d["metadata"]["name"].endswith("-scheduler"))[
        "spec"]["template"]["metadata"]["labels"]
    assert scheduler_peer["podSelector"]["matchLabels"].items() <= labels.items()  # it selects the scheduler pods
    extender_labels = next(d for d in rendered.of_kind("Deployment") if d["metadata"]["name"].endswith("-extender"))[
        "spec"]["template"]["metadata"]["labels"]
    assert not scheduler_peer["podSelector"]["matchLabels"].items() <= extender_labels.items()


def test_tls_and_metrics_policies_share_one_object_per_server() -> None:
    """Policies add up: a separate open TLS rule (the metrics policy's) would undo the closed one."""
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    rendered = render_values({"webhook": {"networkPolicy": {"enabled": True, "from": [PEER]}},
                              "metrics": {"networkPolicy": {"enabled": True, "from": [monitoring]}}})
    policies = _policies(rendered)
    assert set(policies) == {"webhook", "extender"}
    tls, metrics = policies["webhook"]["spec"]["ingress"]
    assert tls["from"] == [PEER] and metrics["from"] == [monitoring]
    open_tls, _metrics, _fleet = policies["extender"]["spec"]["ingress"]  # its own TLS policy is off: open
    assert "from" not in open_tls


@pytest.mark.parametrize(("values", "message"), [
    ({"webhook": {"networkPolicy": {"enabled": True}}}, "webhook.networkPolicy.enabled needs webhook.networkPolicy.from"),
    ({"extender": {"networkPolicy": {"enabled": True}}},
     "extender.networkPolicy.enabled needs scheduler.second.enabled or extender.networkPolicy.from"),
], ids=["webhook", "extender"])  # fmt: skip
def test_a_tls_policy_without_peers_is_refused_naming_the_values(values: dict[str, Any], message: str) -> None:
    """An empty `from` would read as "from everywhere"; no rule at all would shut the callers out."""
    with pytest.raises(Exception, match=re.escape(message)):
        render_values(values)
