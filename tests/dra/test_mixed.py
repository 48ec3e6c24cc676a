"""dra.mixed: what makes a node mixed, and which pods the extender keeps off it.

Aspects: a mapped device-plugin resource above zero plus slices of the class's driver; the driver read from the
class's selectors (MIG's class is served by gpu.nvidia.com); zero, unmapped or driverless nodes are not mixed;
converted pods are told apart by gpuclaim's template and claim names.
"""

from __future__ import annotations

from gpuclaim.dra.api import DeviceClass, parse_device_class
from gpuclaim.dra.config import ConversionConfig
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.dra.mixed import Overlap, class_drivers, describe, is_converted, overlaps


def device_class(name: str, expression: str | None) -> DeviceClass:
    spec = {"selectors": [{"cel": {"expression": expression}}]} if expression else {}
    parsed, errors = parse_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                         "metadata": {"name": name}, "spec": spec})
    assert parsed is not None and not errors
    return parsed


CLASSES = {
    "gpu.nvidia.com": device_class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && "
                                   "device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    "mig.nvidia.com": device_class("mig.nvidia.com", 'device.driver == "gpu.nvidia.com"'),
}
TABLE = MappingTable(ConversionConfig(), CLASSES)


def test_the_driver_comes_from_the_selectors_else_the_class_name() -> None:
    assert class_drivers("mig.nvidia.com", CLASSES["mig.nvidia.com"]) == {"gpu.nvidia.com"}
    assert class_drivers("gpu.example.com", None) == {"gpu.example.com"}


def test_a_node_with_the_device_plugin_and_the_driver_is_mixed() -> None:
    found = overlaps({"nvidia.com/gpu": "8", "nvidia.com/mig-1g.5gb": "7", "cpu": "64"}, {"gpu.nvidia.com"}, TABLE,
                     CLASSES)
    assert found == (Overlap("nvidia.com/gpu", "8", "gpu.nvidia.com", "gpu.nvidia.com"),
                     Overlap("nvidia.com/mig-1g.5gb", "7", "mig.nvidia.com", "gpu.nvidia.com"))
    assert describe("n1", found[:1]) == ("node n1 is mixed: the device plugin advertises nvidia.com/gpu=8 and driver "
                                         "gpu.nvidia.com publishes ResourceSlices (DeviceClass gpu.nvidia.com)")


def test_zero_unmapped_or_without_slices_is_not_mixed() -> None:
    assert overlaps({"nvidia.com/gpu": "0"}, {"gpu.nvidia.com"}, TABLE, CLASSES) == ()
    assert overlaps({"nvidia.com/gpu": "8"}, {"compute-domain.nvidia.com"}, TABLE, CLASSES) == ()
    assert overlaps({"example.com/fpga": "2"}, {"gpu.nvidia.com"}, TABLE, CLASSES) == ()
    assert overlaps({"nvidia.com/gpu": "bad"}, {"gpu.nvidia.com"}, TABLE, CLASSES) == ()


def test_converted_pods_reference_gpuclaims_templates_or_claims() -> None:
    assert is_converted({"spec": {"resourceClaims": [{"name": "gpuclaim",
                                                      "resourceClaimTemplateName": "gpuclaim-ab"}]}})
    assert is_converted({"spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "gpuclaim-share-x"}]}})
    assert not is_converted({"spec": {"resourceClaims": [{"name": "mine", "resourceClaimTemplateName": "mine"}]}})
    assert not is_converted({"spec": {}}) and not is_converted({})
