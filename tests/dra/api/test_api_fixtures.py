"""Every real ResourceSlice and DeviceClass in tests/fixtures parses; the odd ones fail the way they should."""

from __future__ import annotations

import pytest
import yaml
from api_helpers import FIXTURES, load_documents, load_objects, paths

from gpuclaim.dra import api
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.semver import Semver

SLICES = FIXTURES / "resourceslices"
CLASSES = FIXTURES / "deviceclasses"

REAL_SLICE_FILES = [
    "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml",
    "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml",
    "aws-p4d-efa-nics-dranet.yaml",
    "azure-gb300-4gpu-nvidia.yaml",
    "azure-gb300-rdma-nics-dranet.yaml",
    "azure-nd-mi300x-v5-rdma-nics-dranet.yaml",
    "intel-gaudi2-2dev.yaml",
    "intel-gpu-rpl-s-igpu-plus-B580-xe.yaml",
    "oci-gb200-4gpu-nvidia-v25.12.yaml",
    "oci-gb200-rdma-nics-dranet.yaml",
    "openshift-4.22-gcp-2xT4-nvidia-condensed-REPAIRED.yaml",
    "vmware-vks-v1.35-vgpu-GRID-A100-40C-4C-nvidia.yaml",
    "vmware-vks-v1.36-vgpu-GRID-A100-10C-nvidia.yaml",
]
CLASS_FILES = [
    "ALL-rendered-resource.k8s.io-v1.yaml",
    "dra-driver-cpu.yaml",
    "dranet-examples.yaml",
    "google-tpu-helm-template.yaml",
    "intel-gpu-gaudi-qat.yaml",
]


@pytest.mark.parametrize("name", REAL_SLICE_FILES)
def test_every_real_slice_parses_without_errors(name: str) -> None:
    objects = load_objects(SLICES / name)
    assert objects
    for obj in objects:
        model, errors = api.parse_object(obj)
        assert errors == [], [str(e) for e in errors]
        assert isinstance(model, api.ResourceSlice)
        assert model.devices
        for device in model.devices:
            assert device.driver == model.driver
            assert device.pool == model.pool.name
            assert all("/" in key for key in device.attributes)
            assert all("/" in key for key in device.capacity)


@pytest.mark.parametrize("name", CLASS_FILES)
def test_every_real_device_class_parses_without_errors(name: str) -> None:
    objects = load_objects(CLASSES / name)
    assert objects
    for obj in objects:
        model, errors = api.parse_object(obj)
        assert errors == [], [str(e) for e in errors]
        assert isinstance(model, api.DeviceClass)


