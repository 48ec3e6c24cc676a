"""The taints kube-scheduler sees on each device: the slice's own plus every matching DeviceTaintRule's.

kube-scheduler does not read DeviceTaintRules itself: its ResourceSlice tracker (k8s.io/dynamic-resource-allocation
``resourceslice/tracker``) hands the allocator patched slices, each device's ``taints`` followed by the taint of
every rule whose selector matches (``applyPatches``). The allocator then treats those taints like the driver's own
(NoSchedule / NoExecute exclude a device the request does not tolerate). This module is that patching, per version:

- whether rules apply at all is a scheduler gate: ``DRADeviceTaints`` in 1.34 (rules were part of it),
  ``DRADeviceTaintRules`` from 1.35 (alpha, off; 1.36 beta, off; 1.37 GA, on; ``K3x/pkg/scheduler/scheduler.go``);
- the selector: ``driver``, ``pool`` and ``device`` must equal the slice's driver, pool name and device name when
  set. 1.34 also had ``deviceClassName`` (the class's CEL selectors must all match) and ``selectors`` (CEL); a
  runtime error, or a class that does not exist, means no match (D34/resourceslice/tracker/tracker.go
  applyPatches). Both were tombstoned in 1.35 and are ignored from then on;
- a rule without ``deviceSelector`` matches every device up to 1.36 and no device from 1.37 ("No selector matches
  no devices", D37/…/tracker.go:584-588).

Rules are applied in name order; upstream's order is its index's, which changes only which taint is listed first,
never whether a device is excluded. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra.api import DeviceClass, ResourceSlice
from gpuclaim.dra.api.slices import Device
from gpuclaim.dra.versions import KubernetesModel

#: the API version each minor's kube-scheduler reads DeviceTaintRules in (K3x/pkg/scheduler/scheduler.go)
RULE_API_VERSIONS: Mapping[int, str] = {34: "resource.k8s.io/v1alpha3", 35: "resource.k8s.io/v1alpha3",
                                        36: "resource.k8s.io/v1beta2", 37: "resource.k8s.io/v1"}
_MAX_NAME = 253  # DNS subdomain, the apiserver's own bound on names
_MAX_CEL = 10 * 1024  # CELSelectorExpressionMaxLength


class RuleError(ValueError):
    """A DeviceTaintRule gpuclaim cannot read; ``field`` names where."""

    def __init__(self, rule: str, field: str, message: str) -> None:
        super().__init__(f"DeviceTaintRule {rule}: {field}: {message}")
        self.rule = rule
        self.field = field


@dataclass(frozen=True, slots=True)
class TaintRule:
    name: str
    taint: Mapping[str, Any]  # key, value, effect, timeAdded as the API has them
    has_selector: bool
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    device_class: str | None = None  # 1.34 (v1alpha3) only
    selectors: tuple[str, ...] = ()  # 1.34 (v1alpha3) only: CEL expressions


def _opt_str(rule: str, spec: Mapping[str, Any], key: str, where: str, limit: int = _MAX_NAME) -> str | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RuleError(rule, f"{where}.{key}", f"must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise RuleError(rule, f"{where}.{key}", f"longer than {limit} characters")
    return value


def parse_rule(obj: object) -> TaintRule:
    """Read a DeviceTaintRule object (any served version); RuleError names the field that is wrong."""
    if not isinstance(obj, Mapping):
        raise RuleError("?", "", f"must be an object, not {type(obj).__name__}")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise RuleError("?", "metadata.name", "required")
    name = name[:_MAX_NAME]
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise RuleError(name, "spec", "required")
    taint = spec.get("taint")
    if not isinstance(taint, Mapping):
        raise RuleError(name, "spec.taint", "required")
    for key in ("key", "effect"):
        if not isinstance(taint.get(key), str):
            raise RuleError(name, f"spec.taint.{key}", "required string")
    if not isinstance(taint.get("value", ""), str):
        raise RuleError(name, "spec.taint.value", "must be a string")
    selector = spec.get("deviceSelector")
    if selector is None:
        return TaintRule(name, dict(taint), has_selector=False)
    if not isinstance(selector, Mapping):
        raise RuleError(name, "spec.deviceSelector", f"must be an object, not {type(selector).__name__}")
    where = "spec.deviceSelector"
    selectors: list[str] = []
    raw = selector.get("selectors") or []
    if not isinstance(raw, list):
        raise RuleError(name, f"{where}.selectors", "must be a list")
    for i, item in enumerate(raw):
        cel = item.get("cel") if isinstance(item, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str):
            raise RuleError(name, f"{where}.selectors[{i}].cel.expression", "required string")
        if len(expression) > _MAX_CEL:
            raise RuleError(name, f"{where}.selectors[{i}].cel.expression", f"longer than {_MAX_CEL} characters")
        selectors.append(expression)
    return TaintRule(name, dict(taint), has_selector=True, driver=_opt_str(name, selector, "driver", where),
                     pool=_opt_str(name, selector, "pool", where), device=_opt_str(name, selector, "device", where),
                     device_class=_opt_str(name, selector, "deviceClassName", where), selectors=tuple(selectors))


def parse_rules(objs: Iterable[object]) -> tuple[list[TaintRule], list[RuleError]]:
    """Every readable rule in name order, and what was wrong with the others (they taint nothing)."""
    rules: list[TaintRule] = []
    problems: list[RuleError] = []
    for obj in objs:
        try:
            rules.append(parse_rule(obj))
        except RuleError as exc:
            problems.append(exc)
    rules.sort(key=lambda r: r.name)
    return rules, problems


def rules_apply(model: KubernetesModel) -> bool:
    """Whether ``model``'s kube-scheduler reads DeviceTaintRules (its slice tracker's EnableDeviceTaintRules)."""
    gate = "DRADeviceTaints" if model.minor <= 34 else "DRADeviceTaintRules"
    return model.gate(gate) and model.gate("DRADeviceTaints")


def _cel_matches(expressions: Sequence[str], device: Device, model: KubernetesModel) -> bool:
    """1.34: every expression true; a compile or runtime error is no match (the rule skips the device)."""
    from gpuclaim.dra import cel  # CEL is only needed for 1.34's selectors: keep the common path light

    for expression in expressions:
        try:
            result = cel.compile_selector(expression, mode=model.cel_stored).outcome(device)
        except Exception:  # a compile error: upstream fails the slice's sync; nothing is tainted by this rule
            return False
        if result is not True:
            return False
    return True


def matches(rule: TaintRule, slice_: ResourceSlice, device: Device, model: KubernetesModel,
            classes: Mapping[str, DeviceClass] | None = None) -> bool:
    """Whether ``rule`` taints ``device`` of ``slice_`` in ``model``'s kube-scheduler."""
    if not rule.has_selector:
        return model.minor <= 36
    if rule.driver is not None and rule.driver != slice_.driver:
        return False
    if rule.pool is not None and rule.pool != slice_.pool.name:
        return False
    if rule.device is not None and rule.device != device.name:
        return False
    if model.minor <= 34:
        if rule.device_class is not None:
            cls = (classes or {}).get(rule.device_class)
            if cls is None or not _cel_matches([s.expression for s in cls.selectors], device, model):
                return False
        if rule.selectors and not _cel_matches(rule.selectors, device, model):
            return False
    return True


