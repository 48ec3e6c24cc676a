"""GPU quotas across the conversion (issue 25, docs/migration.md): which DRA-native quota entries keep a legacy one.

A namespace's ResourceQuota ``requests.nvidia.com/gpu: N`` bounds pods that ask for ``nvidia.com/gpu``. Once the
webhook converts those pods, their devices come from ResourceClaims, which kube-apiserver charges to
``<class>.deviceclass.resource.k8s.io/devices`` on every supported version (and, only where KEP-5004's quota is on
and the class declares the name, also to ``requests.<extendedResourceName>``). So the controller keeps, beside each
legacy quota, a quota of its own with ``<class>.deviceclass.resource.k8s.io/devices: N`` for the class the
conversion maps the legacy resource to; the apiserver's own charging of the claims is then the hard bound.

Pure: what the mirror of a legacy quota is (:func:`mirror_of`), how many devices of each class a claim spec is
charged (:func:`claim_devices`, the quota evaluator's count), the admission pre-check's verdict
(:func:`exceeded`), and the pre-check's memory of admitted pods whose claims are not charged yet
(:class:`Reservations`). The controller (kube/quota.py) and the webhook do the I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra.mapping import MappingTable
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.versions import KubernetesModel

Obj = dict[str, Any]
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpuclaim"
#: the label that tells the controller's own quotas from the admins' (a label: the webhook watches by selector)
MIRROR_LABEL = "gpuclaim.io/quota-mirror"
#: on a mirror: the name of the legacy quota it keeps (names reach 253 characters, past a label value's 63)
MIRROR_OF_ANNOTATION = "gpuclaim.io/quota-mirror-of"
#: on a mirror: JSON {DRA entry: [legacy entries it keeps]}, so a refusal can speak in the admin's names
ENTRIES_ANNOTATION = "gpuclaim.io/quota-entries"
NAME_PREFIX = "gpuclaim-"
REQUESTS = "requests."
# resourceapi.AllocationResultsMaxSize: what the evaluator charges for allocationMode All
ALL_DEVICES = 32
_MAX_NAME = 253


@dataclass(frozen=True, slots=True)
class Mirror:
    """The DRA-native entries that keep one legacy quota, or why it cannot be kept."""

    #: DRA entry name -> limit (devices)
    hard: Mapping[str, int] = field(default_factory=dict)
    #: DRA entry name -> the legacy entries it keeps (sorted)
    legacy: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: legacy entries that could not be mirrored, with the reason (for logs, metrics and `audit`)
    problems: tuple[str, ...] = ()


def devices_entry(model: KubernetesModel, device_class: str) -> str:
    """The quota name a claim's devices of ``device_class`` are charged to on every version of the model:
    ``<class>.deviceclass.resource.k8s.io/devices`` (core/v1 ResourceClaimsPerClass)."""
    return model.quota_names(device_class)[0]


def mirror_of(quota: Mapping[str, Any], table: MappingTable, model: KubernetesModel) -> Mirror:
    """The entries that keep ``quota``'s legacy GPU entries after conversion.

    Each ``requests.<resource>`` entry whose resource the conversion maps (``table``) adds its limit to the entry
    of the target DeviceClass; several legacy resources of one class (MIG profiles mapped to ``mig.nvidia.com``)
    add up, because quota counts devices per class, not per profile. A scoped quota is not mirrored: the claim
    evaluator matches no scope (K37/pkg/quota/v1/evaluator/core/resource_claims.go MatchingScopes), so a scoped
    entry could never charge a claim, and an unscoped one would bound pods the admin's quota does not.
    """
    spec = quota.get("spec") or {}
    hard = spec.get("hard") or {}
    if not isinstance(hard, Mapping):
        return Mirror(problems=("spec.hard is not a mapping",))
    wanted = sorted(k for k in hard if isinstance(k, str) and k.startswith(REQUESTS)
                    and table.target(k[len(REQUESTS):]) is not None)
    if not wanted:
        return Mirror()
    if spec.get("scopes") or spec.get("scopeSelector"):
        return Mirror(problems=tuple(f"{k}: the quota has scopes, which never match a ResourceClaim" for k in wanted))
    limits: dict[str, int] = {}
    legacy: dict[str, list[str]] = {}
    problems: list[str] = []
    for key in wanted:
        target = table.target(key[len(REQUESTS):])
        assert target is not None
        try:
            value = parse_quantity(str(hard[key]))
        except ValueError:
            problems.append(f"{key}: {hard[key]!r} is not a quantity")
            continue
        if not value.is_integer() or value.sign() < 0:
            problems.append(f"{key}: {value} is not a whole number of devices")
            continue
        name = devices_entry(model, target.device_class_name)
        limits[name] = limits.get(name, 0) + value.as_integer()
        legacy.setdefault(name, []).append(key)
    return Mirror(hard=limits, legacy={k: tuple(v) for k, v in legacy.items()}, problems=tuple(problems))


def mirror_name(legacy_name: str) -> str:
    """``gpuclaim-<legacy name>``, shortened with a hash where that would pass 253 characters."""
    name = NAME_PREFIX + legacy_name
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(legacy_name.encode()).hexdigest()[:10]
    return f"{name[:_MAX_NAME - 11].rstrip('.-')}-{digest}"


def mirror_object(quota: Mapping[str, Any], mirror: Mirror) -> Obj:
    """The ResourceQuota the controller keeps for ``quota``: in its namespace, owned by it (so deleted with it by
    kube-controller-manager's garbage collector too), labelled as gpuclaim's."""
    meta = quota.get("metadata") or {}
    name = str(meta.get("name", ""))
    return {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {
            "name": mirror_name(name), "namespace": str(meta.get("namespace", "")),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, MIRROR_LABEL: "true"},
            "annotations": {MIRROR_OF_ANNOTATION: name,
                            ENTRIES_ANNOTATION: json.dumps({k: list(v) for k, v in sorted(mirror.legacy.items())},
                                                           separators=(",", ":"))},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ResourceQuota", "name": name,
                                 "uid": str(meta.get("uid", ""))}],
        },
        "spec": {"hard": {k: str(v) for k, v in sorted(mirror.hard.items())}},
    }


def is_mirror(quota: Mapping[str, Any]) -> bool:
    meta = quota.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and labels.get(MIRROR_LABEL) == "true"
            and str(meta.get("name", "")).startswith(NAME_PREFIX))


def differs(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether the controller must write ``desired`` over ``current`` (its entries, annotations or owner)."""
    cur_meta, want_meta = current.get("metadata") or {}, desired["metadata"]
    if dict((current.get("spec") or {}).get("hard") or {}) != desired["spec"]["hard"]:
        return True
    annotations = cur_meta.get("annotations") or {}
    if any(annotations.get(k) != v for k, v in want_meta["annotations"].items()):
        return True
    owners = [(o.get("kind"), o.get("name"), o.get("uid")) for o in cur_meta.get("ownerReferences") or ()]
    return owners != [(o["kind"], o["name"], o["uid"]) for o in want_meta["ownerReferences"]]


# ---- what a claim is charged ---------------------------------------------------------------------------------------


def claim_devices(claim_spec: Mapping[str, Any]) -> dict[str, int]:
    """DeviceClass -> devices a ResourceClaim spec is charged, as kube-apiserver's claim evaluator counts them:
    ``exactly`` its count (All: 32), ``firstAvailable`` the largest count per class among its subrequests."""
    out: dict[str, int] = {}
    for request in (claim_spec.get("devices") or {}).get("requests") or ():
        if not isinstance(request, Mapping):
            continue
        subrequests = request.get("firstAvailable")
        if subrequests:
            worst: dict[str, int] = {}
            for sub in subrequests:
                if isinstance(sub, Mapping) and isinstance(sub.get("deviceClassName"), str):
                    cls = sub["deviceClassName"]
                    worst[cls] = max(worst.get(cls, 0), _count(sub))
            for cls, n in worst.items():
                out[cls] = out.get(cls, 0) + n
        elif isinstance(request.get("exactly"), Mapping) and isinstance(request["exactly"].get("deviceClassName"),
                                                                         str):
            cls = request["exactly"]["deviceClassName"]
            out[cls] = out.get(cls, 0) + _count(request["exactly"])
    return out


def _count(request: Mapping[str, Any]) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "All":
        return ALL_DEVICES
    if mode == "ExactCount":
        count = request.get("count", 1)
        return count if isinstance(count, int) and not isinstance(count, bool) else 1
    return 0  # an unknown mode is not charged (the evaluator's downgrade rule)


def templates_devices(templates: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Devices per class the claims made from these ResourceClaimTemplates (one claim each) are charged."""
    out: dict[str, int] = {}
    for template in templates:
        for cls, n in claim_devices(((template.get("spec") or {}).get("spec")) or {}).items():
            out[cls] = out.get(cls, 0) + n
    return out


# ---- the admission pre-check ---------------------------------------------------------------------------------------


def entry_class(entry: str) -> str | None:
    """``gpu.nvidia.com`` of ``gpu.nvidia.com.deviceclass.resource.k8s.io/devices``; None for another name."""
    suffix = ".deviceclass.resource.k8s.io/devices"
    return entry[:-len(suffix)] or None if entry.endswith(suffix) else None


def _int(value: object) -> int | None:
    try:
        q = parse_quantity(str(value))
    except ValueError:
        return None
    return q.as_integer() if q.is_integer() else None


def exceeded(requested: Mapping[str, int], mirrors: Iterable[Mapping[str, Any]], *,
             pending: Mapping[tuple[str, str], int] | None = None) -> str | None:
    """The refusal for a pod whose claims would be charged ``requested`` (class -> devices) in a namespace with
    these mirror quotas, in kube-apiserver's quota words; None when every mirror has room. ``pending``: (mirror
    name, entry) -> devices of pods admitted a moment ago whose claims the quota's status does not show yet.

    The message names the admin's quota and legacy resource (``exceeded quota: gpu-quota, requested:
    requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1``), as the
    device plugin's pods were told; where one DRA entry keeps several legacy entries, it names the DRA entry."""
    pending = pending or {}
    for quota in sorted(mirrors, key=lambda q: str((q.get("metadata") or {}).get("name", ""))):
        meta = quota.get("metadata") or {}
        status = quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        try:
            legacy = json.loads((meta.get("annotations") or {}).get(ENTRIES_ANNOTATION) or "{}")
        except ValueError:
            legacy = {}
        for entry in sorted(hard):
            cls = entry_class(entry)
            if cls is None or not requested.get(cls):
                continue
            limit = _int(hard[entry])
            if limit is None:
                continue
            now_used = (_int(used.get(entry, 0)) or 0) + pending.get((str(meta.get("name", "")), entry), 0)
            if now_used + requested[cls] <= limit:
                continue
            names = legacy.get(entry) if isinstance(legacy, Mapping) else None
            shown = names[0] if isinstance(names, list) and len(names) == 1 else entry
            quota_name = (meta.get("annotations") or {}).get(MIRROR_OF_ANNOTATION) or meta.get("name", "")
            return (f"exceeded quota: {quota_name}, requested: {shown}={requested[cls]}, used: {shown}={now_used}, "
                    f"limited: {shown}={limit}")
    return None