def test_h100_slice_has_typed_fully_qualified_attributes() -> None:
    objects = load_objects(SLICES / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")
    gpu_slices = [s for s in (api.parse_resource_slice(o)[0] for o in objects) if s and s.driver == "gpu.nvidia.com"]
    assert len(gpu_slices) == 2
    device = gpu_slices[0].devices[0]
    assert device.attributes["gpu.nvidia.com/productName"] == "NVIDIA H100 80GB HBM3"
    assert device.attributes["gpu.nvidia.com/type"] == "gpu"
    assert isinstance(device.attributes["gpu.nvidia.com/cudaComputeCapability"], Semver)
    assert str(device.attributes["gpu.nvidia.com/cudaComputeCapability"]) == "9.0.0"
    assert device.attributes["resource.kubernetes.io/pcieRoot"].startswith("pci0000:")
    assert device.capacity["gpu.nvidia.com/memory"] == parse_quantity("81559Mi")
    assert gpu_slices[0].node_name is not None
    assert device.id == api.DeviceID("gpu.nvidia.com", gpu_slices[0].pool.name, device.name)


def test_compute_domain_devices_have_int_attributes() -> None:
    objects = load_objects(SLICES / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")
    slices = [api.parse_resource_slice(o)[0] for o in objects]
    cd = [s for s in slices if s and s.driver == "compute-domain.nvidia.com"]
    assert cd
    value = cd[0].devices[0].attributes["compute-domain.nvidia.com/id"]
    assert type(value) is int


def test_dranet_attributes_are_already_qualified_and_stay_so() -> None:
    (obj,) = load_objects(SLICES / "aws-p4d-efa-nics-dranet.yaml")
    model, errors = api.parse_resource_slice(obj)
    assert errors == [] and model is not None
    device = model.devices[0]
    assert device.attributes["dra.net/rdma"] in (True, False)
    assert "resource.kubernetes.io/pcieRoot" in device.attributes
    assert not any(k.startswith("dra.net/dra.net") for k in device.attributes)


def test_p4d_gpus_share_pcie_roots_in_pairs() -> None:
    (obj,) = load_objects(SLICES / "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml")
    model, _ = api.parse_resource_slice(obj)
    assert model is not None
    roots = [d.attributes["resource.kubernetes.io/pcieRoot"] for d in model.devices]
    assert len(set(roots)) == 4 and len(roots) == 8


def test_fake_tpu_slice_is_v1beta1_and_rejected_with_the_v1_shape() -> None:
    (obj,) = load_objects(SLICES / "NOT-REAL-tpu-kind-fake-v1beta1.yaml")
    model, errors = api.parse_object(obj)
    assert model is None
    assert paths(errors) == [("apiVersion", "FieldValueInvalid")]
    assert "basic" in errors[0].detail and "resource.k8s.io/v1" in errors[0].detail


def test_amd_v1beta1_fragment_is_rejected() -> None:
    (obj,) = load_objects(SLICES / "amd-rocm-pr21-MI300X-DPX-partition-FRAGMENT.yaml")
    model, errors = api.parse_object(obj)
    assert model is None and paths(errors) == [("apiVersion", "FieldValueInvalid")]


def test_list_typed_attributes_of_the_illustrative_cpu_slice_are_refused_for_1_34() -> None:
    for obj in load_objects(SLICES / "ILLUSTRATIVE-dra-driver-cpu-grouped-and-individual.yaml"):
        model, errors = api.parse_object(obj)
        assert model is not None  # the rest of the slice is readable
        assert paths(errors) == [
            (f"spec.devices[{i}].attributes[resource.kubernetes.io/pcieRoot].strings", "FieldValueForbidden")
            for i in range(len(model.devices))
        ]
        assert "DRAListTypeAttributes" in errors[0].detail
        assert "resource.kubernetes.io/pcieRoot" not in model.devices[0].attributes


@pytest.mark.parametrize("name", ["amd-mi300x-spx-trimmed-2026.yaml", "amd-mi300x-spx-trimmed-oct2025.yaml"])
def test_trimmed_amd_slices_lack_driver_pool_and_node(name: str) -> None:
    (obj,) = load_objects(SLICES / name)
    model, errors = api.parse_object(obj)
    assert paths(errors) == [
        ("spec.driver", "FieldValueRequired"),
        ("spec.pool", "FieldValueRequired"),
        ("spec", "FieldValueRequired"),
    ]
    assert isinstance(model, api.ResourceSlice)
    assert model.devices[0].attributes["resource.kubernetes.io/pcieRoot"] == "pci0003:00" or name.endswith("2025.yaml")


def test_condensed_openshift_file_is_not_valid_yaml_as_published() -> None:
    with pytest.raises(yaml.YAMLError):
        load_documents(SLICES / "openshift-4.22-gcp-2xT4-nvidia-condensed.yaml")


def test_allocated_claim_from_gb300_parses_with_results() -> None:
    (obj,) = load_objects(SLICES / "azure-gb300-allocated-resourceclaim.yaml")
    claim, errors = api.parse_object(obj)
    assert errors == []
    assert isinstance(claim, api.ResourceClaim)
    assert claim.status.allocated
    assert [r.device for r in claim.status.results] == ["gpu-0", "pci-0103-00-00-0"]
    assert claim.status.reserved_for[0].resource == "pods"
    assert claim.status.node_selector is not None
    assert claim.status.node_selector.matches(labels={}, name="aks-gpu-45139532-vmss000081")
    assert claim.spec.requests[0].exactly is not None
    assert (
        claim.spec.requests[0].exactly.selectors[0].expression.startswith('device.attributes["resource.kubernetes.io"]')
    )


def test_v1beta1_device_class_is_rejected() -> None:
    (obj,) = load_objects(CLASSES / "amd-gpu-oct2025-helm-template.yaml")
    model, errors = api.parse_object(obj)
    assert model is None and paths(errors) == [("apiVersion", "FieldValueInvalid")]


def test_nvidia_gpu_class_carries_its_extended_resource_name() -> None:
    classes = {
        c.name: c
        for c in (api.parse_device_class(o)[0] for o in load_objects(CLASSES / "ALL-rendered-resource.k8s.io-v1.yaml"))
        if c
    }
    assert classes["gpu.nvidia.com"].extended_resource_name == "nvidia.com/gpu"
    assert "type == 'mig'" in classes["mig.nvidia.com"].selectors[0].expression
    assert str(classes["mig.nvidia.com"].selectors[0].path) == "spec.selectors[0].cel.expression"
