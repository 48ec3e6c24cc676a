"""The allocator on ResourceSlices captured on real machines (tests/fixtures/resourceslices, provenance there):
AWS p4d (8x A100, GPUs share PCIe roots in pairs) with its EFA NICs, AWS p5 (8x H100, listed gpu-1..gpu-7,
gpu-0), OCI GB200 (4 GPUs, one PCIe root each), and a real allocated claim from Azure GB300."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from official_schemas import assert_valid

from gpuclaim.dra import api
from gpuclaim.dra.allocator import NodeInfo, allocate, allocate_on, allocated_devices, gather_pools

SLICES = Path(__file__).resolve().parents[1] / "fixtures" / "resourceslices"
P4D = "ip-192-168-153-160.ec2.internal"
P5 = "ip-10-0-171-111.ec2.internal"
P5_OTHER = "ip-10-0-206-2.ec2.internal"
GB200 = "10.140.65.248"
PCIE = "resource.kubernetes.io/pcieRoot"


def _objects(name: str) -> list[Any]:
    with (SLICES / name).open(encoding="utf-8") as fh:
        return api.flatten_documents(list(yaml.safe_load_all(fh)))


def _slices(*names: str) -> list[api.ResourceSlice]:
    out = []
    for name in names:
        for obj in _objects(name):
            model, errors = api.parse_resource_slice(obj)
            assert model is not None and not errors, errors
            out.append(model)
    return out


def _class(name: str, expression: str) -> api.DeviceClass:
    klass, errors = api.parse_device_class({"apiVersion": api.API_VERSION, "kind": "DeviceClass",
                                            "metadata": {"name": name},
                                            "spec": {"selectors": [{"cel": {"expression": expression}}]}})  # fmt: skip
    assert klass is not None and not errors, errors
    return klass


CLASSES = {
    k.name: k
    for k in (
        _class("gpu.nvidia.com",
               "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
        _class("efa.dra.net", "device.driver == 'dra.net' && device.attributes['dra.net'].rdma"),
    )
}


def _claim(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None,
           name: str = "train") -> api.ResourceClaim:  # fmt: skip
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    claim, errors = api.parse_resource_claim({"apiVersion": api.API_VERSION, "kind": "ResourceClaim",
                                             "metadata": {"name": name, "namespace": "ml"},
                                             "spec": {"devices": devices}})  # fmt: skip
    assert claim is not None and not errors, errors
    return claim


def _gpus(count: int, name: str = "gpus") -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}


def _picked(outcome: Any) -> list[str]:
    assert outcome.status == "allocated", outcome
    return [r.device for claim in outcome.claims for r in claim.results]


def test_p4d_two_gpus_on_one_pcie_root_land_on_a_pair() -> None:
    claim = _claim([_gpus(2)], [{"matchAttribute": PCIE}])
    outcome = allocate(NodeInfo(P4D), [claim], slices=_slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml"), classes=CLASSES)
    assert _picked(outcome) == ["gpu-0", "gpu-1"]


def test_p4d_backtracks_past_a_half_used_pair() -> None:
    taken = {api.DeviceID("gpu.nvidia.com", P4D, "gpu-1")}
    claim = _claim([_gpus(2)], [{"matchAttribute": PCIE}])
    slices = _slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml")
    outcome = allocate(NodeInfo(P4D), [claim], slices=slices, classes=CLASSES, allocated=taken)
    assert _picked(outcome) == ["gpu-2", "gpu-3"]
    unconstrained = allocate(NodeInfo(P4D), [_claim([_gpus(2)])], slices=slices, classes=CLASSES, allocated=taken)
    assert _picked(unconstrained) == ["gpu-0", "gpu-2"]  # first-fit, no topology preference: what upstream does


def test_p4d_gpu_and_efa_nic_share_a_pcie_root_across_drivers() -> None:
    slices = _slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", "aws-p4d-efa-nics-dranet.yaml")
    claim = _claim(
        [_gpus(1, "gpu"), {"name": "nic", "exactly": {"deviceClassName": "efa.dra.net"}}], [{"matchAttribute": PCIE}]
    )
    outcome = allocate(NodeInfo(P4D), [claim], slices=slices, classes=CLASSES)
    assert _picked(outcome) == ["gpu-0", "pci-0000-10-1b-0"]
    assert [r.driver for r in outcome.claims[0].results] == ["gpu.nvidia.com", "dra.net"]
    # the EFA on root 10 is taken: both GPUs of root 10 are tried and given up, root 20 wins
    taken = {api.DeviceID("dra.net", P4D, "pci-0000-10-1b-0")}
    outcome = allocate(NodeInfo(P4D), [claim], slices=slices, classes=CLASSES, allocated=taken)
    assert _picked(outcome) == ["gpu-2", "pci-0000-20-1b-0"]


def test_p5_picks_in_slice_listing_order_and_sees_only_its_node() -> None:
    slices = _slices("aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")
    one = allocate(NodeInfo(P5), [_claim([_gpus(1)])], slices=slices, classes=CLASSES)
    assert _picked(one) == ["gpu-1"]
    assert one.claims[0].results[0].pool == P5
    other = allocate(NodeInfo(P5_OTHER), [_claim([_gpus(1)])], slices=slices, classes=CLASSES)
    assert _picked(other) == ["gpu-2"] and other.claims[0].results[0].pool == P5_OTHER
    eight = allocate(NodeInfo(P5), [_claim([_gpus(8)])], slices=slices, classes=CLASSES)
    assert _picked(eight) == [f"gpu-{i}" for i in (1, 2, 3, 4, 5, 6, 7, 0)]
    nine = allocate(NodeInfo(P5), [_claim([_gpus(9)])], slices=slices, classes=CLASSES)
    assert nine.status == "unsatisfiable"


@pytest.mark.parametrize(
    "fixture,node",
    [("aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml", P5), ("oci-gb200-4gpu-nvidia-v25.12.yaml", GB200)],
    ids=["p5", "gb200"],
)
def test_one_root_per_gpu_makes_the_tight_alternative_fall_back(fixture: str, node: str) -> None:
    slices = _slices(fixture)
    tight = _claim([_gpus(2)], [{"matchAttribute": PCIE}])
    assert allocate(NodeInfo(node), [tight], slices=slices, classes=CLASSES).status == "unsatisfiable"
    prioritized = _claim(
        [{"name": "gpus", "firstAvailable": [
            {"name": "same-root", "deviceClassName": "gpu.nvidia.com", "count": 2},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 2},
        ]}],
        [{"matchAttribute": PCIE, "requests": ["gpus/same-root"]}],
    )  # fmt: skip
    outcome = allocate(NodeInfo(node), [prioritized], slices=slices, classes=CLASSES)
    assert {r.request for r in outcome.claims[0].results} == {"gpus/any"}
    assert len(_picked(outcome)) == 2


def test_p4d_prioritized_list_takes_the_tight_alternative_when_it_fits() -> None:
    prioritized = _claim(
        [{"name": "gpus", "firstAvailable": [
            {"name": "same-root", "deviceClassName": "gpu.nvidia.com", "count": 2},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 2},
        ]}],
        [{"matchAttribute": PCIE, "requests": ["gpus/same-root"]}],
    )  # fmt: skip
    slices = _slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml")
    taken = {api.DeviceID("gpu.nvidia.com", P4D, f"gpu-{i}") for i in (0, 2, 4, 6)}  # one GPU of every pair
    outcome = allocate(NodeInfo(P4D), [prioritized], slices=slices, classes=CLASSES, allocated=taken)
    assert {r.request for r in outcome.claims[0].results} == {"gpus/any"}
    outcome = allocate(NodeInfo(P4D), [prioritized], slices=slices, classes=CLASSES, allocated=taken - {
        api.DeviceID("gpu.nvidia.com", P4D, "gpu-6")})  # fmt: skip
    assert _picked(outcome) == ["gpu-6", "gpu-7"]
    assert {r.request for r in outcome.claims[0].results} == {"gpus/same-root"}


def test_admin_access_ignores_other_claims_allocations() -> None:
    slices = _slices("aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")
    everything = {api.DeviceID("gpu.nvidia.com", P5, f"gpu-{i}") for i in range(8)}
    admin = _claim([{"name": "monitor", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All",
                                                    "adminAccess": True}}])  # fmt: skip
    outcome = allocate(NodeInfo(P5), [admin], slices=slices, classes=CLASSES, allocated=everything)
    assert len(_picked(outcome)) == 8
    assert all(r.admin_access for r in outcome.claims[0].results)
    plain = allocate(NodeInfo(P5), [_claim([_gpus(1)])], slices=slices, classes=CLASSES, allocated=everything)
    assert plain.status == "unsatisfiable"


def test_allocated_devices_come_from_real_claim_status_without_admin_results() -> None:
    (obj,) = _objects("azure-gb300-allocated-resourceclaim.yaml")
    claim, errors = api.parse_resource_claim(obj)
    assert claim is not None and not errors, errors
    held = allocated_devices([claim])
    assert {d.device for d in held} == {"gpu-0", "pci-0103-00-00-0"}
    admin = api.ResourceClaim(meta=claim.meta, spec=claim.spec, status=api.ClaimStatus(
        allocated=True, results=tuple(api.AllocatedDevice(r.request, r.driver, r.pool, r.device, admin_access=True)
                                      for r in claim.status.results)))  # fmt: skip
    assert allocated_devices([admin]) == set()


def test_pre_indexed_pools_give_the_same_outcome_as_raw_slices() -> None:
    slices = _slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", "aws-p4d-efa-nics-dranet.yaml")
    claim = _claim([_gpus(4)], [{"matchAttribute": PCIE}])
    pools = gather_pools(NodeInfo(P4D), slices)
    assert [p.driver for p in pools.pools] == ["dra.net", "gpu.nvidia.com"]  # sorted by (driver, pool)
    for _ in range(2):  # reusable: nothing of one call leaks into the next
        assert allocate_on(pools, [claim], classes=CLASSES) == allocate(NodeInfo(P4D), [claim], slices=slices,
                                                                        classes=CLASSES)  # fmt: skip


def test_emitted_allocation_is_a_valid_1_34_resource_claim_status() -> None:
    slices = _slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml")
    outcome = allocate(NodeInfo(P4D), [_claim([_gpus(2)], [{"matchAttribute": PCIE}])], slices=slices, classes=CLASSES)
    allocation = outcome.claims[0].to_dict()
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [P4D]}]}]
    }
    obj = {"apiVersion": api.API_VERSION, "kind": "ResourceClaim", "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": 2}}]}},
           "status": {"allocation": allocation}}  # fmt: skip
    assert_valid(obj)


def test_cluster_cache_slices_feed_the_pre_indexed_form() -> None:
    """kube.inventory hands over a node's parsed slices (newest generation); gather_pools takes them as they are."""
    from gpuclaim.kube.inventory import Inventory

    inventory = Inventory()
    inventory.on_node(None, {"metadata": {"name": P4D, "labels": {}}})
    for name in ("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", "aws-p4d-efa-nics-dranet.yaml",
                 "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"):  # fmt: skip
        for obj in _objects(name):
            inventory.on_slice(None, obj)
    pools = gather_pools(NodeInfo(P4D), inventory.parsed_slices_for_node(P4D))
    assert {p.driver for p in pools.pools} == {"gpu.nvidia.com", "dra.net"}
    claim = _claim([_gpus(1, "gpu"), {"name": "nic", "exactly": {"deviceClassName": "efa.dra.net"}}],
                   [{"matchAttribute": PCIE}])  # fmt: skip
    raw = allocate(NodeInfo(P4D), [claim], classes=CLASSES,
                   slices=_slices("aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", "aws-p4d-efa-nics-dranet.yaml",
                                  "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"))  # fmt: skip
    assert allocate_on(pools, [claim], classes=CLASSES) == raw
    assert _picked(raw) == ["gpu-0", "pci-0000-10-1b-0"]
