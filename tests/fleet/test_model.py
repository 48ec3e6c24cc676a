"""The fleet model: states, tight fits, redaction, and the incremental index equal to a build from scratch."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.demo import inventory
from gpuclaim.dra import versions
from gpuclaim.dra.config import load_config
from gpuclaim.fleet import model

CONFIG = load_config({})
DRIVER = "gpu.nvidia.com"
NODES = ("n-0", "n-1", "n-2")
MODEL = versions.model_for("1.37")


def gpu(name: str, root: str | None, *, taint: dict[str, str] | None = None, parent: str | None = None,
        counters: int = 0) -> dict[str, Any]:
    attrs: dict[str, Any] = {"productName": {"string": "NVIDIA A100-SXM4-40GB"}, "type": {"string": "gpu"},
                             "uuid": {"string": f"GPU-{name}"}}
    if root is not None:
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": root}
    if parent is not None:
        attrs["parentUUID"] = {"string": parent}
        attrs["profile"] = {"string": "1g.5gb"}
        attrs["type"] = {"string": "mig"}
    device: dict[str, Any] = {"name": name, "attributes": attrs}
    if taint is not None:
        device["taints"] = [taint]
    if counters:
        device["consumesCounters"] = [{"counterSet": "mem", "counters": {"slices": {"value": str(counters)}}}]
    return device


def slice_(node: str, devices: list[dict[str, Any]], generation: int = 1, name: str | None = None,
           shared: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                            "devices": devices}
    if shared:
        spec["sharedCounters"] = [{"name": "mem", "counters": {"slices": {"value": str(shared)}}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name or f"{node}-gpu"},
            "spec": spec}


def claim(ns: str, name: str, node: str, devices: list[str], pod: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": node, "device": d} for d in devices]}}}
    if pod is not None:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"namespace": ns, "name": name, "uid": f"uid-{ns}-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": status}


def node(name: str, product: str = "A100") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product, "other": "x"}}}


def rule(name: str, device: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": DRIVER, "device": device},
                     "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}


def states(fleet: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(n["name"], d["name"]): d["state"] for n in fleet["nodes"] for g in n["groups"] for d in g["devices"]}


def test_states_follow_claims_taints_and_rules() -> None:
    devices = [gpu("gpu-0", "pci-a"), gpu("gpu-1", "pci-a"), gpu("gpu-2", "pci-b"), gpu("gpu-3", "pci-b"),
               gpu("gpu-4", "pci-c", taint={"key": "gpu.nvidia.com/unhealthy", "effect": "NoSchedule"}),
               gpu("gpu-5", "pci-c", taint={"key": "example.com/drain", "effect": "NoSchedule"}),
               gpu("gpu-6", "pci-d"), gpu("gpu-7", "pci-d")]
    fleet = model.build_fleet(
        slices=[slice_("n-0", devices)], nodes=[node("n-0")], config=CONFIG, model=MODEL,
        claims=[claim("team-a", "train", "n-0", ["gpu-0"], "train-0"), claim("team-b", "held", "n-0", ["gpu-2"], None)],
        taint_rules=[rule("maint", "gpu-6")])
    got = states(fleet)
    assert got[("n-0", "gpu-0")] == "allocated"
    assert got[("n-0", "gpu-2")] == "reserved"
    assert got[("n-0", "gpu-4")] == "unhealthy"
    assert got[("n-0", "gpu-5")] == "tainted"
    assert got[("n-0", "gpu-6")] == "tainted"  # by the DeviceTaintRule
    assert got[("n-0", "gpu-7")] == "free"
    summary = fleet["summary"]
    assert summary["devices"] == {"total": 8, "free": 3, "allocated": 1, "reserved": 1, "tainted": 2, "unhealthy": 1}
    # free whole devices: gpu-1 (pci-a), gpu-3 (pci-b), gpu-7 (pci-d): no two share a root
    assert summary["tightFits"] == {"1": 3, "2": 0, "4": 0, "8": 0}
    dev0 = next(d for g in fleet["nodes"][0]["groups"] for d in g["devices"] if d["name"] == "gpu-0")
    assert dev0["pods"] == [{"namespace": "team-a", "name": "train-0"}]
    assert dev0["claims"] == [{"namespace": "team-a", "name": "train"}]
    assert fleet["nodes"][0]["labels"] == {"nvidia.com/gpu.product": "A100"}  # only the configured labels
    assert [g["kind"] for g in fleet["nodes"][0]["groups"]] == ["pcieRoot"] * 4


def test_tight_fits_count_disjoint_groups_and_counters_strand_devices() -> None:
    whole = [gpu(f"gpu-{i}", f"pci-{i // 4}") for i in range(8)]
    fleet = model.build_fleet(slices=[slice_("n-0", whole)], config=CONFIG)
    assert fleet["summary"]["tightFits"] == {"1": 8, "2": 4, "4": 2, "8": 0}
    assert fleet["nodes"][0]["summary"]["largestFreeTightGroup"] == 4
    # a GPU carved in MIG devices through shared counters: one slice in use strands the whole GPU
    parts = [gpu("gpu-0", "pci-0", counters=2), gpu("gpu-0-mig-1g5gb-0", "pci-0", parent="GPU-gpu-0", counters=1),
             gpu("gpu-0-mig-1g5gb-1", "pci-0", parent="GPU-gpu-0", counters=1)]
    fleet = model.build_fleet(slices=[slice_("n-0", parts, shared=2)], config=CONFIG,
                              claims=[claim("a", "c", "n-0", ["gpu-0-mig-1g5gb-0"], "p")])
    summary = fleet["summary"]
    assert summary["stranded"] == 1 and summary["freeMigSlices"] == 1
    assert summary["tightFits"]["1"] == 0
    assert fleet["nodes"][0]["migParents"] == [{"device": "gpu-0", "freeSlices": {"1g.5gb": 1}}]


def test_namespace_scope_redacts_other_namespaces() -> None:
    devices = [gpu(f"gpu-{i}", "pci-a") for i in range(2)]
    claims = [claim("team-a", "a", "n-0", ["gpu-0"], "a-0"), claim("team-b", "b", "n-0", ["gpu-1"], "b-0")]
    scope = model.Scope(cluster_wide=False, namespaces=frozenset({"team-a"}))
    fleet = model.build_fleet(slices=[slice_("n-0", devices)], claims=claims, config=CONFIG, scope=scope)
    by_name = {d["name"]: d for g in fleet["nodes"][0]["groups"] for d in g["devices"]}
    assert by_name["gpu-0"]["pods"] == [{"namespace": "team-a", "name": "a-0"}] and not by_name["gpu-0"]["redacted"]
    assert by_name["gpu-1"]["pods"] == [] and by_name["gpu-1"]["claims"] == [] and by_name["gpu-1"]["redacted"]
    assert by_name["gpu-1"]["state"] == "allocated"  # the state is not a secret, the holder is
    index = model.FleetIndex(CONFIG)
    for obj in claims:
        index.on_event("ResourceClaim", "ADDED", obj)
    index.on_event("ResourceSlice", "ADDED", slice_("n-0", devices))
    assert b"team-b" not in index.snapshot(scope) and b"b-0" not in index.snapshot(scope)
    assert b"b-0" in index.snapshot(model.CLUSTER)
    assert fleet["scope"] == {"clusterWide": False, "namespaces": ["team-a"]}


def test_filters_narrow_nodes_and_devices() -> None:
    fleet = model.build_fleet(
        slices=[slice_("n-0", [gpu("gpu-0", "r"), gpu("gpu-1", "r")]), slice_("n-1", [gpu("gpu-0", "r")])],
        nodes=[node("n-0", "A100"), node("n-1", "H100")], claims=[claim("team-a", "a", "n-0", ["gpu-1"], "p")],
        config=CONFIG,
        filters=model.Filters(node_selector=(("nvidia.com/gpu.product", "in", frozenset({"A100"})),),
                              node_selector_text="nvidia.com/gpu.product=A100", namespace="team-a"))
    assert [n["name"] for n in fleet["nodes"]] == ["n-0"]
    assert [d["name"] for g in fleet["nodes"][0]["groups"] for d in g["devices"]] == ["gpu-1"]
    assert fleet["summary"]["devices"]["total"] == 1
    assert fleet["filters"]["namespace"] == "team-a"


def test_demo_fleet_counts_add_up() -> None:
    f = inventory.build()
    fleet = model.build_fleet(slices=f.of_kind("ResourceSlice"), claims=f.of_kind("ResourceClaim"),
                              nodes=f.of_kind("Node"), classes=f.of_kind("DeviceClass"), config=CONFIG)
    _check_sums(fleet)
    assert fleet["summary"]["devices"]["allocated"] > 0 and fleet["summary"]["freeMigSlices"] > 0


def _check_sums(fleet: dict[str, Any]) -> None:
    totals = model.add_summaries(n["summary"] for n in fleet["nodes"])
    for key in ("devices", "tightFits", "stranded", "freeMigSlices"):
        assert fleet["summary"][key] == totals[key]
    for n in fleet["nodes"]:
        s = n["summary"]
        assert s["devices"]["total"] == sum(s["devices"][st] for st in model.STATES)
        assert s["devices"]["total"] == sum(len(g["devices"]) for g in n["groups"])
        assert s["tightFits"]["1"] >= s["tightFits"]["2"] * 2 >= s["tightFits"]["4"] * 4 >= s["tightFits"]["8"] * 8
        assert s["tightFits"]["1"] + s["stranded"] + s["freeMigSlices"] <= s["devices"]["free"]


# ---- the incremental index equals a build from scratch -------------------------------------------------------

ROOTS = st.sampled_from(["pci-a", "pci-b", None])
TAINTS = st.sampled_from([None, {"key": "k", "effect": "NoSchedule"}, {"key": "health", "effect": "NoExecute"},
                          {"key": "k", "effect": "None"}])


@st.composite
def slice_objects(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.sampled_from(NODES))
    count = draw(st.integers(0, 5))
    devices = [gpu(f"gpu-{i}", draw(ROOTS), taint=draw(TAINTS)) for i in range(count)]
    if draw(st.booleans()):
        devices.append(gpu("gpu-0-mig-a", draw(ROOTS), parent="GPU-gpu-0"))
    name = draw(st.sampled_from([f"{n}-gpu", f"{n}-gpu-old"]))
    return slice_(n, devices, generation=draw(st.integers(1, 2)), name=name)


@st.composite
def claim_objects(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.sampled_from(NODES))
    devices = draw(st.lists(st.sampled_from(["gpu-0", "gpu-1", "gpu-2", "gpu-0-mig-a"]), max_size=2, unique=True))
    ns = draw(st.sampled_from(["team-a", "team-b"]))
    return claim(ns, draw(st.sampled_from(["c0", "c1", "c2"])), n, devices,
                 draw(st.sampled_from([None, "pod-0", "pod-1"])))


CLASS_SELECTORS = (f"device.driver == '{DRIVER}'", "false", f"device.attributes['{DRIVER}'].type == 'gpu'")
MODEL_134_TAINTS = versions.model_for("1.34", feature_gates={"DRADeviceTaints": True})


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def class_rule(name: str, class_name: str, device: str | None) -> dict[str, Any]:
    """A 1.34 (v1alpha3) DeviceTaintRule selecting by class: later versions dropped the field."""
    selector: dict[str, Any] = {"deviceClassName": class_name}
    if device is not None:
        selector["device"] = device
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}


def test_a_1_34_rule_by_device_class_takes_the_device_out_of_the_free_room() -> None:
    """1.34's slice tracker taints the devices a rule's class selects (dra/taints.py): they are not free, and no
    tight job counts them, exactly like a rule by device name. A class that does not exist, or whose selectors
    are false for the device, taints nothing."""
    devices = [gpu("gpu-0", "pci-a"), gpu("gpu-1", "pci-a"), gpu("gpu-2", "pci-b"), gpu("gpu-3", "pci-b")]
    classes = [device_class("gpu.nvidia.com", f"device.driver == '{DRIVER}'"),
               device_class("h100", "device.attributes['gpu.nvidia.com'].productName.contains('H100')")]
    rules = [class_rule("maint", "gpu.nvidia.com", "gpu-1"), class_rule("other", "h100", None),
             class_rule("gone", "no-such-class", "gpu-2")]
    fleet = model.build_fleet(slices=[slice_("n-0", devices)], nodes=[node("n-0")], classes=classes,
                              taint_rules=rules, config=CONFIG, model=MODEL_134_TAINTS)
    assert states(fleet)[("n-0", "gpu-1")] == "tainted"
    assert fleet["summary"]["devices"]["free"] == 3 and fleet["summary"]["devices"]["tainted"] == 1
    assert fleet["summary"]["tightFits"] == {"1": 3, "2": 1, "4": 0, "8": 0}  # only pci-b keeps a pair


EVENTS = st.one_of(
    st.tuples(st.just("ResourceSlice"), slice_objects()),
    st.tuples(st.just("ResourceClaim"), claim_objects()),
    st.tuples(st.just("Node"), st.builds(node, st.sampled_from(NODES), st.sampled_from(["A100", "H100"]))),
    st.tuples(st.just("DeviceTaintRule"), st.builds(rule, st.sampled_from(["r0", "r1"]),
                                                     st.sampled_from(["gpu-0", "gpu-1"]))),
    st.tuples(st.just("DeviceTaintRule"), st.builds(class_rule, st.sampled_from(["r1", "r2"]),
                                                     st.sampled_from(["gpu.nvidia.com", "a100"]),
                                                     st.sampled_from([None, "gpu-2"]))),
    st.tuples(st.just("DeviceClass"), st.builds(device_class, st.sampled_from(["gpu.nvidia.com", "a100"]),
                                                 st.sampled_from(CLASS_SELECTORS))),
)


def _key(kind: str, obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return kind, meta.get("namespace", ""), meta["name"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(EVENTS, st.booleans(), st.booleans()), max_size=30),
       st.sampled_from([model.CLUSTER, model.Scope(False, frozenset({"team-a"}))]),
       st.sampled_from([MODEL, MODEL_134_TAINTS]))
def test_incremental_index_equals_a_build_from_scratch(events: list[Any], scope: model.Scope,
                                                       kube: versions.KubernetesModel) -> None:
    index = model.FleetIndex(CONFIG, model=kube)
    world: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    last_revision = index.revision
    for (kind, obj), delete, read in events:
        key = _key(kind, obj)
        if delete and key in world:
            index.on_event(kind, "DELETED", world.pop(key)[1])
        else:
            index.on_event(kind, "MODIFIED" if key in world else "ADDED", obj)
            world[key] = (kind, obj)
        if read:  # reads in between must not change what later events produce
            before = index.snapshot(scope)
            assert index.revision >= last_revision
            last_revision = index.revision
            assert index.snapshot(scope) == before  # nothing changed, nothing recomputed differently
            assert index.revision == last_revision
    by_kind: dict[str, list[dict[str, Any]]] = {"ResourceSlice": [], "ResourceClaim": [], "Node": [],
                                                 "DeviceTaintRule": [], "DeviceClass": []}
    for kind, obj in world.values():
        by_kind[kind].append(obj)
    scratch = model.build_fleet(slices=by_kind["ResourceSlice"], claims=by_kind["ResourceClaim"],
                                nodes=by_kind["Node"], taint_rules=by_kind["DeviceTaintRule"],
                                classes=by_kind["DeviceClass"], config=CONFIG, model=kube, scope=scope)
    incremental = index.snapshot_dict(scope)
    scratch.pop("revision")
    incremental.pop("revision")
    assert incremental == scratch
    _check_sums(incremental)


def test_an_event_recomputes_only_the_node_it_touches_and_reads_recompute_nothing() -> None:
    """The issue's scale rule: the API is built from the cache incrementally, not recomputed per request. On the
    demo fleet (19 real nodes), answers for any scope leave every node's stored entry as it was; a claim on one
    node recomputes that node alone."""
    fleet = inventory.build()
    index = model.FleetIndex(CONFIG)
    for kind in ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim"):
        for obj in fleet.of_kind(kind):
            index.on_event(kind, "ADDED", obj)
    before = {e.name: e for e in index.nodes()}
    assert len(before) == 19
    revision = index.revision
    for scope in (model.CLUSTER, model.Scope(cluster_wide=False, namespaces=frozenset({"research"}))):
        index.snapshot(scope)
        index.snapshot(scope, model.Filters(model="H100"))
    assert index.pending == 0 and index.revision == revision
    assert all(entry is before[entry.name] for entry in index.nodes())
    index.on_event("ResourceClaim", "ADDED", claim("team-z", "z", "p5-h100-0", ["gpu-0"], "z-0"))
    assert index.pending == 1
    after = {e.name: e for e in index.nodes()}
    assert [name for name, entry in after.items() if entry is not before[name]] == ["p5-h100-0"]
    assert index.revision == revision + 1
