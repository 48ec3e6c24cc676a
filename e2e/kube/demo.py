"""The demo story on the real control plane: `gpuclaim demo`'s workloads (gpuclaim/demo/workloads.py) through the
real admission chain (gpuclaim's webhooks as registered by the chart), the real resourceclaim controller and the
real kube-scheduler (DynamicResources plugin + gpuclaim's extender); then, per scheduled pod, the devices the
scheduler allocated (its claims' `status.allocation`) against the devices the extender's own prediction code
says the allocator picks on the chosen node.

The workloads go in one at a time, each after the previous pod is bound, so the state the prediction is computed
on is exactly the one the scheduler allocated from: the cluster after the pod was bound, minus the pod's own fresh
allocations. A claim that was already allocated before the pod came (the second pod of a sharing group joins the
first one's claim) is not predicted, it is reused: its devices count as predicted as they stand.

    report = run(api, config_path)     # the `-o json` object; report["ok"] says whether to exit 0
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

from e2e.kube.api import Api, ApiError, collection, path_of
from gpuclaim.demo import workloads as wl

Obj = dict[str, Any]
BIND_TIMEOUT = float(os.environ.get("GPUCLAIM_KUBE_BIND_TIMEOUT", "30"))
EXPECTED = {"converted": "converted-scheduled", "untouched": "untouched-scheduled", "denied": "denied"}
SNAPSHOT_KINDS = ("ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "Node")


def snapshot(api: Api) -> dict[str, list[Obj]]:
    """The objects the extender predicts from, DeviceTaintRules where served (1.37), and the cluster's /version
    (``Version``: the prediction follows that version's kube-scheduler)."""
    out: dict[str, list[Obj]] = {}
    for kind in SNAPSHOT_KINDS:
        out[kind] = [{**item, "kind": kind, "apiVersion": "v1" if kind == "Node" else "resource.k8s.io/v1"}
                     for item in api.list(kind)]
    status, rules = api.request("GET", collection("DeviceTaintRule"))
    if status not in (200, 404):
        raise ApiError("GET", collection("DeviceTaintRule"), status, rules)
    out["DeviceTaintRule"] = [{**item, "kind": "DeviceTaintRule", "apiVersion": "resource.k8s.io/v1"}
                              for item in (rules.get("items") or []) if status == 200]
    out["Version"] = [api.get("/version")]
    return out


def device_ids(claim: Obj) -> list[str]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
    return [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]


def pod_claim_names(pod: Obj) -> list[str]:
    """The ResourceClaim names the pod uses: named ones, and those the controller made from templates."""
    generated = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get(
        "resourceClaimStatuses") or ()}
    out = []
    for ref in pod["spec"].get("resourceClaims") or ():
        name = ref.get("resourceClaimName") or generated.get(ref["name"])
        if name:
            out.append(name)
    return out


def allocated_and_predicted(pod: Obj, objects: dict[str, list[Obj]], config: Any) -> tuple[list[str], list[str], str]:
    """(allocated devices, predicted devices, the extender's reason for the chosen node)."""
    from gpuclaim.demo.scenario import predictions

    namespace, node, uid = pod["metadata"]["namespace"], pod["spec"]["nodeName"], pod["metadata"]["uid"]
    names = set(pod_claim_names(pod))
    claims = [c for c in objects["ResourceClaim"]
              if c["metadata"]["namespace"] == namespace and c["metadata"]["name"] in names]
    allocated = sorted(d for c in claims for d in device_ids(c))
    reused: list[str] = []
    before = copy.deepcopy(objects)
    for claim in before["ResourceClaim"]:
        if claim["metadata"]["namespace"] != namespace or claim["metadata"]["name"] not in names:
            continue
        reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or ()]
        if reserved and reserved != [uid]:
            reused += device_ids(claim)  # allocated for an earlier consumer: the pod joins it
        else:
            claim.pop("status", None)  # the pod's own allocation: what the extender had to predict
    rows = {r["node"]: r for r in predictions(pod, before, config)}
    row = rows.get(node)
    if row is None:
        return allocated, sorted(reused), f"the extender's prediction has no row for {node}"
    return allocated, sorted([*reused, *row["devices"]]), str(row["reason"])


