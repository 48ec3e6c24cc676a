"""The DRA feature gates of kube-apiserver / kube-scheduler 1.34-1.37, as versioned specs.

Upstream keeps one list of specs per gate (``pkg/features/kube_features.go``) and answers "what is gate G at
version V" by taking the last spec introduced at or before V; this table has the same shape and is read the same
way (:func:`spec`). Each stage was read from that release's own file; the start line of the gate's block in
K34 / K35 / K36 / K37 (k8s.io/kubernetes v1.34.4 / v1.35.4 / v1.36.3 / v1.37.2, ``pkg/features/kube_features.go``)
follows each gate ("-" where the gate does not exist in that release).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Stage = Literal["alpha", "beta", "ga"]


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One entry of a gate's history: from Kubernetes 1.``since`` on, the gate is at ``stage`` with ``default``."""

    since: int
    stage: Stage
    default: bool
    locked: bool = False


def _s(since: int, stage: Stage, default: bool, *, locked: bool = False) -> GateSpec:
    return GateSpec(since, stage, default, locked)


_HISTORY: dict[str, tuple[GateSpec, ...]] = {
    # 1269 / 1292 / 1443 / 1579 ("remove completely in 1.38")
    "DynamicResourceAllocation": (_s(34, "ga", True), _s(35, "ga", True, locked=True)),
    # KEP-5018; 1202 / 1227 / 1348 / 1451 ("GA in 1.36; remove in 1.39")
    "DRAAdminAccess": (_s(34, "beta", True), _s(36, "ga", True, locked=True)),
    # KEP-4816; 1227 / 1256 / 1392 / 1519 ("remove completely in 1.40")
    "DRAPrioritizedList": (_s(34, "beta", True), _s(36, "ga", True), _s(37, "ga", True, locked=True)),
    # KEP-5004; 1219 / 1248 / 1374 / 1487 ("GA in 1.37; remove in 1.40")
    "DRAExtendedResource": (_s(34, "alpha", False), _s(36, "beta", True), _s(37, "ga", True, locked=True)),
    # KEP-5075; 1207 / 1232 / 1354 / 1457
    "DRAConsumableCapacity": (_s(34, "alpha", False), _s(36, "beta", True)),
    # KEP-4815; 1223 / 1252 / 1387 / 1510
    "DRAPartitionableDevices": (_s(34, "alpha", False), _s(36, "beta", True)),
    # KEP-5055; 1215 / 1244 / 1369 / 1481 (GA, LockToDefault false: "true in 1.38; remove in 1.41")
    "DRADeviceTaints": (_s(34, "alpha", False), _s(36, "beta", True), _s(37, "ga", True)),
    # KEP-5055; - / 1240 / 1364 / 1475 (1.36: "Depends on an off-by-default beta API")
    "DRADeviceTaintRules": (_s(35, "alpha", False), _s(36, "beta", False), _s(37, "ga", True)),
    # KEP-5007; 1211 / 1236 / 1359 / 1466
    "DRADeviceBindingConditions": (_s(34, "alpha", False), _s(36, "beta", True)),
    # KEP-4817; 1232 / 1261 / 1398 / 1527 ("remove in 1.40")
    "DRAResourceClaimDeviceStatus": (_s(34, "beta", True), _s(37, "ga", True, locked=True)),
    # KEP-4381; 1237 / 1266 / 1411 / 1541
    "DRASchedulerFilterTimeout": (_s(34, "beta", True),),
    # KEP-4817; - / - / 1403 / 1533
    "DRAResourceClaimGranularStatusAuthorization": (_s(36, "beta", True),),
    # KEP-5491; - / - / 1379 / 1498
    "DRAListTypeAttributes": (_s(36, "alpha", False),),
    # KEP-5517; - / - / 1383 / 1502
    "DRANodeAllocatableResources": (_s(36, "alpha", False),),
    # KEP-5677; - / - / 1407 / 1537
    "DRAResourcePoolStatus": (_s(36, "alpha", False),),
    # KEP-5729; - / - / 1415 / 1545
    "DRAWorkloadResourceClaims": (_s(36, "alpha", False), _s(37, "beta", False)),
    # KEP-6080; - / - / - / 1462
    "DRADerivedAttributes": (_s(37, "alpha", False),),
    # KEP-5963; - / - / - / 1471
    "DRADeviceCompatibilityGroups": (_s(37, "alpha", False),),
    # KEP-5075; - / - / - / 1493-1495. Two 1.37 specs: on only where the component's min-compatibility version is
    # >= 1.37 (component-base featuregate/feature_gate.go:85-106); the default min-compatibility is the binary's
    # minor - 1 (component-base compatibility/version.go:110-111), so a plain 1.37 cluster has it off.
    "DRAFractionalCapacityRange": (_s(37, "beta", False),),
    # KEP-5945; - / - / - / 1506
    "DRAOptionalNodeOperations": (_s(37, "alpha", False),),
    # KEP-5677; - / - / - / 1515
    "DRAPartitionableDevicesType": (_s(37, "alpha", False),),
    # KEP-4680 (device health in pod status); 1658 / 1716 / 1894 / 2068
    "ResourceHealthStatus": (_s(34, "alpha", False), _s(36, "beta", True)),
    # KEP-4680; - / - / 1899 / 2073
    "ResourceHealthStatusMessage": (_s(36, "beta", True),),
}

#: gate name -> its specs, oldest first
HISTORY: Mapping[str, tuple[GateSpec, ...]] = MappingProxyType(_HISTORY)


def spec(name: str, minor: int) -> GateSpec | None:
    """The spec of gate ``name`` in Kubernetes 1.``minor``; None when that release has no such gate."""
    found = None
    for entry in _HISTORY.get(name, ()):
        if entry.since <= minor:
            found = entry
    return found


def names_at(minor: int) -> tuple[str, ...]:
    """The DRA gates Kubernetes 1.``minor`` knows, sorted."""
    return tuple(sorted(n for n in _HISTORY if spec(n, minor) is not None))


def defaults_at(minor: int) -> dict[str, bool]:
    """Gate name -> default in Kubernetes 1.``minor``."""
    out: dict[str, bool] = {}
    for name in names_at(minor):
        entry = spec(name, minor)
        assert entry is not None
        out[name] = entry.default
    return out
