"""``validate_object``: the validating webhook's decision for one object, a pure function of its inputs.

The HTTP layer decodes the AdmissionReview, calls this, and answers with ``Verdict.allowed``,
``Verdict.message`` (status) and ``Verdict.warnings``. Nothing here raises on bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gpuclaim.dra import api, versions
from gpuclaim.dra.config import Config
from gpuclaim.dra.fieldpath import FieldError, Path

from . import dryrun, schemas, selectors, structure
from .claims import check_claim_spec, namespace_of
from .inventory import DeviceIndex, Inventory
from .pods import check_pod_spec
from .verdict import Findings, Verdict

__all__ = ["Operation", "validate_object"]

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
CHECKED_KINDS = ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "Pod")


def validate_object(
    obj: object, *, operation: Operation | str, old_object: object = None, namespace: str | None = None,
    inventory: Inventory, config: Config, lint: bool = False, check_selectors: bool = True,
    kubernetes: versions.KubernetesModel = versions.NEWEST_MODEL, admitted: bool | None = None,
) -> Verdict:
    """``kubernetes``: the version whose CEL environments, gated fields and limits apply.
    ``lint``: no kube-apiserver validated the object first (``gpuclaim lint``): what it would refuse (a selector
    that does not compile, an unknown field) is an error, and so is what the driver schemas show the scheduler
    would refuse; the webhook reports those as warnings, because kube-apiserver admitted the object.
    ``check_selectors`` False: nothing that compiles or parses CEL runs (no selector check, dry-run or driver-schema
    check), for an object whose selectors are past the webhook's compile budget; the rest is checked.
    ``admitted`` (default: not ``lint``): kube-apiserver validated the object before, so a selector gpuclaim cannot
    compile means gpuclaim's model is behind (a warning); False for what gpuclaim is about to create itself, where
    such a selector is an error though the driver schemas' scheduler-stage findings stay warnings."""
    admitted = not lint if admitted is None else admitted
    findings = Findings()
    if operation not in ("CREATE", "UPDATE"):
        # nothing new to check; a DELETE's object is null (issue 22, item 7: it was denied as "not an object")
        return findings.verdict()
    if not isinstance(obj, Mapping):
        findings.deny(FieldError.invalid(Path.root("kind"), type(obj).__name__, "expected a Kubernetes object"))
        return findings.verdict()
    kind = obj.get("kind")
    old = old_object if isinstance(old_object, Mapping) and operation == "UPDATE" else None
    if kind == "Pod":
        if operation == "CREATE":
            _pod(obj, namespace, inventory, config, findings)
        return findings.verdict()
    if kind == "ResourceSlice" and lint:
        _resource_slice(obj, kubernetes, findings)
        return findings.verdict()
    if kind not in CHECKED_KINDS:
        return findings.verdict()
    converted, note = structure.to_v1(obj)
    if note is not None:
        findings.warn(Path.root("apiVersion"), note)
    assert isinstance(converted, Mapping)
    if old is not None:
        old = structure.to_v1(old)[0]  # type: ignore[assignment]
    model, errors = api.parse_object(converted)
    findings.deny_all(errors)
    if model is None:
        return findings.verdict()
    if isinstance(model, api.DeviceClass):
        stored = old is not None and _selectors(old) == _selectors(converted)
        _device_class(model, errors, stored, inventory, config, findings, lint, check_selectors, kubernetes,
                      admitted)
    elif isinstance(model, api.ResourceClaim | api.ResourceClaimTemplate):
        unchanged = structure.check_immutable(converted, old, findings)
        check_claim_spec(
            model.spec, parse_errors=errors, namespace=namespace_of(converted, namespace), unchanged=unchanged,
            inventory=inventory, settings=config.validation, findings=findings,
            schema_check=_schema_check(config, inventory, lint), check_selectors=check_selectors,
            kubernetes=kubernetes, lint=lint, admitted=admitted,
        )
    return findings.verdict()


def _resource_slice(obj: Mapping[str, Any], kubernetes: versions.KubernetesModel, findings: Findings) -> None:
    converted, note = structure.to_v1(obj)
    if note is not None:
        findings.warn(Path.root("apiVersion"), note)
    model, errors = api.parse_object(converted)
    findings.deny_all(errors)
    if isinstance(model, api.ResourceSlice):
        structure.check_slice(model, findings, kubernetes=kubernetes)


def _schema_check(config: Config, inventory: Inventory, lint: bool) -> schemas.SchemaCheck:
    return schemas.SchemaCheck.build(config.schemas, inventory.devices(), severity="deny" if lint else "warn")


def _device_class(
    model: api.DeviceClass, errors: list[FieldError], stored: bool, inventory: Inventory, config: Config,
    findings: Findings, lint: bool, check_selectors: bool, kubernetes: versions.KubernetesModel, admitted: bool,
) -> None:
    """``stored``: an UPDATE that left the selectors byte-identical, compiled as the apiserver does then."""
    structure.check_gated_class(model, findings, kubernetes=kubernetes, lint=lint)
    if not check_selectors:
        return
    env = kubernetes.cel_stored if stored else kubernetes.cel_new
    compiled = selectors.compile_all(model.selectors, env=env, findings=findings, lint=not admitted,
                                     already=errors)
    if stored or errors or findings.denials:
        return  # selectors unchanged: they were judged when they were written (and devices may have changed)
    if None in compiled:
        return  # a selector gpuclaim could not compile: a dry-run without it would judge other devices
    index = inventory.devices()
    if isinstance(index, DeviceIndex):
        settings = config.validation
        modes = dryrun.Modes(runtime_error=settings.runtime_error, no_match=settings.no_match)
        dryrun.check_class(model, [c for c in compiled if c is not None], index, modes=modes, findings=findings)
    schemas.check_class(model, check=_schema_check(config, inventory, lint), findings=findings)


def _selectors(obj: Mapping[str, Any]) -> object:
    spec = obj.get("spec")
    return spec.get("selectors") if isinstance(spec, Mapping) else None


def _pod(obj: Mapping[str, Any], namespace: str | None, inventory: Inventory, config: Config,
         findings: Findings) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    check_pod_spec(
        spec, path=Path.root("spec"), annotations=annotations if isinstance(annotations, Mapping) else {},
        namespace=namespace_of(obj, namespace), inventory=inventory, config=config, findings=findings,
    )