class Reservations:
    """Devices of converted pods admitted in the last ``ttl`` seconds, per (namespace, mirror, entry), until the
    mirror's ``status.used`` shows them.

    A pod is admitted before its claim exists: the resourceclaim controller makes it a moment later, and only
    then does the apiserver charge the quota. A ReplicaSet creates its second and third pod within that moment, so
    the pre-check counts what it admitted itself. A reservation ends when the mirror's used grows (oldest first) or
    after ``ttl`` (a pod refused after this webhook, or deleted before its claim was made). Per replica: another
    replica's admissions are seen only through the quota's status (docs/migration.md, the race window).
    """

    def __init__(self, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._pending: dict[tuple[str, str, str], list[tuple[float, int]]] = {}
        self._used: dict[tuple[str, str, str], int] = {}

    def pending(self, namespace: str, now: float) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for key in [k for k in self._pending if k[0] == namespace]:
            alive = [(t, n) for t, n in self._pending[key] if now - t < self.ttl]
            if alive:
                self._pending[key] = alive
                out[(key[1], key[2])] = sum(n for _, n in alive)
            else:
                del self._pending[key]
        return out

    def reserve(self, namespace: str, requested: Mapping[str, int], mirrors: Iterable[Mapping[str, Any]],
                now: float) -> None:
        if len(self._pending) > 1000:  # namespaces no pod was admitted to since: their expired entries go
            for key in [k for k, queue in self._pending.items() if all(now - t >= self.ttl for t, _ in queue)]:
                del self._pending[key]
        for quota in mirrors:
            name = str((quota.get("metadata") or {}).get("name", ""))
            for entry in (quota.get("spec") or {}).get("hard") or {}:
                cls = entry_class(entry)
                if cls is not None and requested.get(cls):
                    self._pending.setdefault((namespace, name, entry), []).append((now, requested[cls]))

    def observe(self, quota: Mapping[str, Any]) -> None:
        """A mirror as its watch shows it: growth of its used ends that many reserved devices, oldest first."""
        meta = quota.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        for entry, value in ((quota.get("status") or {}).get("used") or {}).items():
            key = (namespace, name, entry)
            used = _int(value)
            if used is None:
                continue
            grown = used - self._used.get(key, used)
            self._used[key] = used
            queue = self._pending.get(key)
            while grown > 0 and queue:
                t, n = queue[0]
                if n <= grown:
                    queue.pop(0)
                    grown -= n
                else:
                    queue[0] = (t, n - grown)
                    grown = 0

    def forget(self, quota: Mapping[str, Any]) -> None:
        meta = quota.get("metadata") or {}
        for key in [k for k in self._used if k[:2] == (meta.get("namespace"), meta.get("name"))]:
            del self._used[key]
            self._pending.pop(key, None)
