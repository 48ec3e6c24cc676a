"""Scheduler wiring: the KubeSchedulerConfiguration extender entry (checked field by field against
kubescheduler.config.k8s.io/v1 `Extender`, which kubernetes-validate has no schema for), the
default-scheduler snippet, and the second scheduler with the webhook pointing converted pods at it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import yaml
from chart_helpers import NAMESPACE, Rendered, render_values

# kubernetes/kube-scheduler config/v1/types.go `type Extender struct` (json keys).
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
    "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
}
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
CONFIG_FIELDS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "healthzBindAddress",
    "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive",
}
GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")


def check_extender(entry: dict[str, Any], rendered: Rendered) -> None:
    assert set(entry) <= EXTENDER_FIELDS
    assert set(entry["tlsConfig"]) <= TLS_FIELDS
    assert entry["prioritizeVerb"] == "prioritize"
    assert "bindVerb" not in entry and "preemptVerb" not in entry
    # validateExtenders: weight must be positive when prioritizing.
    assert isinstance(entry["weight"], int) and entry["weight"] > 0
    assert entry["nodeCacheCapable"] is True
    assert entry["ignorable"] is True
    # Empty: converted pods carry GPUs in resourceClaims, which managedResources never matches.
    assert entry["managedResources"] == []
    assert GO_DURATION.match(entry["httpTimeout"])
    assert entry["enableHTTPS"] is True
    tls = entry["tlsConfig"]
    # enableHTTPS without a CA silently turns into insecure in kube-scheduler: always give one.
    assert tls["insecure"] is False and tls["caFile"].startswith("/")
    # Verified by name even when urlPrefix is a ClusterIP; the certificate carries this name.
    assert tls["serverName"] == f"gc-gpuclaim-extender.{NAMESPACE}.svc"
    url = urlsplit(entry["urlPrefix"])
    assert url.scheme == "https" and url.port == 443
    service = rendered.one("Service", "-extender")
    assert url.hostname == f"{service['metadata']['name']}.{NAMESPACE}.svc"


def test_default_scheduler_snippet_is_an_ignorable_extender_that_filters_mixed_nodes(render: Any) -> None:
    rendered: Rendered = render("default")
    cm = rendered.one("ConfigMap", "-scheduler-extender")
    snippet = yaml.safe_load(cm["data"]["extenders.yaml"])
    (entry,) = snippet["extenders"]
    check_extender(entry, rendered)
    # mixedNodes: avoid (the default) is the extender's filter: registered, and ignorable like the rest
    assert entry["filterVerb"] == "filter" and entry["ignorable"] is True
    assert entry["weight"] == 5 and entry["httpTimeout"] == "1s"
    assert entry["tlsConfig"]["caFile"] == "/etc/kubernetes/gpuclaim/ca.crt"


def test_filter_verb_and_tuning_come_from_values(render: Any) -> None:
    rendered: Rendered = render("strict")
    entry = yaml.safe_load(rendered.one("ConfigMap", "-scheduler-extender")["data"]["extenders.yaml"])["extenders"][0]
    check_extender(entry, rendered)
    assert (entry["filterVerb"], entry["weight"], entry["httpTimeout"]) == ("filter", 10, "500ms")


def test_mixed_nodes_allow_leaves_a_prioritize_only_extender() -> None:
    rendered = render_values({"config": {"mixedNodes": "allow"}})
    entry = yaml.safe_load(rendered.one("ConfigMap", "-scheduler-extender")["data"]["extenders.yaml"])["extenders"][0]
    assert "filterVerb" not in entry


def test_url_prefix_override_for_a_host_network_scheduler() -> None:
    rendered = render_values({"scheduler": {"extender": {"urlPrefix": "https://10.96.0.42:443"}}})
    entry = yaml.safe_load(rendered.one("ConfigMap", "-scheduler-extender")["data"]["extenders.yaml"])["extenders"][0]
    assert entry["urlPrefix"] == "https://10.96.0.42:443"
    assert entry["tlsConfig"]["serverName"] == f"gc-gpuclaim-extender.{NAMESPACE}.svc"


def test_no_extender_means_no_scheduler_wiring(render: Any) -> None:
    rendered: Rendered = render("no-extender")
    assert not [o for o in rendered.of_kind("ConfigMap") if "scheduler" in o["metadata"]["name"]]
    assert not [o for o in rendered.of_kind("Deployment") if o["metadata"]["name"].endswith("-extender")]


def test_second_scheduler_runs_kube_scheduler_with_the_extender_and_converted_pods_use_it(render: Any) -> None:
    rendered: Rendered = render("second-scheduler")
    config = yaml.safe_load(rendered.one("ConfigMap", "-scheduler")["data"]["config.yaml"])
    assert set(config) <= CONFIG_FIELDS
    assert (config["apiVersion"], config["kind"]) == ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration")
    assert config["profiles"] == [{"schedulerName": "gpuclaim-scheduler"}]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceNamespace": NAMESPACE,
        "resourceName": "gpuclaim-scheduler",
    }
    (entry,) = config["extenders"]
    check_extender(entry, rendered)

    dep = rendered.one("Deployment", "-scheduler")
    assert dep["spec"]["replicas"] == 2
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["image"] == "registry.k8s.io/kube-scheduler:v1.37.2"
    assert "--config=/etc/kubernetes/scheduler/config.yaml" in c["command"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert entry["tlsConfig"]["caFile"] == mounts["ca"] + "/ca.crt"
    # The scheduler gets the CA certificate only, never the serving key.
    assert volumes["ca"]["secret"] == {"secretName": "gc-gpuclaim-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert volumes["config"]["configMap"]["name"] == dep["metadata"]["name"]

    gpuclaim_config = yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"])
    assert gpuclaim_config["conversion"]["schedulerName"] == "gpuclaim-scheduler"


def test_an_explicit_scheduler_name_in_the_config_wins() -> None:
    rendered = render_values(
        {"scheduler": {"second": {"enabled": True}}, "config": {"conversion": {"schedulerName": "volcano"}}}
    )
    gpuclaim_config = yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"])
    assert gpuclaim_config["conversion"]["schedulerName"] == "volcano"


def test_without_a_second_scheduler_the_config_is_exactly_the_values(render: Any) -> None:
    # the values ({}), plus the garbage collector's per-release Lease name (test_chart_rbac) and the client CA the
    # chart mounts (webhook.clientAuth, on by default: test_chart_hardening)
    client_auth = {"webhook": {"clientAuth": {"caFile": "/etc/gpuclaim/client-ca/ca.crt",
                                              "allowedNames": ["kube-apiserver-webhook-client"]}},
                   "extender": {"clientAuth": {"caFile": "/etc/gpuclaim/tls/ca.crt",
                                               "allowedNames": ["gpuclaim-scheduler"]}}}
    assert yaml.safe_load(render("default").one("ConfigMap", "-config")["data"]["config.yaml"]) == {
        "gc": {"leaseName": "gc-gpuclaim-webhook-gc"}, **client_auth}
    values = {"config": {"logging": {"level": "debug"}, "extender": {"policy": "spread"}}}
    rendered = render_values(values)
    extender = {"extender": {**values["config"]["extender"], **client_auth["extender"]}}
    assert yaml.safe_load(rendered.one("ConfigMap", "-config")["data"]["config.yaml"]) == {
        **values["config"], "gc": {"leaseName": "gc-gpuclaim-webhook-gc"}, **client_auth, **extender}
