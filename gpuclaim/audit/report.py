"""The migration-readiness report of ``gpuclaim audit`` (docs/audit.md), from a cluster's objects; pure.

What turning gpuclaim on changes, read from what the cluster holds: each workload that asks for a legacy GPU
resource and what the conversion makes of it (or why it refuses), the namespaces opted out, each GPU quota and the
entries that keep it after conversion, mixed nodes, DeviceClasses that declare an ``extendedResourceName`` and what
the cluster's version does with them, the devices in use through the device plugin and through DRA, the version and
its DRA gates. A *hazard* is something that breaks a rule of the cluster once pods are converted: a workload the
conversion would refuse, a quota that would stop applying, a mixed node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra import mixed, quota
from gpuclaim.dra.api import DeviceClass, parse_device_class
from gpuclaim.dra.config import Config
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.versions import KubernetesModel

Obj = Mapping[str, Any]
REPORT_VERSION = "1"
#: the workload kinds the report lists (bare Pods: those no controller owns)
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
_DONE_PHASES = ("Succeeded", "Failed")


@dataclass
class Objects:
    """A cluster's objects by kind, as read live or from a dump."""

    by_kind: dict[str, list[Obj]] = field(default_factory=dict)

    def add(self, obj: Obj) -> None:
        kind = obj.get("kind")
        if isinstance(kind, str):
            self.by_kind.setdefault(kind, []).append(obj)

    def of(self, kind: str) -> list[Obj]:
        return self.by_kind.get(kind, [])


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _ref(obj: Obj) -> dict[str, str]:
    meta = _meta(obj)
    out = {"kind": str(obj.get("kind", "")), "name": str(meta.get("name", ""))}
    if meta.get("namespace"):
        out["namespace"] = str(meta["namespace"])
    return out


def _pod_spec(obj: Obj) -> Mapping[str, Any]:
    from gpuclaim.webhook.convert import WORKLOAD_TEMPLATE_PATHS

    spec: Any = obj
    for step in WORKLOAD_TEMPLATE_PATHS.get((str(obj.get("apiVersion")), str(obj.get("kind"))), ("-",)):
        spec = spec.get(step) if isinstance(spec, Mapping) else None
    spec = spec.get("spec") if isinstance(spec, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def legacy_resources(pod_spec: Mapping[str, Any], table: MappingTable) -> dict[str, int]:
    """Mapped legacy resource -> the count the pod asks for (limits, else requests; init containers included)."""
    out: dict[str, int] = {}
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            wanted = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
            for name, value in wanted.items():
                if isinstance(name, str) and table.target(name) is not None:
                    try:
                        count = parse_quantity(str(value)).as_integer()
                    except (ValueError, OverflowError):
                        count = 0
                    out[name] = out.get(name, 0) + count
    return out


def _classes(objects: Objects) -> dict[str, DeviceClass]:
    out: dict[str, DeviceClass] = {}
    for obj in objects.of("DeviceClass"):
        parsed, _ = parse_device_class(obj)
        if parsed is not None:
            out[parsed.name] = parsed
    return out


def build(objects: Objects, *, model: KubernetesModel, config: Config, version_text: str = "") -> dict[str, Any]:
    """The report (docs/audit.md specifies every field)."""
    classes = _classes(objects)
    table = MappingTable(config.conversion, classes)
    hazards: list[dict[str, str]] = []
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "kubernetes": {"version": version_text or model.name, "model": model.name,
                       "gates": {k: v for k, v in sorted(model.gates.items())
                                 if k.startswith("DRA") or k == "DynamicResourceAllocation"}},
        "workloads": _workloads(objects, config, classes, table, hazards),
        "optedOutNamespaces": _opted_out(objects, config),
        "quotas": _quotas(objects, table, model, classes, hazards),
        "mixedNodes": _mixed_nodes(objects, table, classes, config, hazards),
        "deviceClasses": _device_classes(classes, table, model),
        "devicesInUse": _in_use(objects, table),
    }
    report["hazards"] = hazards
    return report


