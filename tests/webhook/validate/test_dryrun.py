"""Dry-run against the real p5 inventory (2 nodes x 8 H100, NVIDIA's real DeviceClasses): runtime errors
(deny / warn), no match with what the devices offer (the 81559Mi < 80Gi trap), count per node,
matchAttribute, firstAvailable, DeviceClass selectors, unknown classes."""

from __future__ import annotations

import validate_objects as o

from gpuclaim.webhook.validate import OfflineInventory, validate_object

UNGUARDED = "device.attributes['gpu.nvidia.com'].index == 0"
SELECTOR_PATH = "spec.devices.requests[0].exactly.selectors[0].cel.expression"


def _create(obj: object, **validation: str) -> object:
    return validate_object(obj, operation="CREATE", inventory=o.inventory(), config=o.config(**validation))


def test_a_runtime_error_on_devices_the_class_admits_is_denied_with_count_example_and_guard() -> None:
    verdict = _create(o.claim(o.request("gpu", UNGUARDED)))
    assert o.paths(verdict.denials) == [(SELECTOR_PATH, "FieldValueInvalid")]
    detail = verdict.denials[0].detail
    assert "CEL runtime error on 16 devices that DeviceClass gpu.nvidia.com admits" in detail
    assert "e.g. gpu.nvidia.com/ip-10-0-" in detail and "no such key: index" in detail
    assert "'index' in device.attributes[\"gpu.nvidia.com\"]" in detail
    assert ".?index.orValue(" in detail
    assert verdict.warnings == []  # the error explains why nothing matches; no second finding


def test_runtime_errors_are_warnings_in_warn_mode() -> None:
    verdict = _create(o.claim(o.request("gpu", UNGUARDED)), runtimeError="warn")
    assert verdict.allowed
    assert [w.split(": ")[0] for w in verdict.warnings] == [SELECTOR_PATH]


def test_a_guarded_selector_is_a_plain_non_match() -> None:
    verdict = _create(o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].?index.orValue(-1) == 0")))
    assert verdict.allowed
    assert verdict.warnings[0].startswith("spec.devices.requests[0].exactly: no device matches")


def test_class_selectors_shield_other_drivers_devices() -> None:
    # the compute-domain channel devices of the fixture have no productName: the class filters them out first
    verdict = _create(o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].productName != ''")))
    assert verdict.allowed and verdict.warnings == []


def test_no_match_says_what_the_devices_offer_and_spells_out_the_80Gi_trap() -> None:
    trap = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    verdict = _create(o.claim(o.request("gpu", trap)))
    assert verdict.allowed
    [warning] = verdict.warnings
    assert warning.startswith("spec.devices.requests[0].exactly: no device matches: DeviceClass gpu.nvidia.com "
                              "admits 16 devices of 20, selectors[0] rejects 16 of them")
    assert "capacity gpu.nvidia.com/memory: 81559Mi (16 devices)" in warning
    assert "81559Mi is less than 80Gi" in warning


def test_no_match_is_denied_in_deny_mode() -> None:
    verdict = _create(o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].productName == 'B200'")),
                      noMatch="deny")
    assert o.paths(verdict.denials) == [("spec.devices.requests[0].exactly", "FieldValueInvalid")]
    assert 'gpu.nvidia.com/productName: "NVIDIA H100 80GB HBM3" (16 devices)' in verdict.message


def test_a_class_that_admits_nothing_names_the_drivers_present() -> None:
    verdict = _create(o.claim(o.request("gpu", cls="gpu.amd.com")))
    assert "DeviceClass gpu.amd.com admits none of the 20 devices in the cluster (drivers: gpu.nvidia.com" \
        in verdict.warnings[0]


