"""Pod CREATE (and the pod templates of workloads, for ``gpuclaim lint``).

- ``validation.podPolicy`` deny|warn: a container still asking for a legacy resource that a mapping converts
  (``nvidia.com/gpu``...) means the conversion did not happen; say why it did not.
- ``resources.claims[].name`` must name one of ``spec.resourceClaims`` (the apiserver's rule, denied).
- ``resources.claims[].request`` naming a request the claim's template lacks: warning (the kubelet would
  fail the pod at start).
- ``spec.resourceClaims[].resourceClaimTemplateName`` naming a template that does not exist: warning (the
  resourceclaim controller retries forever and the pod stays Pending).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuclaim.dra import api
from gpuclaim.dra.config import Config
from gpuclaim.dra.fieldpath import FieldError, Path

from .inventory import Inventory, Unknown
from .verdict import Findings

__all__ = ["check_pod_spec"]

_CONTAINER_LISTS = ("initContainers", "containers")


def _items(value: object) -> list[tuple[int, Mapping[str, Any]]]:
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, Mapping)]


def check_pod_spec(
    spec: Mapping[str, Any], *, path: Path, annotations: Mapping[str, Any], namespace: str,
    inventory: Inventory, config: Config, findings: Findings,
) -> None:
    for key in spec:
        if isinstance(key, str) and key != "resourceClaims" and key.lower() == "resourceclaims":
            findings.deny(FieldError.forbidden(path.child(key), "unknown field (field names are case-sensitive): "
                                               "did you mean resourceClaims?"))
    # names that are not strings are the apiserver's to refuse; they cannot be referenced either
    claims = {c["name"]: (i, c) for i, c in _items(spec.get("resourceClaims")) if isinstance(c.get("name"), str)}
    templates: dict[str, api.ResourceClaimTemplate | Unknown | None] = {}
    for i, claim in claims.values():
        template_name = claim.get("resourceClaimTemplateName")
        if not isinstance(template_name, str) or not template_name:
            continue
        template = inventory.template(namespace, template_name)
        templates[claim["name"]] = template
        if template is None:
            findings.warn(
                path.child("resourceClaims").index(i).child("resourceClaimTemplateName"),
                f"ResourceClaimTemplate {namespace}/{template_name} does not exist: the resourceclaim controller "
                "cannot create the pod's claim, and the pod stays Pending until the template is created",
            )
    policy = config.validation.pod_policy
    for list_name in _CONTAINER_LISTS:
        for c, container in _items(spec.get(list_name)):
            cpath = path.child(list_name).index(c)
            resources = container.get("resources")
            if not isinstance(resources, Mapping):
                continue
            if policy != "off":
                _legacy(resources, cpath.child("resources"), policy, annotations, namespace, config, findings)
            for k, ref in _items(resources.get("claims")):
                rpath = cpath.child("resources").child("claims").index(k)
                name = ref.get("name")
                if not isinstance(name, str):
                    continue
                if name not in claims:
                    findings.deny(FieldError.not_found(rpath.child("name"), name,
                                                       "must be one of the names in pod.spec.resourceClaims"))
                    continue
                request = ref.get("request")
                template = templates.get(name)
                if (isinstance(request, str) and request and isinstance(template, api.ResourceClaimTemplate)
                        and template.spec.request(request) is None):
                    have = ", ".join(r.name for r in template.spec.requests) or "none"
                    findings.warn(
                        rpath.child("request"),
                        f"ResourceClaimTemplate {namespace}/{template.name} has no request {request!r} "
                        f"(its requests: {have}); the container cannot start",
                    )


def _legacy(
    resources: Mapping[str, Any], path: Path, policy: str, annotations: Mapping[str, Any], namespace: str,
    config: Config, findings: Findings,
) -> None:
    conversion = config.conversion
    for section in ("limits", "requests"):
        amounts = resources.get(section)
        if not isinstance(amounts, Mapping):
            continue
        for resource in amounts:
            mapping = conversion.mapping_for(str(resource))
            if mapping is None:
                continue
            message = (f"{resource} is a legacy device-plugin resource; the cluster's policy (validation.podPolicy: "
                       f"{policy}) wants DRA, and gpuclaim maps it to DeviceClass {mapping.device_class_name}, but "
                       f"this pod was not converted: {_why(annotations, namespace, config)}")
            where = path.child(section).key(str(resource))
            if policy == "deny":
                findings.deny(FieldError.forbidden(where, message))
            else:
                findings.warn(where, message)


def _why(annotations: Mapping[str, Any], namespace: str, config: Config) -> str:
    conversion = config.conversion
    if not conversion.enabled:
        return "conversion is disabled (conversion.enabled: false)"
    opt_out = conversion.opt_out
    if annotations.get(opt_out.annotation) == opt_out.value:
        return f"the pod opts out with the annotation {opt_out.annotation}: {opt_out.value}"
    if namespace in conversion.excluded_namespaces:
        return f"namespace {namespace} is excluded (conversion.excludedNamespaces)"
    return (f"the mutating webhook skipped it (namespace label {opt_out.namespace_label}: {opt_out.value}, "
            "gpuclaim's own namespace) or was not reached (failurePolicy Ignore)")