def _workloads(objects: Objects, config: Config, classes: Mapping[str, DeviceClass], table: MappingTable,
               hazards: list[dict[str, str]]) -> list[dict[str, Any]]:
    from gpuclaim.webhook.convert import convert_object

    labels = {str(_meta(n).get("name", "")): dict(_meta(n).get("labels") or {}) for n in objects.of("Namespace")}
    out: list[dict[str, Any]] = []
    for kind in WORKLOAD_KINDS:
        for obj in objects.of(kind):
            meta = _meta(obj)
            if kind == "Pod" and any(isinstance(o, Mapping) and o.get("controller")
                                     for o in meta.get("ownerReferences") or ()):
                continue  # a controller's pod: its workload is listed
            wanted = legacy_resources(_pod_spec(obj), table)
            if not wanted:
                continue
            row: dict[str, Any] = {**_ref(obj), "resources": wanted}
            namespace = str(meta.get("namespace", ""))
            result = convert_object(obj, config=config.conversion, device_classes=classes,
                                    namespace_labels=labels.get(namespace))
            conversion = result.conversion if result is not None else None
            if conversion is None or conversion.skipped:
                row.update(outcome="unchanged", detail=conversion.skipped if conversion else "not a workload")
            elif conversion.refusals:
                row.update(outcome="refused", detail=conversion.message())
                hazards.append({"kind": "refusal", "object": _where(obj),
                                "message": f"the webhook would refuse its pods: {conversion.message()}"})
            else:
                devices = quota.templates_devices(conversion.templates)
                row.update(outcome="converted", detail="legacy limits become a ResourceClaimTemplate",
                           templates=sorted(str(t["metadata"]["name"]) for t in conversion.templates),
                           devices=devices)
            if conversion is not None and conversion.warnings:
                row["warnings"] = list(conversion.warnings)
            out.append(row)
    return out


def _opted_out(objects: Objects, config: Config) -> list[dict[str, str]]:
    opt_out = config.conversion.opt_out
    out = [{"namespace": ns, "why": "conversion.excludedNamespaces"} for ns in config.conversion.excluded_namespaces]
    for namespace in objects.of("Namespace"):
        meta = _meta(namespace)
        if (meta.get("labels") or {}).get(opt_out.namespace_label) == opt_out.value:
            out.append({"namespace": str(meta.get("name", "")),
                        "why": f"label {opt_out.namespace_label}={opt_out.value}"})
    return sorted(out, key=lambda r: r["namespace"])


def _quotas(objects: Objects, table: MappingTable, model: KubernetesModel, classes: Mapping[str, DeviceClass],
            hazards: list[dict[str, str]]) -> list[dict[str, Any]]:
    quotas = objects.of("ResourceQuota")
    mirrors = {(str(_meta(q).get("namespace", "")), str((_meta(q).get("annotations") or {}).get(
        quota.MIRROR_OF_ANNOTATION, ""))): q for q in quotas if quota.is_mirror(q)}
    declared = {c.extended_resource_name: name for name, c in classes.items() if c.extended_resource_name}
    out: list[dict[str, Any]] = []
    for legacy in quotas:
        if quota.is_mirror(legacy):
            continue
        kept = quota.mirror_of(legacy, table, model)
        if not kept.hard and not kept.problems:
            continue
        meta = _meta(legacy)
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        mirror = mirrors.get((namespace, name))
        desired = quota.mirror_object(legacy, kept) if kept.hard else None
        in_place = mirror is not None and desired is not None and not quota.differs(mirror, desired)
        hard = (legacy.get("spec") or {}).get("hard") or {}
        entries = []
        natively_all = bool(kept.hard)
        for entry, legacy_names in sorted(kept.legacy.items()):
            for legacy_name in legacy_names:
                resource = legacy_name[len(quota.REQUESTS):]
                target = table.target(resource)
                # 1.36+: claims of a class that declares the legacy name are charged to it too (KEP-5004)
                native = bool(model.extended_resources.quota_by_extended_name and target is not None
                              and declared.get(resource) == target.device_class_name)
                natively_all = natively_all and native
                entries.append({"legacy": legacy_name, "limit": str(hard.get(legacy_name)), "keptBy": entry,
                                "chargedNatively": native})
        if in_place:
            state = "kept"
        elif natively_all:
            state = "kept-at-claim-creation"  # 1.36+: refused when the claim is made, not when the pod is
        elif kept.hard:
            state = "stops-applying"
            hazards.append({"kind": "quota", "object": f"ResourceQuota {namespace}/{name}",
                            "message": "its GPU entries stop bounding converted pods: enable quota.enabled (the "
                                       "controller keeps " + ", ".join(sorted(kept.hard)) + ")"})
        else:
            state = "not-keepable"
        if kept.problems:
            hazards.append({"kind": "quota", "object": f"ResourceQuota {namespace}/{name}",
                            "message": "; ".join(kept.problems)})
        out.append({"namespace": namespace, "name": name, "state": state, "entries": entries,
                    "mirror": str(_meta(mirror).get("name", "")) if mirror is not None else None,
                    "wanted": dict(kept.hard), "problems": list(kept.problems)})
    return out


