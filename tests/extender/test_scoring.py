"""Scores from the predicted pick, on real slices (p4d pairs, p5, GB200/GB300) and made-up fleets.

Covers: the tight node beats the straddling one; bin-pack keeps an empty node empty, spread does the opposite;
a MIG pod goes to the partly used parent; constraints across requests; firstAvailable bands; All; adminAccess;
unfit nodes with the allocator's reason (CEL runtime error included); determinism.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import api
from gpuclaim.dra.config import load_config
from gpuclaim.dra.topology import NodeTopology
from gpuclaim.extender import predict, score
from gpuclaim.extender.offline import OfflineView

from . import fleet

CONFIG = load_config({}).extender


def score_all(objects: list[dict[str, Any]], the_pod: dict[str, Any], config: Any = CONFIG) -> dict[str, Any]:
    view = OfflineView(objects, config=config)
    request = predict.resolve(the_pod, view, config)
    return {v.node: v for v in predict.predict(request, view.candidates(), view, config)}


def test_the_tight_p4d_node_beats_the_p5_node_where_two_gpus_straddle_roots() -> None:
    objects = fleet.load("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml") + fleet.load(
        "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml") + fleet.gpu_classes()
    objects.append(fleet.template("two", fleet.tight_or_any(2)))
    verdicts = score_all(objects, fleet.pod("two"))
    p4d = verdicts["ip-192-168-153-160.ec2.internal"]
    p5 = verdicts["ip-10-0-171-111.ec2.internal"]
    assert p4d.devices == ("gpu.nvidia.com/ip-192-168-153-160.ec2.internal/gpu-0",
                           "gpu.nvidia.com/ip-192-168-153-160.ec2.internal/gpu-1")
    assert "subrequest tight" in p4d.reason and "subrequest any" in p5.reason
    assert p4d.score is not None and p5.score is not None
    assert 6 <= p4d.score <= 10 and 1 <= p5.score <= 5


def test_a_node_whose_free_gpus_straddle_roots_loses_to_one_with_a_whole_pair() -> None:
    # node a: one GPU of every pair used, so 2 free GPUs are never on one root; node b: pair pci3 free
    objects = [fleet.pairs_node("a"), fleet.pairs_node("b"), *fleet.gpu_classes(),
               fleet.allocated_claim("used-a", [("a", f"gpu-{i}") for i in (0, 2, 4, 6)]),
               fleet.allocated_claim("used-b", [("b", f"gpu-{i}") for i in (0, 1, 2, 3)]),
               fleet.template("two", fleet.tight_or_any(2))]  # fmt: skip
    verdicts = score_all(objects, fleet.pod("two"))
    assert verdicts["a"].devices == ("gpu.nvidia.com/a/gpu-1", "gpu.nvidia.com/a/gpu-3")
    assert verdicts["b"].devices == ("gpu.nvidia.com/b/gpu-4", "gpu.nvidia.com/b/gpu-5")
    assert verdicts["b"].score > verdicts["a"].score  # type: ignore[operator]


def test_a_four_gpu_pod_prefers_one_numa_node_when_that_is_all_that_differs() -> None:
    devices = {"requests": [fleet.exact("gpu", 4)]}
    straddle = fleet.node_slice("straddle", [fleet.gpu(f"gpu-{i}", numa=i % 2, product="X") for i in range(4)])
    local = fleet.node_slice("local", [fleet.gpu(f"gpu-{i}", numa=0, product="X") for i in range(4)])
    verdicts = score_all([straddle, local, *fleet.gpu_classes(), fleet.template("four", devices)], fleet.pod("four"))
    assert verdicts["local"].score > verdicts["straddle"].score  # type: ignore[operator]
    assert "numaNode 1.00" in verdicts["local"].reason


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_binpack_keeps_the_empty_node_empty_and_spread_picks_it(policy: str) -> None:
    objects = [fleet.pairs_node("empty"), fleet.pairs_node("half"), *fleet.gpu_classes(),
               fleet.allocated_claim("used", [("half", f"gpu-{i}") for i in range(4)]),
               fleet.template("one", {"requests": [fleet.exact("gpu")]})]  # fmt: skip
    annotations = {CONFIG.policy_annotation: policy}
    verdicts = score_all(objects, fleet.pod("one", annotations=annotations))
    empty, half = verdicts["empty"].score, verdicts["half"].score
    assert empty is not None and half is not None
    assert (half > empty) if policy == "binpack" else (empty > half)


def test_binpack_prefers_finishing_a_half_used_pair_over_breaking_a_whole_one() -> None:
    # both nodes leave 6 free after the pick; on "broken" the pick completes pair pci0, on "fresh" it breaks pci1
    objects = [fleet.pairs_node("broken"), fleet.pairs_node("fresh"), *fleet.gpu_classes(),
               fleet.allocated_claim("b", [("broken", "gpu-0")]), fleet.allocated_claim("f", [("fresh", "gpu-0")]),
               fleet.allocated_claim("f2", [("fresh", "gpu-1")]), fleet.allocated_claim("b2", [("broken", "gpu-7")]),
               fleet.template("one", {"requests": [fleet.exact("gpu")]})]  # fmt: skip
    verdicts = score_all(objects, fleet.pod("one"))
    assert verdicts["broken"].devices == ("gpu.nvidia.com/broken/gpu-1",)
    assert verdicts["fresh"].devices == ("gpu.nvidia.com/fresh/gpu-2",)
    assert verdicts["broken"].score > verdicts["fresh"].score  # type: ignore[operator]


def _mig_node(node: str) -> dict[str, Any]:
    devices = []
    for p in range(2):
        parent = f"GPU-{node}-{p}"
        devices += [fleet.gpu(f"gpu-{p}-mig-{k}", kind="mig", parent=parent, uuid=f"MIG-{node}-{p}-{k}",
                              product="NVIDIA A100-SXM4-40GB") for k in range(3)]  # fmt: skip
    return fleet.node_slice(node, devices)


def test_a_mig_pod_goes_to_the_node_whose_parent_is_already_partly_used() -> None:
    objects = [_mig_node("fresh"), _mig_node("partly"), *fleet.gpu_classes(),
               fleet.allocated_claim("m", [("partly", "gpu-0-mig-0")]),
               fleet.template("mig", {"requests": [fleet.exact("mig", cls="mig.nvidia.com")]})]  # fmt: skip
    verdicts = score_all(objects, fleet.pod("mig"))
    assert verdicts["partly"].devices == ("gpu.nvidia.com/partly/gpu-0-mig-1",)
    assert "takes 0 of 1 units" in verdicts["partly"].reason
    assert "takes 1 of 1 units" in verdicts["fresh"].reason
    assert verdicts["partly"].score > verdicts["fresh"].score  # type: ignore[operator]


def test_two_mig_slices_on_one_parent_score_as_local() -> None:
    objects = [_mig_node("n"), *fleet.gpu_classes(),
               fleet.template("mig2", {"requests": [fleet.exact("mig", 2, cls="mig.nvidia.com")],
                                       "constraints": [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]})]
    verdict = score_all(objects, fleet.pod("mig2"))["n"]
    assert verdict.strict["gpu.nvidia.com/parentUUID"] is True
    assert "parentUUID 1.00" in verdict.reason


def test_a_constraint_across_two_requests_is_scored_as_one_group() -> None:
    devices = {"requests": [fleet.exact("a"), fleet.exact("b")],
               "constraints": [{"requests": ["a", "b"], "matchAttribute": "resource.kubernetes.io/numaNode"}]}
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(), fleet.template("ab", devices)]
    verdict = score_all(objects, fleet.pod("ab"))["n"]
    assert verdict.devices == ("gpu.nvidia.com/n/gpu-0", "gpu.nvidia.com/n/gpu-1")
    assert "locality 1.00" in verdict.reason  # same root, same NUMA, one NVLink domain


def test_all_mode_takes_every_matching_device_and_a_used_one_makes_the_node_unfit() -> None:
    objects = [fleet.pairs_node("free"), fleet.pairs_node("used"), *fleet.gpu_classes(),
               fleet.allocated_claim("u", [("used", "gpu-3")]),
               fleet.template("all", {"requests": [fleet.exact("all", allocationMode="All", count=None)]})]
    objects[-1]["spec"]["spec"]["devices"]["requests"][0]["exactly"].pop("count")
    verdicts = score_all(objects, fleet.pod("all"))
    assert len(verdicts["free"].devices) == 8 and verdicts["free"].score is not None
    assert verdicts["used"].score is None and "do not fit" in verdicts["used"].reason


def test_more_single_gpu_claims_than_free_gpus_fail_the_count_check_before_any_search() -> None:
    # issue 22: 9 single-GPU claims on 8-GPU nodes ran the whole 200,000-step search on every node shape
    objects = [fleet.pairs_node("free"), fleet.pairs_node("used"), *fleet.gpu_classes(),
               fleet.allocated_claim("u", [("used", "gpu-3")]),
               fleet.template("one", {"requests": [fleet.exact("gpu")]})]  # fmt: skip

    def pod_of(claims: int) -> dict[str, Any]:
        the_pod = fleet.pod("one")
        the_pod["spec"]["resourceClaims"] = [{"name": f"c{i}", "resourceClaimTemplateName": "one"}
                                             for i in range(claims)]  # fmt: skip
        return the_pod

    nine = score_all(objects, pod_of(9))
    assert nine["free"].score is None
    assert nine["free"].reason == ("the pod's claims do not fit on this node's free devices: they ask for at least 9, "
                                   "it has 8")
    eight = score_all(objects, pod_of(8))
    assert len(eight["free"].devices) == 8 and eight["free"].score is not None
    assert eight["used"].reason.endswith("they ask for at least 8, it has 7")


def test_admin_access_sees_held_devices_and_does_not_count_as_using_them() -> None:
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(),
               fleet.allocated_claim("u", [("n", f"gpu-{i}") for i in range(8)]),
               fleet.template("admin", {"requests": [fleet.exact("mon", 1, adminAccess=True)]})]
    verdict = score_all(objects, fleet.pod("admin"))["n"]
    assert verdict.devices == ("gpu.nvidia.com/n/gpu-0",)
    assert "leaves 0 of 8 matching devices free" in verdict.reason


def test_a_held_admin_access_device_stays_free_for_others() -> None:
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(),
               fleet.allocated_claim("mon", [("n", "gpu-0")], admin=True),
               fleet.template("one", {"requests": [fleet.exact("gpu")]})]
    assert score_all(objects, fleet.pod("one"))["n"].devices == ("gpu.nvidia.com/n/gpu-0",)


def test_a_cel_runtime_error_makes_the_node_unfit_with_the_error_in_the_reason() -> None:
    devices = {"requests": [fleet.exact("gpu", selectors=[
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'"}}])]}
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(), fleet.template("bad", devices)]
    verdict = score_all(objects, fleet.pod("bad"))["n"]
    assert verdict.score is None and verdict.error
    assert "CEL runtime error" in verdict.reason and "noSuchAttribute" in verdict.reason


def test_gb200_and_gb300_four_gpus_are_one_nvlink_domain_by_product_fact() -> None:
    objects = fleet.load("oci-gb200-4gpu-nvidia-v25.12.yaml") + fleet.load("azure-gb300-4gpu-nvidia.yaml")
    objects += [*fleet.gpu_classes(), fleet.template("four", {"requests": [fleet.exact("gpu", 4)]})]
    verdicts = score_all(objects, fleet.pod("four"))
    assert len(verdicts) == 2
    for verdict in verdicts.values():
        assert len(verdict.devices) == 4
        assert verdict.strict["nvlink"] is True and verdict.strict["resource.kubernetes.io/pcieRoot"] is False


def test_the_nvlink_annotation_splits_a_node_into_groups() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "annotations": {
        CONFIG.nvlink_annotation: "gpu-0,gpu-2;gpu-1,gpu-3"}}}
    objects = [node, fleet.node_slice("n", [fleet.gpu(f"gpu-{i}", product="X") for i in range(4)]),
               *fleet.gpu_classes(), fleet.template("two", {"requests": [fleet.exact("gpu", 2)]})]
    verdict = score_all(objects, fleet.pod("two"))["n"]
    assert verdict.devices == ("gpu.nvidia.com/n/gpu-0", "gpu.nvidia.com/n/gpu-1")
    assert verdict.strict["nvlink"] is False and "nvlink 0.00" in verdict.reason


@pytest.mark.parametrize("form", ["bare", "qualified"])
def test_an_nvlink_annotation_in_either_documented_form_forms_the_group(form: str) -> None:
    def name(i: int) -> str:
        return f"gpu-{i}" if form == "bare" else f"gpu.nvidia.com/n/gpu-{i}"

    groups = ";".join(",".join(name(i) for i in group) for group in ((0, 1), (2, 3)))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "annotations": {
        CONFIG.nvlink_annotation: groups}}}
    objects = [node, fleet.node_slice("n", [fleet.gpu(f"gpu-{i}", product="X") for i in range(4)]),
               *fleet.gpu_classes(), fleet.template("two", {"requests": [fleet.exact("gpu", 2)]})]
    verdict = score_all(objects, fleet.pod("two"))["n"]
    assert verdict.devices == ("gpu.nvidia.com/n/gpu-0", "gpu.nvidia.com/n/gpu-1")
    assert verdict.strict["nvlink"] is True and "nvlink 1.00" in verdict.reason


def test_three_subrequests_give_three_bands() -> None:
    devices = {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "root", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "numa", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 2}]}],
        "constraints": [{"requests": ["gpu/root"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
                        {"requests": ["gpu/numa"], "matchAttribute": "resource.kubernetes.io/numaNode"}]}
    held = {"root": [], "numa": [0, 2, 4, 6], "any": [0, 1, 2, 4, 6, 7]}
    objects: list[dict[str, Any]] = [*fleet.gpu_classes(), fleet.template("t", devices)]
    for node, used in held.items():
        objects.append(fleet.pairs_node(node))
        if used:
            objects.append(fleet.allocated_claim(f"u-{node}", [(node, f"gpu-{i}") for i in used]))
    verdicts = score_all(objects, fleet.pod("t"))
    assert 8 <= verdicts["root"].score <= 10  # type: ignore[operator]
    assert 4 <= verdicts["numa"].score <= 7  # type: ignore[operator]
    assert 1 <= verdicts["any"].score <= 3  # type: ignore[operator]


def test_the_same_input_gives_the_same_verdicts() -> None:
    objects = fleet.load("aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml") + fleet.gpu_classes()
    objects.append(fleet.template("two", fleet.tight_or_any(2)))
    assert score_all(objects, fleet.pod("two")) == score_all(objects, fleet.pod("two"))


def test_allocated_claims_are_skipped_and_missing_ones_noted() -> None:
    the_pod = fleet.pod("one")
    the_pod["spec"]["resourceClaims"] = [{"name": "done", "resourceClaimName": "u"},
                                         {"name": "gone", "resourceClaimName": "nope"}]
    objects = [fleet.pairs_node("n"), *fleet.gpu_classes(), fleet.allocated_claim("u", [("n", "gpu-0")])]
    view = OfflineView(objects, config=CONFIG)
    request = predict.resolve(the_pod, view, CONFIG)
    assert request.empty
    assert request.notes == ("claim gone: ResourceClaim default/nope not found, left out",)


def test_a_bad_policy_annotation_names_the_field() -> None:
    view = OfflineView([], config=CONFIG)
    with pytest.raises(predict.PodError, match=r"metadata.annotations\[gpuclaim.io/placement-policy\]"):
        predict.resolve(fleet.pod("x", annotations={CONFIG.policy_annotation: "pack"}), view, CONFIG)


def test_a_pending_claim_named_in_the_pod_status_is_predicted_from_its_own_spec() -> None:
    pending = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "p-gpu-abcde", "namespace": "default"},
               "spec": {"devices": {"requests": [fleet.exact("gpu", 3)]}}}
    the_pod = fleet.pod("gpu")  # the template "gpu" does not exist: the claim must be used
    the_pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]}
    direct = fleet.pod("x")
    direct["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]
    for pod in (the_pod, direct):
        verdict = score_all([fleet.pairs_node("n"), *fleet.gpu_classes(), pending], pod)["n"]
        assert len(verdict.devices) == 3


_json = st.recursive(st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "gpu", "two", "spread"]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                         ["metadata", "spec", "status", "annotations", "namespace", "name", "resourceClaims",
                          "resourceClaimName", "resourceClaimTemplateName", "resourceClaimStatuses",
                          CONFIG.policy_annotation, CONFIG.hard_topology_annotation]), inner, max_size=4),
                     max_leaves=15)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), _json, max_size=3))
def test_any_pod_is_predicted_or_refused_with_a_field(pod: dict[str, Any]) -> None:
    view = OfflineView([fleet.pairs_node("n"), *fleet.gpu_classes(), fleet.template("two", fleet.tight_or_any(2))],
                       config=CONFIG)
    try:
        request = predict.resolve(pod, view, CONFIG)
    except predict.PodError as err:
        assert str(err).startswith(("metadata", "spec", "status", "claim ")), err
        return
    verdicts = predict.predict(request, ["n"], view, CONFIG)
    assert len(verdicts) == 1


def _mi300x_node(node: str, numa_of: list[int]) -> dict[str, Any]:
    """8 MI300X built from the device of amd-mi300x-spx-trimmed-2026.yaml (the dump is trimmed to one device and
    has no driver, pool or node): the same attributes, one PCIe root per GPU, the driver's own numaNode."""
    source = fleet.load("amd-mi300x-spx-trimmed-2026.yaml")[0]["spec"]["devices"][0]
    devices = []
    for i, numa in enumerate(numa_of):
        attrs = {**source["attributes"], "numaNode": {"int": numa},
                 "resource.kubernetes.io/pcieRoot": {"string": f"pci000{i}:00"}}
        devices.append({"name": f"gpu-{i}-128", "attributes": attrs, "capacity": source["capacity"]})
    return fleet.node_slice(node, devices, driver="gpu.amd.com")


