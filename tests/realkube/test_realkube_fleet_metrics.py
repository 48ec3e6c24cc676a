"""The fleet metrics on the real control plane (one run per minor under test): the extender `python -m e2e.kube up`
runs exports gpuclaim_fleet_* on its metrics port, counting every device the real ResourceSlices publish, agreeing
with its fleet API (asked with a TokenRequest token the real TokenReview and SubjectAccessReview accept), and a pod
the real kube-scheduler places moves its devices to `allocated` on its node without anything restarting."""

from __future__ import annotations

import ssl
import time
import urllib.request
import uuid
from collections import Counter
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families
from realkube_cluster import Kube, gpu_pod

from gpuclaim.fleet import metrics

RBAC = "rbac.authorization.k8s.io"
Key = tuple[str, str, str, str]  # node, driver, model, state


def _token(kube: Kube, ns: str, name: str) -> str:
    kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": ns, "name": name}})
    answer = kube.api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(answer["status"]["token"])


def _scrape(kube: Kube) -> dict[str, list[Any]]:
    port = kube.state["gpuclaimPorts"]["extender-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text) if f.name in metrics.NAMES}


def _exported(families: dict[str, list[Any]]) -> Counter[Key]:
    return Counter({(s.labels["node"], s.labels["driver"], s.labels["model"], s.labels["state"]): s.value
                    for s in families.get(metrics.DEVICES, ())})


def _fleet(kube: Kube, token: str) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(kube.run / "tls" / "ca.crt"))
    context.check_hostname = False  # the serving certificate names the chart's Service, not 127.0.0.1
    request = urllib.request.Request(f"https://127.0.0.1:{kube.state['gpuclaimPorts']['fleet']}/api/v1/fleet",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=context, timeout=30) as reply:
        return dict(orjson.loads(reply.read()))


def _shown(fleet: dict[str, Any]) -> Counter[Key]:
    out: Counter[Key] = Counter()
    for node in fleet["nodes"]:
        for group in node["groups"]:
            for d in group["devices"]:
                out[(node["name"], d["driver"], d["model"] or "", d["state"])] += 1
    return out


def _published(kube: Kube) -> Counter[str]:
    """Devices per node, from the real apiserver's ResourceSlices (the truth the metrics must count)."""
    out: Counter[str] = Counter()
    for s in kube.api.list("ResourceSlice"):
        if s["spec"].get("nodeName"):
            out[s["spec"]["nodeName"]] += len(s["spec"].get("devices") or ())
    return +out


def _per_node(counts: Counter[Key]) -> Counter[str]:
    out: Counter[str] = Counter()
    for (node, *_), n in counts.items():
        out[node] += int(n)
    return +out


def _allocated_on(counts: Counter[Key], node: str) -> int:
    return int(sum(n for (name, _, _, state), n in counts.items() if name == node and state == "allocated"))


def test_the_extenders_fleet_metrics_count_the_real_slices_and_follow_the_scheduler(kube: Kube) -> None:
    role = f"fleet-metrics-viewer-{uuid.uuid4().hex[:6]}"
    with kube.scratch_namespace("fleet-metrics") as ns:
        kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": role},
                         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                                   {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                                    "verbs": ["list"]}]})
        kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
                         "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                         "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": "admin"}]})
        try:
            token = _token(kube, ns, "admin")
            published = _published(kube)
            deadline = time.monotonic() + 60
            while _per_node(_exported(_scrape(kube))) != published:  # the extender's cache has every slice
                assert time.monotonic() < deadline, (_per_node(_exported(_scrape(kube))), published)
                time.sleep(0.5)
            before = _exported(_scrape(kube))

            kube.api.create(gpu_pod("metrics-sees-me", ns, 2))
            pod = kube.wait_bound(ns, "metrics-sees-me", timeout=60)
            node = pod["spec"].get("nodeName")
            assert node, pod.get("status")
            deadline = time.monotonic() + 30
            while _allocated_on(_exported(_scrape(kube)), node) < _allocated_on(before, node) + 2:
                assert time.monotonic() < deadline, "the scheduled pod's devices never counted as allocated"
                time.sleep(0.5)

            # the metrics port and the fleet API read one index: once both are at one revision they agree exactly
            deadline = time.monotonic() + 30
            while True:
                families = _scrape(kube)
                fleet = _fleet(kube, token)
                if +_exported(families) == _shown(fleet):
                    break
                assert time.monotonic() < deadline, (+_exported(families) - _shown(fleet),
                                                     _shown(fleet) - +_exported(families))
                time.sleep(0.5)
            assert _per_node(_shown(fleet)) == published
            assert fleet["scope"]["clusterWide"] is True
            held = [d for n in fleet["nodes"] if n["name"] == node for g in n["groups"] for d in g["devices"]
                    if {"namespace": ns, "name": "metrics-sees-me"} in d["pods"]]
            assert len(held) == 2 and all(d["state"] == "allocated" for d in held), held
            largest = {(s.labels["node"], s.labels["driver"]): s.value
                       for s in families[metrics.LARGEST_FREE_TIGHT_GROUP]}
            stranded = {(s.labels["node"], s.labels["driver"]): s.value for s in families[metrics.STRANDED]}
            for entry in fleet["nodes"]:
                if len(entry["drivers"]) == 1:
                    key = (entry["name"], entry["drivers"][0])
                    assert largest[key] == entry["summary"]["largestFreeTightGroup"], key
                    assert stranded[key] == entry["summary"]["stranded"], key
            # no label value names a pod, claim or namespace
            values = {v for samples in families.values() for s in samples for v in s.labels.values()}
            assert not any(ns in v or "metrics-sees-me" in v for v in values)
        finally:
            kube.api.delete(f"/apis/{RBAC}/v1/clusterrolebindings/{role}", grace=None)
            kube.api.delete(f"/apis/{RBAC}/v1/clusterroles/{role}", grace=None)
