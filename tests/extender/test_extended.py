"""KEP-5004: the claim kube-scheduler makes itself for an unconverted pod's extended resources, predicted and scored
by the extender like any other claim, only where the version's gate is on."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import versions
from gpuclaim.dra.api import parse_device_class
from gpuclaim.dra.config import load_config
from gpuclaim.extender import extended, predict
from gpuclaim.extender.offline import OfflineView

from . import fleet

CONFIG = load_config({})
V35, V36, V37 = (versions.model_for(m) for m in (35, 36, 37))
EXT = "example.com/gpu"


def klass(name: str, extended_name: str | None = None, created: str = "") -> dict[str, Any]:
    obj = fleet.device_class(name, fleet.GPU_CLASS_EXPR if name == "gpu.nvidia.com" else None)
    if extended_name:
        obj["spec"]["extendedResourceName"] = extended_name
    if created:
        obj["metadata"]["creationTimestamp"] = created
    return obj


def resolver(*objs: dict[str, Any], model: versions.KubernetesModel = V37) -> extended.ClassResolver:
    parsed = {}
    for obj in objs:
        cls, errors = parse_device_class(obj)
        assert cls is not None and not errors, errors
        parsed[cls.name] = cls
    created = {o["metadata"]["name"]: o["metadata"].get("creationTimestamp", "") for o in objs}
    return extended.ClassResolver(parsed, created, model)


def container(name: str, requests: dict[str, str], *, sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "x", "resources": {"requests": requests}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
        status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                                          "uid": "uid-p"}, "spec": spec}
    if status:
        out["status"] = status
    return out


def requests_of(p: dict[str, Any], res: extended.ClassResolver, model: versions.KubernetesModel = V37
                ) -> list[tuple[str, str, int]]:
    plan = extended.plan(p, res, model)
    assert plan is not None
    spec = plan.spec(frozenset(plan.classes))
    return [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in spec["devices"]["requests"]]


# ---- upstream's own table (K37/…/extendeddynamicresources_test.go Test_createRequestsAndMappings_requests) -------

def classes() -> extended.ClassResolver:
    return resolver(klass("class", EXT), klass("class1", EXT + "1"), klass("class-init", EXT + "init"))


def test_one_container_two_resources() -> None:
    p = pod([container("c", {EXT: "1", EXT + "1": "2"})])
    assert requests_of(p, classes()) == [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)]


def test_one_resource_mapped_one_not() -> None:
    p = pod([container("c", {EXT: "1", "other.example.com/x": "2"})])
    assert requests_of(p, classes()) == [("container-0-request-0", "class", 1)]


def test_two_containers() -> None:
    p = pod([container("a", {EXT: "1"}), container("b", {EXT + "1": "2"})])
    assert requests_of(p, classes()) == [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)]


def test_one_init_container_one_regular() -> None:
    p = pod([container("c", {EXT: "1"})], init=[container("i", {EXT + "init": "2"})])
    assert requests_of(p, classes()) == [("container-0-request-0", "class-init", 2),
                                       ("container-1-request-0", "class", 1)]


def test_two_init_containers_keep_the_largest() -> None:
    p = pod([container("c", {EXT: "1"})], init=[container("i0", {EXT + "init": "1"}),
                                                  container("i1", {EXT + "init": "2"})])
    assert requests_of(p, classes()) == [("container-1-request-0", "class-init", 2),
                                       ("container-2-request-0", "class", 1)]


def test_an_init_container_reuses_a_later_sidecars_devices() -> None:
    p = pod([container("c", {EXT: "1"})], init=[container("i0", {EXT + "init": "1"}),
                                                  container("s", {EXT + "init": "1"}, sidecar=True),
                                                  container("i2", {EXT + "init": "2"})])
    assert requests_of(p, classes()) == [("container-1-request-0", "class-init", 1),
                                       ("container-2-request-0", "class-init", 2),
                                       ("container-3-request-0", "class", 1)]


# ---- upstream's own table (… Test_createRequestsAndMappings_mappings): status.extendedResourceClaimStatus -------

def mappings_of(p: dict[str, Any], res: extended.ClassResolver) -> list[tuple[str, str, str]]:
    """(requestName, containerName, resourceName), sorted as upstream's test sorts them."""
    plan = extended.plan(p, res, V37)
    assert plan is not None
    _, maps = plan.claim(frozenset(plan.classes))
    return sorted((m["requestName"], m["containerName"], m["resourceName"]) for m in maps)


def test_mappings_of_two_containers() -> None:
    p = pod([container("con0", {EXT: "1"}), container("con1", {EXT + "1": "2"})])
    assert mappings_of(p, classes()) == [("container-0-request-0", "con0", EXT),
                                         ("container-1-request-0", "con1", EXT + "1")]


