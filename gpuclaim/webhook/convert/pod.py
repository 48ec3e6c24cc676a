"""`convert_pod`: a pod with legacy GPU limits → the JSONPatch, the objects it needs, warnings, refusals.

Pure and quick (no I/O, no deep copies of the pod): the webhook calls it on every pod CREATE. What is
skipped, in this order: conversion disabled; excluded namespaces (`conversion.excludedNamespaces`,
default kube-system, plus gpuclaim's own namespace); opt-out by pod annotation or namespace label
(`conversion.optOut`, default `gpuclaim.io/webhook: disabled`); pods without mapped resources — which
includes every pod gpuclaim already converted, so a second pass yields no patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra.api import DeviceClass
from gpuclaim.dra.config import Config, ConversionConfig, TopologyConfig
from gpuclaim.dra.fieldpath import FieldError, Path, join_errors
from gpuclaim.dra.mapping import MappingTable, Target

from . import gfd, patch, sharing, templates, topology
from .containers import Collected, collect
from .plan import Plan, plan

MAX_DEVICES = 32  # AllocationResultsMaxSize: devices one claim can hold
MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
POD_CLAIM_NAME = "gpuclaim"


@dataclass(frozen=True, slots=True)
class Conversion:
    patch: list[patch.Op] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)  # shared ResourceClaims
    warnings: list[str] = field(default_factory=list)
    refusals: list[FieldError] = field(default_factory=list)
    skipped: str | None = None  # why the pod was not looked at (opt-out, excluded namespace, ...)

    @property
    def objects(self) -> list[dict[str, Any]]:
        """What must exist in the pod's namespace before the pod: templates, then shared claims."""
        return [*self.templates, *self.claims]

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    def message(self) -> str:
        return join_errors(self.refusals)


def convert_pod(pod: Mapping[str, Any], *, config: Config | ConversionConfig,
                device_classes: Mapping[str, DeviceClass], namespace_labels: Mapping[str, str] | None = None,
                namespace: str | None = None, own_namespace: str | None = None) -> Conversion:
    """Convert one pod as received. ``namespace`` is the admission request's (a pod created by a
    controller may not carry metadata.namespace yet); ``own_namespace`` is gpuclaim's, never touched."""
    conv = config.conversion if isinstance(config, Config) else config
    if not conv.enabled:
        return Conversion(skipped="conversion is disabled (conversion.enabled)")
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ns = namespace or meta.get("namespace") or None
    if ns is not None and (ns in conv.excluded_namespaces or ns == own_namespace):
        return Conversion(skipped=f"namespace {ns} is excluded")
    opt_out = conv.opt_out
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and annotations.get(opt_out.annotation) == opt_out.value:
        return Conversion(skipped=f"pod annotation {opt_out.annotation}={opt_out.value}")
    if namespace_labels and namespace_labels.get(opt_out.namespace_label) == opt_out.value:
        return Conversion(skipped=f"namespace label {opt_out.namespace_label}={opt_out.value}")
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return Conversion(skipped="the object has no pod spec")
    collected = collect(spec, MappingTable(conv, device_classes))
    if collected.refusals:
        return Conversion(warnings=collected.warnings, refusals=collected.refusals)
    if not collected.demands:  # nothing to convert; zero limits (`gpu: 0`) are still removed
        return Conversion(patch=_resources_ops(spec, collected), warnings=collected.warnings)
    group, refusals = sharing.group_of(meta, conv.sharing.annotation)
    the_plan = plan(collected.demands)
    refusals += _limits(the_plan, collected)
    if refusals:
        return Conversion(warnings=collected.warnings, refusals=refusals)
    return _build(spec, conv, collected, the_plan, group, ns)


def _limits(the_plan: Plan, collected: Collected) -> list[FieldError]:
    total = sum(r.count for r in the_plan.requests)
    if total <= MAX_DEVICES and len(the_plan.requests) <= MAX_REQUESTS:
        return []
    biggest = max(collected.demands, key=lambda d: d.count)
    path = Path.root("spec").child(biggest.kind).index(biggest.index).child("resources", "limits")
    path = path.key(biggest.target.resource)
    parts = ", ".join(f"{d.container}: {d.count} {d.target.resource}" for d in collected.demands)
    if total > MAX_DEVICES:
        detail = (f"the pod's devices ({parts}) add up to {total} in one ResourceClaim, "
                  f"more than the {MAX_DEVICES} a claim can hold")
    else:
        detail = f"the pod needs {len(the_plan.requests)} device requests ({parts}), more than {MAX_REQUESTS}"
    return [FieldError.invalid(path, biggest.count, detail)]