def cleanup(api: Api, workloads: list[wl.Workload]) -> None:
    """Remove what an earlier demo run left (grace 0: no kubelet) and wait until it is gone."""
    paths = []
    for w in workloads:
        path = f"{w.path}/{w.name}"
        if api.delete(path) != 404:
            paths.append(path)
    shared = [f"/apis/resource.k8s.io/v1/namespaces/{wl.WORKLOAD_NAMESPACE}/resourceclaims/{c['metadata']['name']}"
              for c in api.list("ResourceClaim", wl.WORKLOAD_NAMESPACE)]
    for path in shared:
        if api.delete(path) != 404:
            paths.append(path)
    deadline = time.monotonic() + 60
    while paths and time.monotonic() < deadline:
        paths = [p for p in paths if api.request("GET", p)[0] != 404]
        time.sleep(0.2)


def wait_bound(api: Api, pod: Obj, timeout: float = BIND_TIMEOUT) -> Obj:
    deadline = time.monotonic() + timeout
    while True:
        current = api.get(path_of({**pod, "kind": "Pod"}))
        if current["spec"].get("nodeName") or time.monotonic() > deadline:
            return current
        time.sleep(0.1)


def run(api: Api, config_path: Path) -> Obj:
    from gpuclaim.commands._config import load_config_file

    config = load_config_file(config_path).extender
    version = api.get("/version")
    workloads = wl.workloads()
    cleanup(api, workloads)
    started = time.monotonic()
    entries = []
    for w in workloads:
        entries.append(_play(api, w, config))
    ok = all(e["outcome"] == e["expected"] and e["allocated"] == e["predicted"] for e in entries)
    return {"kubernetes": version["gitVersion"], "workloads": entries, "ok": ok,
            "seconds": round(time.monotonic() - started, 2),
            "note": "real etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from Go modules; "
                    "fake Nodes (no kubelet) with real ResourceSlices"}


def _play(api: Api, w: wl.Workload, config: Any) -> Obj:
    entry: Obj = {"name": w.name, "key": w.key, "kind": w.kind, "namespace": w.namespace,
                  "expected": EXPECTED[w.expect], "outcome": "", "node": None, "allocated": [], "predicted": []}
    status, body = api.request("POST", w.path, w.obj)
    entry["httpStatus"] = status
    if status != 201:
        entry.update(outcome="denied", message=body.get("message"))
        return entry
    if w.kind != "Pod":
        entry.update(outcome="pending", message="created: the apiserver and the webhooks accepted it")
        return entry
    converted = bool(body["spec"].get("resourceClaims")) and not w.obj["spec"].get("resourceClaims")
    entry["claimTemplates"] = [r.get("resourceClaimTemplateName") or r.get("resourceClaimName")
                               for r in body["spec"].get("resourceClaims") or ()]
    pod = wait_bound(api, body)
    node = pod["spec"].get("nodeName")
    kind = "converted" if converted else "untouched"
    if not node:
        entry.update(outcome="pending", message=_unschedulable(pod))
        return entry
    try:
        allocated, predicted, reason = allocated_and_predicted(pod, snapshot(api), config)
    except ApiError as exc:
        allocated, predicted, reason = [], [], f"snapshot failed: {exc}"
    entry.update(outcome=f"{kind}-scheduled", node=node, allocated=allocated, predicted=predicted,
                 reason=reason)
    return entry


def _unschedulable(pod: Obj) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return f"{condition.get('reason')}: {condition.get('message')}"
    return f"not bound after {BIND_TIMEOUT:.0f}s"


def text(report: Obj) -> str:
    lines = [f"Kubernetes {report['kubernetes']} (real control plane, fake GPU nodes); {report['seconds']}s"]
    for e in report["workloads"]:
        mark = "ok " if e["outcome"] == e["expected"] and e["allocated"] == e["predicted"] else "BAD"
        lines.append(f"{mark} {e['namespace']}/{e['name']}: {e['outcome']} (expected {e['expected']})"
                     + (f" on {e['node']}" if e["node"] else ""))
        if e.get("message"):
            lines.append(f"      {e['message']}")
        if e["allocated"] or e["predicted"]:
            same = "= predicted" if e["allocated"] == e["predicted"] else f"!= predicted {e['predicted']}"
            lines.append(f"      allocated {', '.join(e['allocated'])} {same}")
    lines.append("all as expected, every allocation predicted" if report["ok"] else "NOT all as expected")
    return "\n".join(lines)