def test_mi300x_four_gpus_prefer_one_numa_node_with_the_drivers_numa_attribute_configured() -> None:
    config = load_config({"extender": {"topologyAttributes": [
        {"name": "resource.kubernetes.io/pcieRoot", "weight": 2}, {"name": "gpu.amd.com/numaNode", "weight": 1}],
        "productFacts": [{"productName": "AMD_Instinct_MI300X", "nvlinkDomain": "node"}]}}).extender
    objects = [_mi300x_node("mixed", [0, 1, 0, 1, 0, 1, 0, 1]), _mi300x_node("split", [0, 0, 0, 0, 1, 1, 1, 1]),
               fleet.device_class("gpu.amd.com", "device.driver == 'gpu.amd.com'"),
               fleet.template("four", {"requests": [fleet.exact("gpu", 4, cls="gpu.amd.com")]})]
    verdicts = score_all(objects, fleet.pod("four"), config)
    assert verdicts["split"].strict["gpu.amd.com/numaNode"] is True
    assert verdicts["mixed"].strict["gpu.amd.com/numaNode"] is False
    assert verdicts["split"].score > verdicts["mixed"].score  # type: ignore[operator]


def test_group_localities_are_pooled_weighted_by_their_device_pairs() -> None:
    # a 2-GPU group on one root (1 pair, locality 1) and a 4-GPU group with every GPU on its own root and
    # NUMA node (6 pairs, locality 0): pooled by pairs 1/7, not the plain mean 1/2 of the two groups
    slice_, errors = api.parse_resource_slice(fleet.node_slice("n", [
        fleet.gpu("g0", root="r0", numa=0, product="X"), fleet.gpu("g1", root="r0", numa=0, product="X"),
        *(fleet.gpu(f"g{i}", root=f"r{i}", numa=i, product="X") for i in range(2, 6))]))
    assert slice_ is not None and not errors
    topology = NodeTopology(config=CONFIG, devices=[(d.id, d) for d in slice_.devices])
    ids = [d.id for d in slice_.devices]
    pair, quad = ids[:2], ids[2:]
    value, strict, found = score.pooled_locality(topology, [pair, quad])
    assert [loc.value for loc in found] == [1.0, 0.0]
    assert value == pytest.approx(1 / 7)
    assert strict["resource.kubernetes.io/pcieRoot"] is False  # the quad straddles roots
    assert score.pooled_locality(topology, [quad, quad[:1]])[0] == 0.0  # a single device is no group