def test_mappings_of_two_init_containers_name_the_largest_request() -> None:
    p = pod([container("con0", {EXT: "1"})],
            init=[container("init-con0", {EXT + "init": "1"}), container("init-con1", {EXT + "init": "2"})])
    assert mappings_of(p, classes()) == [("container-1-request-0", "init-con0", EXT + "init"),
                                         ("container-1-request-0", "init-con1", EXT + "init"),
                                         ("container-2-request-0", "con0", EXT)]


def test_mappings_of_an_init_container_reusing_a_sidecars_request() -> None:
    p = pod([container("con0", {EXT: "1"})],
            init=[container("init-con0", {EXT + "init": "1"}),
                  container("sidecar-con1", {EXT + "init": "1"}, sidecar=True),
                  container("init-con2", {EXT + "init": "2"})])
    assert mappings_of(p, classes()) == [("container-1-request-0", "init-con0", EXT + "init"),
                                         ("container-1-request-0", "sidecar-con1", EXT + "init"),
                                         ("container-2-request-0", "init-con2", EXT + "init"),
                                         ("container-3-request-0", "con0", EXT)]


# ---- gpuclaim's own cases -----------------------------------------------------------------------------------

def test_request_index_counts_every_sorted_request_and_limits_default_requests() -> None:
    c = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1Gi"}}}
    res = resolver(klass("gpu.nvidia.com", "nvidia.com/gpu"))
    # sorted: cpu, memory, nvidia.com/gpu -> index 2
    assert requests_of(pod([c]), res) == [("container-0-request-2", "gpu.nvidia.com", 2)]


def test_class_resolution_newer_wins_then_lower_name_and_implicit_names_from_1_35() -> None:
    res = resolver(klass("old", EXT, "2026-01-01T00:00:00Z"), klass("new", EXT, "2026-06-01T00:00:00Z"),
                   klass("b-same", EXT + "2", "2026-01-01T00:00:00Z"), klass("a-same", EXT + "2",
                                                                            "2026-01-01T00:00:00Z"))
    assert res.get(EXT) == "new"
    assert res.get(EXT + "2") == "a-same"
    assert res.get("deviceclass.resource.kubernetes.io/old") == "old"
    assert resolver(klass("old", EXT), model=V36.with_gates({})).get("deviceclass.resource.kubernetes.io/old") == "old"
    assert resolver(klass("x"), model=V35).get("deviceclass.resource.kubernetes.io/x") is None  # gate off


def test_no_plan_where_the_gate_is_off_or_the_scheduler_already_made_the_claim() -> None:
    p = pod([container("c", {"nvidia.com/gpu": "1"})])
    res = resolver(klass("gpu.nvidia.com", "nvidia.com/gpu"))
    assert extended.plan(p, res, V35) is None  # DRAExtendedResource alpha, off
    assert extended.plan(p, res, V36) is not None  # beta, on
    done = pod(p["spec"]["containers"], status={"extendedResourceClaimStatus": {
        "resourceClaimName": "p-extended-resources-abcde",
        "requestMappings": [{"containerName": "c", "resourceName": "nvidia.com/gpu",
                             "requestName": "container-0-request-0"}]}})
    assert extended.plan(done, res, V37) is None
    assert extended.plan(pod([container("c", {"cpu": "1"})]), res, V37) is None
    assert extended.plan(pod([container("c", {"nvidia.com/gpu": "0"})]), res, V37) is None


def test_a_node_with_device_plugin_capacity_keeps_that_resource_out_of_the_claim() -> None:
    p = pod([container("c", {EXT: "1", EXT + "1": "2"})])
    plan = extended.plan(p, classes(), V37)
    assert plan is not None
    assert plan.via_dra({}) == {EXT, EXT + "1"}
    assert plan.via_dra({EXT: "0"}) == {EXT, EXT + "1"}  # allocatable 0: DRA
    assert plan.via_dra({EXT: "4"}) == {EXT + "1"}


_names = st.sampled_from([EXT, EXT + "1", EXT + "init", "cpu", "memory", "other.example.com/x"])
_requests = st.dictionaries(_names, st.integers(0, 4).map(str), max_size=3)


@settings(max_examples=200, deadline=None)
@given(regular=st.lists(_requests, min_size=1, max_size=3),
       init=st.lists(st.tuples(_requests, st.booleans()), max_size=3))
