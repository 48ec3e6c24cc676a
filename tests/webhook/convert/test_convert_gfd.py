"""GFD node labels → device selectors, evaluated with the DRA CEL engine against real devices."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import yaml
from convert_support import FIXTURES, check_conversion, config, nvidia_classes, selectors_of

from gpuclaim.dra import cel
from gpuclaim.dra.api import Device, flatten_documents, parse_resource_slice
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.webhook.convert import convert_pod


@functools.cache
def devices(fixture: str) -> tuple[Device, ...]:
    out: list[Device] = []
    for doc in flatten_documents(yaml.safe_load_all((FIXTURES / "resourceslices" / fixture).read_text())):
        if isinstance(doc, dict) and doc.get("kind") == "ResourceSlice":
            model, errors = parse_resource_slice(doc)
            assert model is not None and not errors
            out += [d for d in model.devices if d.driver == "gpu.nvidia.com"]
    return tuple(out)


A100 = "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml"
H100 = "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
# a GPU of the same driver that publishes none of the attributes (an older or odd driver build)
BARE = cel.PlainDevice(driver="gpu.nvidia.com", attributes={"type": "gpu"})
MIG = cel.PlainDevice(driver="gpu.nvidia.com", attributes={"type": "mig", "profile": "1g.10gb",
                                                           "productName": "NVIDIA A100-SXM4-40GB"},
                      capacity={"memory": parse_quantity("9728Mi")})


def gpu_pod(spec: dict[str, Any], resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: 1}}}], **spec}}


def selected(spec: dict[str, Any], device: Any, resource: str = "nvidia.com/gpu", **conversion: Any) -> bool:
    p = gpu_pod(spec, resource)
    cfg = config(conversion)
    result = convert_pod(p, config=cfg, device_classes=nvidia_classes())
    check_conversion(p, result, cfg, nvidia_classes())
    expressions = selectors_of(result.templates[0]["spec"]["spec"])
    compiled = [cel.compile_selector(e, mode="new") for e in expressions]
    return all(s.evaluate(device) for s in compiled)  # evaluate raises on a CEL runtime error


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}}


@pytest.mark.parametrize(("label", "fixture", "expected"), [
    ("NVIDIA-A100-SXM4-40GB", A100, True),
    ("NVIDIA-A100-SXM4-40GB", H100, False),
    ("NVIDIA-H100-80GB-HBM3", H100, True),
    ("NVIDIA-H100-80GB-HBM3-SHARED", H100, True),
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", A100, True),
], ids=["a100-on-a100", "a100-on-h100", "h100", "time-sliced-suffix", "mig-mixed-suffix"])
def test_product_node_selector_selects_the_same_gpus(label: str, fixture: str, expected: bool) -> None:
    for device in devices(fixture):
        assert selected({"nodeSelector": {"nvidia.com/gpu.product": label}}, device) is expected


@pytest.mark.parametrize(("mib", "fixture", "expected"), [
    ("40960", A100, True), ("40960", H100, False), ("81559", H100, True), ("81000", H100, True),
    ("80000", H100, False), ("40536", A100, False),
], ids=["a100-exact", "a100-label-h100", "h100-exact", "h100-within-1pct", "h100-outside", "a100-outside"])
def test_memory_label_in_mib_compares_with_the_capacity_within_one_percent(mib: str, fixture: str,
                                                                          expected: bool) -> None:
    for device in devices(fixture)[:2]:
        assert selected({"nodeSelector": {"nvidia.com/gpu.memory": mib}}, device) is expected


@pytest.mark.parametrize(("op", "value", "expected"), [("Gt", "40000", True), ("Gt", "40960", False),
                                                       ("Lt", "50000", True), ("Lt", "40960", False)])
def test_memory_gt_lt_affinity_is_strict(op: str, value: str, expected: bool) -> None:
    spec = affinity([{"key": "nvidia.com/gpu.memory", "operator": op, "values": [value]}])
    assert selected(spec, devices(A100)[0]) is expected


def test_family_and_compute_capability_labels_when_configured() -> None:
    labels = ["nvidia.com/gpu.family", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor"]
    spec = {"nodeSelector": {"nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.compute.major": "8",
                             "nvidia.com/gpu.compute.minor": "0"}}
    assert selected(spec, devices(A100)[0], gfdMigration={"labels": labels})
    assert not selected(spec, devices(H100)[0], gfdMigration={"labels": labels})


def test_affinity_terms_are_ored_and_not_in_is_honoured() -> None:
    spec = affinity([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}],
                    [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-40GB"]},
                     {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["30000"]}])
    assert selected(spec, devices(A100)[0]) and selected(spec, devices(H100)[0])
    not_a100 = affinity([{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-A100-SXM4-40GB"]}])
    assert selected(not_a100, devices(H100)[0]) and not selected(not_a100, devices(A100)[0])


@pytest.mark.parametrize("spec", [
    {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}},
    affinity([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]),
], ids=["nodeSelector", "affinity"])
def test_a_gpu_without_the_attributes_is_a_mismatch_not_a_scheduling_error(spec: dict[str, Any]) -> None:
    assert selected(spec, BARE) is False


def test_mig_requests_get_the_product_but_not_the_full_gpu_memory() -> None:
    spec = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960"}}
    assert selected(spec, MIG, resource="nvidia.com/mig-1g.10gb")
    p = gpu_pod(spec, "nvidia.com/mig-1g.10gb")
    result = convert_pod(p, config=config(), device_classes=nvidia_classes())
    assert not any("capacity" in e for e in selectors_of(result.templates[0]["spec"]["spec"]))


def test_node_selector_kept_by_default_and_dropped_when_configured() -> None:
    spec = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    kept = convert_pod(gpu_pod(spec), config=config(), device_classes=nvidia_classes())
    assert not any("nodeSelector" in op["path"] for op in kept.patch)
    cfg = config({"gfdMigration": {"keepNodeSelector": False}})
    p = gpu_pod(spec)
    dropped = convert_pod(p, config=cfg, device_classes=nvidia_classes())
    assert "nodeSelector" not in check_conversion(p, dropped, cfg, nvidia_classes())["spec"]


def test_dropping_affinity_keeps_other_requirements_and_removes_emptied_alternatives() -> None:
    cfg = config({"gfdMigration": {"keepNodeSelector": False}})
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    product = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
    p = gpu_pod(affinity([zone, product]))
    patched = check_conversion(p, convert_pod(p, config=cfg, device_classes=nvidia_classes()), cfg, nvidia_classes())
    terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}
    p = gpu_pod(affinity([product], [zone]))
    patched = check_conversion(p, convert_pod(p, config=cfg, device_classes=nvidia_classes()), cfg, nvidia_classes())
    assert patched["spec"]["affinity"]["nodeAffinity"] == {}


def test_unconvertible_requirements_stay_node_constraints_with_a_warning() -> None:
    spec = affinity([{"key": "nvidia.com/gpu.memory", "operator": "In", "values": ["lots"]}])
    result = convert_pod(gpu_pod(spec), config=config(), device_classes=nvidia_classes())
    assert any("could not turn" in w and "matchExpressions[0]" in w for w in result.warnings)
    assert selectors_of(result.templates[0]["spec"]["spec"]) == []


def test_migration_off_and_non_nvidia_resources_get_no_gfd_selectors() -> None:
    spec = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    off = convert_pod(gpu_pod(spec), config=config({"gfdMigration": {"enabled": False}}),
                      device_classes=nvidia_classes())
    assert selectors_of(off.templates[0]["spec"]["spec"]) == []
    amd = convert_pod(gpu_pod(spec, "amd.com/gpu"), config=config(), device_classes=nvidia_classes())
    assert selectors_of(amd.templates[0]["spec"]["spec"]) == []


def _products(n: int) -> list[str]:
    return [f"NVIDIA-A100-SXM4-40GB-REV{i:04d}" for i in range(n)]


@pytest.mark.parametrize(("spec", "where"), [
    (affinity([{"key": "nvidia.com/gpu.product", "operator": "In", "values": _products(400)}]),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    (affinity([{"key": "nvidia.com/gpu.product", "operator": "In", "values": _products(200)}],
              [{"key": "nvidia.com/gpu.product", "operator": "In", "values": _products(200)[::-1]}]),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ({"nodeSelector": {"nvidia.com/gpu.product": "A" * 11_000}}, "spec.nodeSelector[nvidia.com/gpu.product]"),
], ids=["one-term", "two-terms", "node-selector-value"])
@pytest.mark.parametrize("keep", [True, False], ids=["keep", "drop"])
def test_a_selector_past_the_apiservers_limit_is_not_written_the_node_constraint_stays(
        spec: dict[str, Any], where: str, keep: bool) -> None:
    """Issue 22, item 2: past 10 KiB the apiserver refuses the template. Each selector stays within the limit;
    what does not fit is left to the node constraint (never removed, whatever keepNodeSelector says)."""
    p = gpu_pod(spec)
    cfg = config({"gfdMigration": {"keepNodeSelector": keep}})
    result = convert_pod(p, config=cfg, device_classes=nvidia_classes())
    check_conversion(p, result, cfg, nvidia_classes())
    assert not result.refusals
    assert all(len(e.encode()) <= 10 * 1024 for e in selectors_of(result.templates[0]["spec"]["spec"]))
    assert not any("affinity" in op["path"] or "nodeSelector" in op["path"] for op in result.patch)
    (warning,) = [w for w in result.warnings if "node constraint only" in w]
    assert warning.startswith(f"gpuclaim did not turn {where} into a device selector")


def test_a_product_list_just_within_the_limit_is_still_migrated() -> None:
    values = _products(330)
    while True:  # the largest list whose selector fits in 10 KiB
        p = gpu_pod(affinity([{"key": "nvidia.com/gpu.product", "operator": "In", "values": values}]))
        result = convert_pod(p, config=config(), device_classes=nvidia_classes())
        if not any("node constraint only" in w for w in result.warnings):
            break
        values = values[:-1]
    (expression,) = [e for e in selectors_of(result.templates[0]["spec"]["spec"]) if "productName" in e]
    assert 10 * 1024 - 40 < len(expression.encode()) <= 10 * 1024
    cel.compile_selector(expression, mode="new")  # the apiserver takes it: within the length and the cost limit