def _node_drivers(objects: Objects) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for obj in objects.of("ResourceSlice"):
        spec = obj.get("spec") or {}
        if isinstance(spec, Mapping) and spec.get("nodeName"):
            out.setdefault(str(spec["nodeName"]), set()).add(str(spec.get("driver", "")))
    return out


def _mixed_nodes(objects: Objects, table: MappingTable, classes: Mapping[str, DeviceClass], config: Config,
                 hazards: list[dict[str, str]]) -> list[dict[str, Any]]:
    drivers = _node_drivers(objects)
    out: list[dict[str, Any]] = []
    for node in objects.of("Node"):
        name = str(_meta(node).get("name", ""))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        found = mixed.overlaps(allocatable, drivers.get(name, set()), table, classes) \
            if isinstance(allocatable, Mapping) else ()
        if not found:
            continue
        out.append({"node": name, "overlaps": [{"resource": o.resource, "allocatable": o.allocatable,
                                                "deviceClass": o.device_class, "driver": o.driver} for o in found]})
        effect = ("the extender keeps converted pods off it (mixedNodes: avoid), if kube-scheduler calls its filter"
                  if config.mixed_nodes == "avoid" else "converted pods may get a GPU the device plugin hands out")
        hazards.append({"kind": "mixed-node", "object": f"Node {name}",
                        "message": f"{mixed.describe(name, found)}; {effect}"})
    return sorted(out, key=lambda r: r["node"])


def _device_classes(classes: Mapping[str, DeviceClass], table: MappingTable,
                    model: KubernetesModel) -> list[dict[str, Any]]:
    ext = model.extended_resources
    out = []
    for name, device_class in sorted(classes.items()):
        resource = device_class.extended_resource_name
        if not resource:
            continue
        target = table.target(resource)
        if not ext.scheduler_claims:
            effect = (f"DRAExtendedResource is off in {model.name}: the field is dropped, pods asking for {resource} "
                      "are served only by a device plugin")
        else:
            effect = (f"{model.name}: kube-scheduler serves pods that still ask for {resource} through this class on "
                      f"nodes whose allocatable has no {resource} (KEP-5004{', locked on' if ext.locked else ''}); "
                      f"claims of the class are also charged to requests.{resource}")
        out.append({"name": name, "extendedResourceName": resource,
                    "gpuclaimMapsTo": target.device_class_name if target else None, "effect": effect})
    return out


def _in_use(objects: Objects, table: MappingTable) -> dict[str, dict[str, int]]:
    plugin: dict[str, int] = {}
    for pod in objects.of("Pod"):
        if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in _DONE_PHASES:
            continue
        for resource, count in legacy_resources(pod.get("spec") or {}, table).items():
            plugin[resource] = plugin.get(resource, 0) + count
    dra: dict[str, int] = {}
    for claim in objects.of("ResourceClaim"):
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ()
        for result in results:
            if isinstance(result, Mapping) and not result.get("adminAccess"):
                driver = str(result.get("driver", ""))
                dra[driver] = dra.get(driver, 0) + 1
    return {"devicePlugin": dict(sorted(plugin.items())), "dra": dict(sorted(dra.items()))}


def _where(obj: Obj) -> str:
    ref = _ref(obj)
    return f"{ref['kind']} {ref.get('namespace', '') + '/' if ref.get('namespace') else ''}{ref['name']}"


def hazards_of(report: Mapping[str, Any]) -> Iterable[Mapping[str, str]]:
    return report.get("hazards") or ()
