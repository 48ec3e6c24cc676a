"""`python -m e2e.bench scheduler [--quick] [--kubernetes-version X.Y] [--shapes S[,S...]] [--pairs N]`: the real
kube-scheduler (built from Go modules, the newest minor by default) scheduling one-GPU pods on fake GPU nodes
with real ResourceSlices, without and with gpuclaim's extender, on scheduler_perf's DRA shapes; and pod-create
latency through the real kube-apiserver without and with gpuclaim's webhooks.

The shapes are those of upstream's scheduler_perf DRA workloads (test/integration/scheduler_perf/dra): 500 nodes
(--quick: 50) with 10 devices each, claims made from templates, and the cluster empty, half full or full when the
measured pods arrive. Nodes are cloned from the demo fleet's 8-GPU p5/p4d nodes and given two more GPUs on a
PCIe root of their own, so the extender has real topology to score. The fill ("init") pods are one-GPU pods in a
namespace of their own, converted by the webhook and placed by the scheduler before the measurement: none for
empty, half the devices for half, all devices but the measured pods' for full (the measured pods then fill the
cluster to the last device). A measured run: the scheduler stopped, N one-GPU pods created one after another by
one keep-alive client (each create timed; each converted to a ResourceClaimTemplate), the resourceclaim
controller makes their N claims, then the scheduler starts (with or without the chart's extenders[]) and the time
from its first bind to its last gives the throughput; the measured pods are deleted again before the next run.

Create latency is measured first, on the idle cluster with the scheduler stopped, so every run has it, whichever
`--shapes` it measures (the full shape's fill alone takes many minutes here): N creates with the webhooks, then
the same pod N times without them (unconverted, it would never schedule on 1.35: no node advertises
nvidia.com/gpu), each batch deleted again.

Each shape is measured in `--pairs` pairs of runs (3 by default), without and with the extender, the order
alternating from pair to pair: on two shared cores one pair's ratio moved between 0.81 and 1.08 within 15
minutes for the same code (2026-11-27), so the figure is the median of the pairs' ratios, each pair's kept.
Figures per shape (`shapes.<name>`): `pods_per_s_without`, `pods_per_s_with` (medians), `ratio`, `ratios`,
`cpu_ms_per_pod_without` / `_with` (CPU ms per measured pod of each process of the stack); overall `ratio_min`
(target >= 0.9 on every shape), `create_p50_ms_*`, `create_p99_ms_without`, `create_p99_ms_with`,
`create_overhead_p99_ms` (target <= 10). Also `create_p99_ms_native` and `create_overhead_vs_native_p99_ms`: the
converted pod written DRA-native by hand and created without the webhooks, so the resourceclaim controller makes a
claim behind each create as it does with them: the part of the overhead that is gpuclaim's own. `kubernetes` is
the version the cluster's /version reports.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.bench import procs
from e2e.kube import build, install
from e2e.kube.api import Api, collection
from e2e.kube.cluster import stop_procs
from e2e.kube.install import wait_default_sa
from e2e.kube.stack import Stack

Obj = dict[str, Any]
NAMESPACE = "bench"
FILL_NAMESPACE = "bench-fill"  # the init pods, kept out of the measured namespace's lists
DEVICES_PER_NODE = 10  # scheduler_perf's DRA shapes
#: the part of the devices in use before the measured pods come; "full" is computed: all but theirs
SHAPES = ("empty", "half", "full")
WEBHOOKS = ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpuclaim-webhook",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpuclaim-webhook")


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _pod(name: str, namespace: str = NAMESPACE) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                     "resources": {"limits": {"nvidia.com/gpu": 1},
                                                   "requests": {"cpu": "100m", "memory": "128Mi"}}}]}}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _native_pod(converted: Obj) -> Callable[[str], Obj]:
    """The DRA-native pod a workload team would write instead: `_pod` as gpuclaim converted it (its
    resourceClaims and container resources), none of the fields the apiserver defaulted."""

    def make(name: str) -> Obj:
        pod = _pod(name)
        pod["spec"]["resourceClaims"] = converted["spec"]["resourceClaims"]
        pod["spec"]["containers"][0]["resources"] = converted["spec"]["containers"][0]["resources"]
        return pod

    return make


def _create_all(api: Api, count: int, prefix: str, make: Callable[[str], Obj] = _pod, *, first: int = 0,
                namespace: str = NAMESPACE) -> list[float]:
    latencies = []
    for i in range(first, first + count):
        started = time.perf_counter()
        status, body = api.request("POST", collection("Pod", namespace), make(f"{prefix}-{i:04d}"))
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 201:
            raise RuntimeError(f"pod create {i}: {status} {body.get('message')}")
    return latencies


def _wait(what: str, check: Any, timeout: float, interval: float = 0.25) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)
    return time.monotonic()


def _delete_all(api: Api) -> None:
    for pod in api.list("Pod", NAMESPACE):
        api.delete(f"{collection('Pod', NAMESPACE)}/{pod['metadata']['name']}")
    _wait("pods and claims gone", lambda: not api.list("Pod", NAMESPACE) and not api.list("ResourceClaim", NAMESPACE),
          timeout=300, interval=0.5)


def _schedule_run(stack: Stack, api: Api, count: int, *, extender: bool, label: str) -> Obj:
    latencies = _create_all(api, count, label)
    _wait(f"{count} claims", lambda: len(api.list("ResourceClaim", NAMESPACE)) >= count, timeout=300)
    cpu_before = _cpu_seconds(stack)
    started = time.monotonic()
    stack.plane.start_scheduler(stack.gpuclaim.extenders() if extender else [])
    ready = time.monotonic()
    first = None
    while True:
        bound = sum(1 for p in api.list("Pod", NAMESPACE) if p["spec"].get("nodeName"))
        now = time.monotonic()
        if bound and first is None:
            first = (now, bound)
        if bound >= count:
            break
        if now - started > 900:
            raise RuntimeError(f"{label}: {bound} of {count} bound after 900 s")
        time.sleep(0.1)
    assert first is not None
    cpu = {name: round(seconds - cpu_before.get(name, 0.0), 2) for name, seconds in _cpu_seconds(stack).items()}
    stop_procs([stack.plane.procs.pop("kube-scheduler")])
    span = max(now - first[0], 1e-3)
    _log(f"  {label}: {count} bound in {now - ready:.1f}s")
    claims = api.list("ResourceClaim", NAMESPACE)
    allocated = sum(1 for c in claims if (c.get("status") or {}).get("allocation"))
    _delete_all(api)
    return {"pods_per_s": round((count - first[1]) / span, 1) if count > first[1] else None,
            "bind_all_s": round(now - ready, 2), "scheduler_start_s": round(ready - started, 2),
            "allocated": allocated, "create_ms": latencies, "cpu_s": cpu}


def _per_pod(cpu_s: list[dict[str, float]], pods: int) -> dict[str, float]:
    return {name: round(statistics.median(run.get(name, 0.0) for run in cpu_s) * 1000 / pods, 2)
            for name in cpu_s[0]}


def _cpu_seconds(stack: Stack) -> dict[str, float]:
    """CPU seconds (user + system) each process of the stack has used so far, from /proc: on two shared cores a
    throughput ratio moves with the machine's load, the CPU each component spends per pod much less."""
    out: dict[str, float] = {}
    pids = [(name, proc.pid) for name, proc in [*stack.plane.procs.items(), *stack.gpuclaim.procs.items()]]
    for name, pid in [*pids, ("bench", os.getpid())]:  # the bench's own polling of the pods is on the cores too
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            out[name] = procs.cpu_seconds(pid)
    return out