def _selectors(target: Target, migration: gfd.Migration) -> tuple[str, ...]:
    if target.domain != "nvidia.com" or not (migration.full_gpu or migration.mig):
        return target.selectors
    extra = migration.mig if target.short_name.startswith("mig-") else migration.full_gpu
    return (*target.selectors, *extra)


def _render(the_plan: Plan, migration: gfd.Migration, topo: TopologyConfig, warnings: list[str]
            ) -> dict[str, Any]:
    attempts = [topo]
    if len(topo.attributes) > 1:
        attempts.append(TopologyConfig(mode=topo.mode, attributes=topo.attributes[:1]))
    attempts.append(TopologyConfig(mode="off", attributes=()))
    for n, attempt in enumerate(attempts):
        requests: list[dict[str, Any]] = []
        constraints: list[dict[str, Any]] = []
        for planned in the_plan.requests:
            request, needs = topology.render(planned, _selectors(planned.target, migration), attempt)
            requests.append(request)
            constraints += needs
        if len(constraints) <= MAX_CONSTRAINTS:
            if n:
                warnings.append(f"gpuclaim reduced the topology constraints to {attempt.mode} "
                                f"{list(attempt.attributes)}: a claim holds at most {MAX_CONSTRAINTS} constraints")
            devices: dict[str, Any] = {"requests": requests}
            if constraints:
                devices["constraints"] = constraints
            return {"devices": devices}
    raise AssertionError("topology mode off needs no constraints")


def _pod_claim_name(spec: Mapping[str, Any]) -> str:
    existing = spec.get("resourceClaims")
    taken = {c.get("name") for c in existing if isinstance(c, Mapping)} if isinstance(existing, list) else set()
    name, n = POD_CLAIM_NAME, 2
    while name in taken:
        name, n = f"{POD_CLAIM_NAME}-{n}", n + 1
    return name


def _resources_ops(spec: Mapping[str, Any], collected: Collected) -> list[patch.Op]:
    """Set each changed container's resources (zero limits removed) without adding any claim."""
    ops: list[patch.Op] = []
    for (kind, index), resources in collected.resources.items():
        path = patch.pointer("spec", kind, index, "resources")
        ops.append(patch.replace(path, resources) if resources else patch.remove(path))
    return ops


def _build(spec: Mapping[str, Any], conv: ConversionConfig, collected: Collected, the_plan: Plan,
           group: str | None, namespace: str | None) -> Conversion:
    warnings = list(collected.warnings)
    migration = gfd.migrate(spec, conv.gfd_migration)
    warnings += migration.warnings
    if migration.refusals:
        return Conversion(warnings=warnings, refusals=migration.refusals)
    claim_spec = _render(the_plan, migration, conv.topology, warnings)
    pod_claim = _pod_claim_name(spec)
    made_templates: list[dict[str, Any]] = []
    made_claims: list[dict[str, Any]] = []
    if group is not None:
        claim = templates.shared_claim(claim_spec, namespace, group, conv.sharing.annotation)
        made_claims.append(claim)
        entry = {"name": pod_claim, "resourceClaimName": claim["metadata"]["name"]}
    else:
        template = templates.template(claim_spec, namespace)
        made_templates.append(template)
        entry = {"name": pod_claim, "resourceClaimTemplateName": template["metadata"]["name"]}
    ops: list[patch.Op] = []
    if isinstance(spec.get("resourceClaims"), list):
        ops.append(patch.add("/spec/resourceClaims/-", entry))
    else:
        ops.append(patch.add("/spec/resourceClaims", [entry]))
    zeroed = {key: value for key, value in collected.resources.items() if key not in the_plan.uses}
    if zeroed:  # containers whose only mapped limits were zero: their resources lose them, no claim reference
        ops += _resources_ops(spec, Collected([], [], [], zeroed))
    for (kind, index), request_names in the_plan.uses.items():
        container = spec[kind][index]
        resources = dict(collected.resources.get((kind, index)) or {})
        old_claims = resources.get("claims")
        resources["claims"] = [*(old_claims if isinstance(old_claims, list) else ()),
                               *({"name": pod_claim, "request": r} for r in request_names)]
        path = patch.pointer("spec", kind, index, "resources")
        ops.append(patch.replace(path, resources) if "resources" in container else patch.add(path, resources))
    ops += migration.ops
    if conv.scheduler_name:
        current = spec.get("schedulerName")
        if current in (None, "", "default-scheduler"):
            ops.append(patch.add("/spec/schedulerName", conv.scheduler_name))
        elif current != conv.scheduler_name:
            warnings.append(f"gpuclaim kept schedulerName {current!r}; conversion.schedulerName is "
                            f"{conv.scheduler_name!r}")
    return Conversion(patch=ops, templates=made_templates, claims=made_claims, warnings=warnings)