def test_count_larger_than_any_node_offers_is_reported_at_count() -> None:
    verdict = _create(o.claim(o.request("gpu", count=9)))
    assert [w.split(": ")[0] for w in verdict.warnings] == ["spec.devices.requests[0].exactly.count"]
    assert "no single node offers 9 matching devices: 16 match in the cluster, at most 8 usable on one node" \
        in verdict.warnings[0]
    assert _create(o.claim(o.request("gpu", count=8))).warnings == []


def test_match_attribute_none_of_the_matching_devices_has() -> None:
    spec = dict(constraints=[{"matchAttribute": "gpu.nvidia.com/nvlinkDomain"}])
    verdict = _create(o.claim(o.request("gpu", count=2), **spec))
    assert verdict.warnings == ["spec.devices.constraints[0].matchAttribute: none of the 16 devices matching gpu "
                                "has attribute gpu.nvidia.com/nvlinkDomain, so the constraint can never be met"]
    ok = dict(constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    assert _create(o.claim(o.request("gpu", count=2), **ok)).warnings == []


def test_first_available_warns_only_when_no_subrequest_matches() -> None:
    def flex(*subs: dict[str, object]) -> dict[str, object]:
        return {"name": "flex", "firstAvailable": list(subs)}

    b200 = {"name": "b200", **o.exact("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA B200')")}
    any_gpu = {"name": "any", **o.exact()}
    assert _create(o.claim(flex(b200, any_gpu))).warnings == []
    verdict = _create(o.claim(flex(b200)))
    assert verdict.warnings[0].startswith("spec.devices.requests[0].firstAvailable: no subrequest matches any device")
    bad = {"name": "bad", **o.exact(UNGUARDED)}
    assert o.paths(_create(o.claim(flex(any_gpu, bad))).denials) == [
        ("spec.devices.requests[0].firstAvailable[1].selectors[0].cel.expression", "FieldValueInvalid")]


def test_a_missing_class_is_a_warning_and_an_unknown_one_is_skipped() -> None:
    verdict = _create(o.claim(o.request("gpu", cls="no-such-class")))
    assert verdict.warnings == ["spec.devices.requests[0].exactly.deviceClassName: DeviceClass no-such-class does "
                                "not exist: the scheduler keeps the pod unschedulable until it is created"]
    offline = OfflineInventory(slices=list(o.slices(o.H100_SLICES)))
    verdict = validate_object(o.claim(o.request("gpu", UNGUARDED)), operation="CREATE", inventory=offline,
                              config=o.config())
    # classes unknown: no dry-run, no guess; only what the driver schema check sees in the devices (issue 16)
    assert verdict.allowed and verdict.warnings == [
        "spec.devices.requests[0].exactly.selectors[0].cel.expression: no device of gpu.nvidia.com in the inventory "
        "(16 devices) publishes an attribute gpu.nvidia.com/index (the shipped schema knows it: the inventory's "
        "driver release does not publish it)"]


def test_device_class_selectors_are_dry_run_too() -> None:
    bad = o.device_class("h100", "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')")
    verdict = _create(bad)
    assert o.paths(verdict.denials) == [("spec.selectors[0].cel.expression", "FieldValueInvalid")]
    assert "CEL runtime error on 4 devices" in verdict.message  # the compute-domain devices lack productName
    good = o.device_class("h100", "device.driver == 'gpu.nvidia.com' && "
                          "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')")
    assert _create(good).allowed and _create(good).warnings == []
    none = o.device_class("b200", "device.driver == 'gpu.nvidia.com' && "
                          "device.attributes['gpu.nvidia.com'].?productName.orValue('') == 'B200'")
    assert _create(none).warnings[0].startswith("spec.selectors: no device matches this class: selectors[0] rejects "
                                                "20 of the 20 devices in the cluster")


def test_every_real_device_class_passes_against_the_real_inventory() -> None:
    for device_class in o.load(o.CLASSES):
        if isinstance(device_class, dict) and device_class.get("kind") == "DeviceClass":
            verdict = _create(device_class)
            assert verdict.allowed, verdict.message