def _ten_device_nodes(plan: install.FleetPlan) -> None:
    """scheduler_perf's nodes have 10 devices: each cloned 8-GPU slice gets two more GPUs (copies of its first,
    with their own names, UUIDs and bus IDs) behind a PCIe root of their own."""
    for obj in plan.setup:
        if obj["kind"] != "ResourceSlice" or obj["spec"]["driver"] != install.inventory.DRIVER:
            continue
        devices = obj["spec"]["devices"]
        for n in range(len(devices), DEVICES_PER_NODE):
            extra = copy.deepcopy(devices[0])
            extra["name"] = f"gpu-{n}"
            attrs = extra["attributes"]
            attrs["uuid"] = {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, obj['metadata']['name'] + str(n))}"}
            attrs["resource.kubernetes.io/pciBusID"] = {"string": f"0000:e{n}:00.0"}
            attrs["resource.kubernetes.io/pcieRoot"] = {"string": "pci0000:e0"}
            devices.append(extra)


def _extender_calls(stack: Stack) -> tuple[float, float]:
    """(prioritize calls, their seconds) so far, from the extender's own request_duration_seconds histogram."""
    import urllib.request

    url = f"http://127.0.0.1:{stack.gpuclaim.ports['extender-metrics']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    count = total = 0.0
    for line in text.splitlines():
        if 'verb="prioritize"' in line and line.startswith("gpuclaim_extender_request_duration_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
        elif 'verb="prioritize"' in line and line.startswith("gpuclaim_extender_request_duration_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
    return count, total


def _fill(stack: Stack, api: Api, target: int, have: int) -> int:
    """Top the fill namespace up to `target` bound one-GPU pods, placed by the scheduler without the extender."""
    if target <= have:
        return have
    _log(f"filling: {target - have} more pods ({target} in all)")
    _create_all(api, target - have, "fill", lambda name: _pod(name, FILL_NAMESPACE), first=have,
                namespace=FILL_NAMESPACE)
    stack.plane.start_scheduler([])
    _wait(f"{target} fill pods bound",
          lambda: sum(1 for p in api.list("Pod", FILL_NAMESPACE) if p["spec"].get("nodeName")) >= target,
          timeout=1800, interval=1)
    stop_procs([stack.plane.procs.pop("kube-scheduler")])
    return target


def _create_latency(api: Api, count: int, native: Callable[[str], Obj]) -> dict[str, list[float]]:
    """`count` timed pod creates each way, on the idle cluster (scheduler stopped): with the webhooks (converted to
    a claim template), without them (the same pod, unconverted), and the DRA-native pod without them."""
    _log(f"{count} pod creates with the webhooks")
    with_webhooks = _create_all(api, count, "converted")
    _delete_all(api)
    _log(f"{count} pod creates without the webhooks")
    registrations = [api.get(path) for path in WEBHOOKS]
    for path in WEBHOOKS:
        api.delete(path, grace=None)
    time.sleep(2)  # the apiserver's webhook configuration informer drops them
    plain = _create_all(api, count, "plain")
    _delete_all(api)
    # the same work behind each create as with the webhooks (the resourceclaim controller makes a claim per pod,
    # on the same 2 cores), minus gpuclaim: what the webhooks add over writing the DRA pod by hand
    dra_native = _create_all(api, count, "native", native)
    _delete_all(api)
    for registration in registrations:
        for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            registration["metadata"].pop(key, None)
        api.create(registration)
    time.sleep(2)  # and picks them up again before the measured runs, whose pods must be converted
    return {"with": with_webhooks, "without": plain, "native": dra_native}


def _measure_shape(stack: Stack, api: Api, pods: int, shape: str, filled: int, pairs: int) -> Obj:
    """`pairs` runs without and with the extender, alternating which goes first (without-with, with-without, ...),
    so a change in the machine's load during the shape falls on both sides; the ratio is the median of the
    pairs' ratios, and every pair's is kept."""
    runs: dict[bool, list[Obj]] = {False: [], True: []}
    calls = seconds = 0.0
    for pair in range(pairs):
        for extender in ((False, True) if pair % 2 == 0 else (True, False)):
            side = "with" if extender else "without"
            _log(f"{shape} ({filled} devices in use), pair {pair + 1} of {pairs}: {pods} pods, {side} the extender")
            calls_before, seconds_before = _extender_calls(stack)
            runs[extender].append(_schedule_run(stack, api, pods, extender=extender, label=f"{shape}-{side}"))
            calls_after, seconds_after = _extender_calls(stack)
            if extender:
                calls, seconds = calls + calls_after - calls_before, seconds + seconds_after - seconds_before
            _log(f"  {runs[extender][-1]['pods_per_s']} pods/s")
    without, with_ext = runs[False], runs[True]
    ratios = [round(w["pods_per_s"] / o["pods_per_s"], 3) for o, w in zip(without, with_ext, strict=True)
              if o["pods_per_s"] and w["pods_per_s"]]
    figures: Obj = {"devices_in_use_before": filled, "pairs": pairs,
                    "pods_per_s_without": _median_of(without, "pods_per_s"),
                    "pods_per_s_with": _median_of(with_ext, "pods_per_s"),
                    "pods_per_s_runs_without": [r["pods_per_s"] for r in without],
                    "pods_per_s_runs_with": [r["pods_per_s"] for r in with_ext],
                    "allocated_without": min(r["allocated"] for r in without),
                    "allocated_with": min(r["allocated"] for r in with_ext),
                    # CPU ms per measured pod, per process (median over the runs): where the extender's cost
                    # lands on the cores, which moves far less with the machine's load than throughput does
                    "cpu_ms_per_pod_without": _per_pod([r["cpu_s"] for r in without], pods),
                    "cpu_ms_per_pod_with": _per_pod([r["cpu_s"] for r in with_ext], pods),
                    # the extender's own time per call, as it measures it: what it adds to a cycle
                    "extender_calls": int(calls),
                    "extender_ms_per_call": round(seconds * 1000 / max(calls, 1), 3)}
    if ratios:
        figures["ratio"] = round(statistics.median(ratios), 3)
        figures["ratios"] = ratios
    return figures


def _median_of(runs: list[Obj], key: str) -> float | None:
    values = [r[key] for r in runs if r[key]]
    return round(statistics.median(values), 1) if values else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes, pods = (50, 50) if args.quick else (500, 500)
    devices = nodes * DEVICES_PER_NODE
    binaries = build.ensure(build.cache_dir(), args.kubernetes_version, log=_log)
    run_dir = Path(tempfile.mkdtemp(prefix="gpuclaim-bench-scheduler-"))
    shutil.rmtree(run_dir)
    started = time.monotonic()
    _log(f"starting the control plane with {nodes} fake {DEVICES_PER_NODE}-GPU nodes")
    plan = install.demo_fleet(nodes, whole_gpus=8)
    _ten_device_nodes(plan)
    stack = Stack.start(run_dir, binaries, fleet=plan, extenders=False)
    shapes: dict[str, Obj] = {}
    try:
        setup_s = time.monotonic() - started
        stop_procs([stack.plane.procs.pop("kube-scheduler")])
        api = stack.plane.api()
        kubernetes = api.get("/version")["gitVersion"]  # what really ran, not what was asked for
        api.apply_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                       for ns in (NAMESPACE, FILL_NAMESPACE)])
        for ns in (NAMESPACE, FILL_NAMESPACE):
            wait_default_sa(api, ns)
        _create_all(api, 20, "warmup")  # the template exists, connections and caches are warm
        native = _native_pod(api.get(f"{collection('Pod', NAMESPACE)}/warmup-0000"))
        _delete_all(api)
        # create latency first: it needs no fill, so a run cut short in the shapes still has it
        creates = _create_latency(api, pods, native)
        _log("create p99 ms: " + ", ".join(f"{k} {round(_percentile(v, 0.99), 2)}" for k, v in creates.items()))
        filled = 0
        for shape in args.shapes:
            target = {"empty": 0, "half": devices // 2, "full": devices - pods}[shape]
            filled = _fill(stack, api, target, filled)
            shapes[shape] = _measure_shape(stack, api, pods, shape, filled, args.pairs)
        api.close()
    finally:
        stack.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    out: Obj = {
        "nodes": nodes, "devices_per_node": DEVICES_PER_NODE, "pods": pods, "kubernetes": kubernetes,
        "shapes": shapes,
        **{f"create_p50_ms_{k}": round(statistics.median(v), 2) for k, v in creates.items()},
        **{f"create_p99_ms_{k}": round(_percentile(v, 0.99), 2) for k, v in creates.items()},
        "setup_s": round(setup_s, 1),
    }
    ratios = [f["ratio"] for f in shapes.values() if "ratio" in f]
    if ratios and len(ratios) == len(shapes):
        out["ratio_min"] = min(ratios)
    out["create_overhead_p99_ms"] = round(out["create_p99_ms_with"] - out["create_p99_ms_without"], 2)
    out["create_overhead_vs_native_p99_ms"] = round(out["create_p99_ms_with"] - out["create_p99_ms_native"], 2)
    out["targets"] = {"ratio_min": ">= 0.9", "create_overhead_p99_ms": "<= 10"}
    return out