def test_every_plan_is_a_valid_claim_with_unique_sorted_request_names(
        regular: list[dict[str, str]], init: list[tuple[dict[str, str], bool]]) -> None:
    p = pod([container(f"c{i}", r) for i, r in enumerate(regular)],
            init=[container(f"i{i}", r, sidecar=s) for i, (r, s) in enumerate(init)])
    plan = extended.plan(p, classes(), V37)
    if plan is None:
        assert not any(int(v) for c in [*regular, *(r for r, _ in init)] for k, v in c.items()
                       if k.startswith(EXT))
        return
    request = predict.PodRequest(claims=(), key=b"k", policy="binpack", required=(), notes=(), extended=plan)
    variant = request.for_node(frozenset(plan.classes))  # parses the claim: raises on an invalid one
    (claim,) = variant.claims
    names = [r.name for r in claim.spec.requests]
    assert names == sorted(names) and len(set(names)) == len(names)
    # every long-lived container's request is there with its full count
    for i, c in enumerate([*(r for r, _ in init), *regular]):
        long_lived = i >= len(init) or init[i][1]
        for resource, count in c.items():
            if long_lived and resource in plan.classes and int(count):
                j = sorted(c).index(resource)
                assert (f"container-{i}-request-{j}", int(count)) in [
                    (r.name, r.alternatives[0].count) for r in claim.spec.requests]


# ---- prediction and scores ------------------------------------------------------------------------------------

def _objects(allocatable: dict[str, str] | None = None) -> list[dict[str, Any]]:
    gpu_class = klass("gpu.nvidia.com", "nvidia.com/gpu")
    nodes = []
    for name in ("n1", "n2"):
        node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}}
        if name == "n2" and allocatable:
            node["status"] = {"allocatable": allocatable}
        nodes.append(node)
    return [fleet.pairs_node("n1"), fleet.pairs_node("n2"), gpu_class, *nodes,
            fleet.allocated_claim("held", [("n1", "gpu-0"), ("n1", "gpu-2")])]


def _legacy(gpus: int) -> dict[str, Any]:
    return pod([{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}])


def _verdicts(objects: list[dict[str, Any]], p: dict[str, Any], minor: int) -> dict[str, Any]:
    view = OfflineView(copy.deepcopy(objects), config=CONFIG.extender, model=versions.model_for(minor))
    request = predict.resolve(p, view, CONFIG.extender)
    return {v.node: v for v in predict.predict(request, ["n1", "n2"], view, CONFIG.extender)}


def test_an_unconverted_pod_is_predicted_and_scored_on_1_37() -> None:
    got = _verdicts(_objects(), _legacy(2), 37)
    # n2 is empty: the first PCIe-root pair; n1 has gpu-0 and gpu-2 held
    assert got["n2"].devices == ("gpu.nvidia.com/n2/gpu-0", "gpu.nvidia.com/n2/gpu-1")
    assert got["n1"].devices == ("gpu.nvidia.com/n1/gpu-1", "gpu.nvidia.com/n1/gpu-3")
    assert got["n2"].score is not None and got["n1"].score is not None
    # scored like any other claim: exactly as the same request in a claim of the pod's own
    template = fleet.template("same", {"requests": [fleet.exact("container-0-request-0", 2)]})
    same = _verdicts([*_objects(), template], fleet.pod("same"), 37)
    assert [(v.score, v.devices) for v in got.values()] == [(v.score, v.devices) for v in same.values()]
    assert "pcieRoot" in got["n1"].reason  # the topology reasons of a scored claim


def test_on_1_35_an_unconverted_pod_gets_equal_scores() -> None:
    view = OfflineView(_objects(), config=CONFIG.extender, model=V35)
    request = predict.resolve(_legacy(2), view, CONFIG.extender)
    assert request.empty  # the scheduler makes no claim: it stays Pending, nothing to rank


def test_a_node_with_device_plugin_capacity_gets_a_neutral_score() -> None:
    got = _verdicts(_objects({"nvidia.com/gpu": "8"}), _legacy(2), 37)
    assert got["n2"].score == 0 and got["n2"].devices == () and "device plugin" in got["n2"].reason
    assert got["n1"].devices == ("gpu.nvidia.com/n1/gpu-1", "gpu.nvidia.com/n1/gpu-3")


def test_the_score_command_ranks_an_unconverted_pod(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import yaml

    from gpuclaim.cli import main

    cluster = tmp_path / "c"
    cluster.mkdir()
    (cluster / "x.yaml").write_text(yaml.safe_dump_all(_objects()))
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(_legacy(2)))
    assert main(["score", "--cluster", str(cluster), "--pod", str(pod_file), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["node"] for r in rows) == ["n1", "n2"] and all(len(r["devices"]) == 2 for r in rows)
    assert main(["score", "--cluster", str(cluster), "--pod", str(pod_file), "-o", "json",
                 "--kubernetes-version", "1.35"]) == 0
    assert all(r["score"] == 0 and r["devices"] == [] for r in json.loads(capsys.readouterr().out))