def device_taints(slice_: ResourceSlice, device: Device, rules: Sequence[TaintRule], model: KubernetesModel,
                  classes: Mapping[str, DeviceClass] | None = None) -> tuple[Mapping[str, Any], ...]:
    """The device's effective taints: its own, then each matching rule's (none when rules do not apply)."""
    if not rules or not rules_apply(model):
        return device.taints
    added = tuple(r.taint for r in rules if matches(r, slice_, device, model, classes))
    return device.taints + added if added else device.taints


def apply_rules(slice_: ResourceSlice, rules: Sequence[TaintRule], model: KubernetesModel,
                classes: Mapping[str, DeviceClass] | None = None) -> ResourceSlice:
    """``slice_`` as kube-scheduler's tracker hands it to the allocator. The same object when no rule taints any of
    its devices, so caches keyed by slice or device identity stay warm."""
    if not rules or not rules_apply(model):
        return slice_
    devices: list[Device] = []
    changed = False
    for device in slice_.devices:
        taints = device_taints(slice_, device, rules, model, classes)
        if taints is not device.taints:
            device = dataclasses.replace(device, taints=taints)
            changed = True
        devices.append(device)
    return dataclasses.replace(slice_, devices=tuple(devices)) if changed else slice_


def apply_to_slices(slices: Iterable[ResourceSlice], rules: Sequence[TaintRule], model: KubernetesModel,
                    classes: Mapping[str, DeviceClass] | None = None) -> list[ResourceSlice]:
    return [apply_rules(s, rules, model, classes) for s in slices]
