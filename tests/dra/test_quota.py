"""dra.quota: which DRA-native entries keep a legacy GPU quota, how a claim is charged, the pre-check's verdict.

Aspects: the mirror of gpu, MIG (summed per class) and AMD entries on every supported version; scoped quotas and
bad values are reported, not mirrored; a claim spec is counted as kube-apiserver's claim evaluator counts it; the
refusal reads as the quota's own message; reservations end when the quota's used grows or their time is up.
"""

from __future__ import annotations

import json

import pytest

from gpuclaim.dra import quota
from gpuclaim.dra.config import ConversionConfig, ResourceMapping
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.dra.versions import SUPPORTED, model_for

TABLE = MappingTable(ConversionConfig(mappings=(
    *ConversionConfig().mappings, ResourceMapping(resource="amd.com/gpu", device_class_name="gpu.amd.com"))), {})


def legacy(hard: dict[str, str], **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota", "namespace": "team-a", "uid": "u-1"},
            "spec": {"hard": hard, **spec}}


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_mapped_resource_is_kept_under_its_class_on_every_version(version: str) -> None:
    mirror = quota.mirror_of(legacy({
        "requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-1g.10gb": "2", "requests.nvidia.com/mig-3g.40gb": "1",
        "requests.amd.com/gpu": "4", "requests.cpu": "10", "pods": "20"}), TABLE, model_for(version))
    assert mirror.hard == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2,
                           "mig.nvidia.com.deviceclass.resource.k8s.io/devices": 3,  # profiles add up per class
                           "gpu.amd.com.deviceclass.resource.k8s.io/devices": 4}
    assert mirror.legacy["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == (
        "requests.nvidia.com/mig-1g.10gb", "requests.nvidia.com/mig-3g.40gb")
    assert mirror.problems == ()


def test_a_quota_without_gpu_entries_needs_no_mirror() -> None:
    assert quota.mirror_of(legacy({"requests.cpu": "4", "requests.example.com/fpga": "1"}), TABLE,
                           model_for(37)) == quota.Mirror()


def test_scoped_quotas_and_fractions_are_reported_not_mirrored() -> None:
    scoped = quota.mirror_of(legacy({"requests.nvidia.com/gpu": "1"}, scopes=["NotBestEffort"]), TABLE, model_for(35))
    assert scoped.hard == {} and "scopes" in scoped.problems[0]
    odd = quota.mirror_of(legacy({"requests.nvidia.com/gpu": "500m", "requests.amd.com/gpu": "x"}), TABLE,
                          model_for(35))
    assert odd.hard == {} and len(odd.problems) == 2


def test_the_mirror_object_is_owned_by_the_legacy_quota_and_labelled() -> None:
    legacy_quota = legacy({"requests.nvidia.com/gpu": "1"})
    obj = quota.mirror_object(legacy_quota, quota.mirror_of(legacy_quota, TABLE, model_for(37)))
    assert obj["metadata"]["name"] == "gpuclaim-gpu-quota" and obj["metadata"]["namespace"] == "team-a"
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "ResourceQuota", "name": "gpu-quota",
                                                   "uid": "u-1"}]
    assert obj["spec"] == {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}}
    assert quota.is_mirror(obj) and not quota.is_mirror(legacy_quota)
    assert not quota.differs({**obj, "status": {"used": {}}}, obj)
    assert quota.differs({**obj, "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2"}}}, obj)
    assert len(quota.mirror_name("q" * 253)) == 253


def test_claims_are_counted_as_the_apiserver_counts_them() -> None:
    spec = {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
        {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "c", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "All"}},
        {"name": "d", "firstAvailable": [
            {"name": "tight", "deviceClassName": "gpu.nvidia.com", "count": 4},
            {"name": "loose", "deviceClassName": "gpu.nvidia.com", "count": 4},
            {"name": "other", "deviceClassName": "gpu.amd.com", "count": 1}]}]}}
    assert quota.claim_devices(spec) == {"gpu.nvidia.com": 7, "mig.nvidia.com": 32, "gpu.amd.com": 1}
    template = {"spec": {"spec": spec}}
    assert quota.templates_devices([template, template])["gpu.nvidia.com"] == 14


def _mirror(used: int, hard: int = 1, legacy_entries: list[str] | None = None) -> dict:
    entry = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    return {"metadata": {"name": "gpuclaim-gpu-quota", "namespace": "team-a",
                         "annotations": {quota.MIRROR_OF_ANNOTATION: "gpu-quota", quota.ENTRIES_ANNOTATION: json.dumps(
                             {entry: legacy_entries or ["requests.nvidia.com/gpu"]})}},
            "spec": {"hard": {entry: str(hard)}},
            "status": {"hard": {entry: str(hard)}, "used": {entry: str(used)}}}


def test_the_refusal_reads_as_the_quota_message_in_the_admins_names() -> None:
    assert quota.exceeded({"gpu.nvidia.com": 1}, [_mirror(0)]) is None
    assert quota.exceeded({"mig.nvidia.com": 1}, [_mirror(1)]) is None  # another class: not this quota's business
    assert quota.exceeded({"gpu.nvidia.com": 1}, [_mirror(1)]) == (
        "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
        "limited: requests.nvidia.com/gpu=1")
    several = quota.exceeded({"gpu.nvidia.com": 2}, [_mirror(0, legacy_entries=["requests.a/x", "requests.a/y"])])
    assert several is not None and "requested: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2" in several
    pending = {("gpuclaim-gpu-quota", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"): 1}
    assert "used: requests.nvidia.com/gpu=1" in (quota.exceeded({"gpu.nvidia.com": 1}, [_mirror(0)], pending=pending)
                                                  or "")


def test_reservations_end_when_the_quota_shows_the_claim_or_time_is_up() -> None:
    reservations = quota.Reservations(ttl=30)
    reservations.observe(_mirror(0))
    reservations.reserve("team-a", {"gpu.nvidia.com": 1}, [_mirror(0)], now=100.0)
    key = ("gpuclaim-gpu-quota", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices")
    assert reservations.pending("team-a", now=101.0) == {key: 1}
    assert reservations.pending("team-b", now=101.0) == {}
    reservations.observe(_mirror(1))  # the claim was made and charged
    assert reservations.pending("team-a", now=102.0) == {}
    reservations.reserve("team-a", {"gpu.nvidia.com": 1}, [_mirror(1)], now=200.0)
    assert reservations.pending("team-a", now=231.0) == {}  # refused later, or deleted: forgotten after ttl
