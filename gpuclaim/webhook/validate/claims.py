"""Checks of a ResourceClaim / ResourceClaimTemplate spec: selectors, alpha fields, adminAccess, dry-run."""

from __future__ import annotations

from collections.abc import Mapping

from gpuclaim.dra import api, cel, versions
from gpuclaim.dra.config import ValidationConfig
from gpuclaim.dra.fieldpath import FieldError

from . import dryrun, schemas, selectors, structure
from .adminaccess import check_admin_access
from .budget import compile_guarded
from .inventory import DeviceIndex, Inventory, Unknown
from .verdict import Findings

__all__ = ["check_claim_spec"]


def check_claim_spec(
    spec: api.DeviceClaim, *, parse_errors: list[FieldError], namespace: str, unchanged: bool,
    inventory: Inventory, settings: ValidationConfig, findings: Findings,
    schema_check: schemas.SchemaCheck | None = None, check_selectors: bool = True,
    kubernetes: versions.KubernetesModel = versions.NEWEST_MODEL, lint: bool = False, admitted: bool | None = None,
) -> None:
    """``unchanged``: an UPDATE that kept the (immutable) spec; only the namespace rule is checked again.
    ``schema_check``: check names, types and counts against the driver schemas (after the dry-run).
    ``check_selectors`` False: the namespace rule and gated fields only, nothing that compiles CEL.
    ``kubernetes``: the version whose environments and fields apply; ``lint``, ``admitted``: see
    ``validate_object``."""
    admitted = not lint if admitted is None else admitted
    if settings.admin_access == "enforce":
        check_admin_access(spec, namespace=namespace, labels=inventory.namespace_labels(namespace), findings=findings)
    if unchanged:
        return
    structure.check_gated(spec, findings, kubernetes=kubernetes, lint=lint)
    if not check_selectors:
        return
    compiled: dict[str, list[cel.CompiledSelector | None]] = {}
    for request in spec.requests:
        for alt in request.alternatives:
            compiled[alt.ref] = selectors.compile_all(alt.selectors, env=kubernetes.cel_new, findings=findings,
                                                      lint=not admitted, already=parse_errors)
    if parse_errors or findings.denials:
        return  # the apiserver refuses the object anyway; a dry-run of a broken claim would only add noise
    index = inventory.devices()
    modes = dryrun.Modes(runtime_error=settings.runtime_error, no_match=settings.no_match)
    matched: dict[str, list[api.Device]] = {}
    for request in spec.requests:
        any_match = unchecked = False
        results: list[tuple[api.ExactRequest, api.DeviceClass, dryrun.Result]] = []
        for alt in request.alternatives:
            device_class = inventory.device_class(alt.device_class_name)
            if device_class is None:
                findings.warn(alt.path.child("deviceClassName"),
                              f"DeviceClass {alt.device_class_name} does not exist: the scheduler keeps the pod "
                              "unschedulable until it is created")
                continue
            if isinstance(device_class, Unknown) or isinstance(index, Unknown) or not len(index):
                continue
            if None in compiled[alt.ref]:
                unchecked = True  # not compiled (already warned): a dry-run without it would judge other devices
                continue
            class_selectors = _stored(device_class, kubernetes)
            if class_selectors is None:
                continue
            chain = [c for c in compiled[alt.ref] if c is not None]
            result = dryrun.match_alternative(index, class_selectors, chain)
            results.append((alt, device_class, result))
            any_match = any_match or result.matched > 0
            if result.matched:
                matched[alt.ref] = result.matching_devices() if spec.constraints else []
        single = request.exactly is not None
        for alt, device_class, result in results:
            dryrun.report_alternative(alt, device_class, result, modes=modes, findings=findings,
                                      report_no_match=single)
        if not single and results and not any_match and not unchecked:
            _no_alternative_matches(request, results, modes, findings)
    if spec.constraints and isinstance(index, DeviceIndex) and not any(None in c for c in compiled.values()):
        dryrun.check_constraints(spec, matched, modes=modes, findings=findings)
    if schema_check is not None:
        classes = {}
        for request in spec.requests:
            for alt in request.alternatives:
                found = inventory.device_class(alt.device_class_name)
                classes[alt.device_class_name] = found if isinstance(found, api.DeviceClass) else None
        schemas.check_claim(spec, classes=classes, check=schema_check, findings=findings)


def _no_alternative_matches(
    request: api.DeviceRequest, results: list[tuple[api.ExactRequest, api.DeviceClass, dryrun.Result]],
    modes: dryrun.Modes, findings: Findings,
) -> None:
    details = [
        f"{alt.name}: {dryrun.no_match_message(alt, device_class, result, len(result.index))}"
        for alt, device_class, result in results
    ]
    findings.report(modes.no_match, request.path.child("firstAvailable"), request.name,
                    "no subrequest matches any device; " + " | ".join(details))


def _stored(device_class: api.DeviceClass, kubernetes: versions.KubernetesModel) -> list[cel.CompiledSelector] | None:
    """The class's selectors as the scheduler compiles them; None when one does not even compile there."""
    out = []
    for selector in device_class.selectors:
        try:
            out.append(compile_guarded(selector.expression, mode=kubernetes.cel_stored))
        except cel.CelCompileError:
            return None
    return out


def namespace_of(obj: Mapping[str, object], namespace: str | None) -> str:
    meta = obj.get("metadata")
    own = meta.get("namespace") if isinstance(meta, Mapping) else None
    return namespace or (own if isinstance(own, str) and own else "default")
