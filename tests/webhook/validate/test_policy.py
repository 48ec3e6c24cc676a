"""adminAccess and the namespace label; Pod CREATE policy (legacy resources, request names, missing
templates); structure: limits from dra.api, immutable claim specs, alpha fields, older API versions."""

from __future__ import annotations

from typing import Any

import pytest
import validate_objects as o

from gpuclaim.dra import api, versions
from gpuclaim.dra.fieldpath import ErrorType
from gpuclaim.webhook.validate import OfflineInventory, validate_object

ADMIN_PATH = "spec.spec.devices.requests[0].exactly.adminAccess"


def _admin_template(namespace: str = "ops") -> dict[str, Any]:
    return o.template(o.request("gpu", allocationMode="All", adminAccess=True), namespace=namespace)


def _check(obj: Any, namespaces: dict[str, dict[str, str]] | None = None, **kw: Any) -> Any:
    return validate_object(obj, operation=kw.pop("operation", "CREATE"), inventory=o.inventory(namespaces=namespaces),
                           config=o.config(**kw.pop("validation", {})), **kw)


@pytest.mark.parametrize(("labels", "why"), [
    ({}, "namespace 'ops' has no label resource.kubernetes.io/admin-access"),
    ({"resource.kubernetes.io/admin-access": "false"},
     'namespace \'ops\' has resource.kubernetes.io/admin-access: "false", not "true"'),
], ids=["label-missing", "label-false"])
def test_admin_access_without_the_namespace_label_is_forbidden(labels: dict[str, str], why: str) -> None:
    verdict = _check(_admin_template(), {"ops": labels})
    assert o.paths(verdict.denials) == [(ADMIN_PATH, "FieldValueForbidden")]
    assert verdict.message == (f"{ADMIN_PATH}: Forbidden: admin access to devices requires the "
                               f"`resource.kubernetes.io/admin-access: true` label on the containing namespace ({why})")


def test_admin_access_with_the_label_is_allowed_and_the_check_can_be_turned_off() -> None:
    assert _check(_admin_template(), {"ops": {"resource.kubernetes.io/admin-access": "true"}}).allowed
    assert _check(_admin_template(), {"ops": {}}, validation={"adminAccess": "off"}).allowed


def test_admin_access_in_a_namespace_that_does_not_exist_is_forbidden() -> None:
    # namespaces_complete (the default): a namespace absent from the inventory does not exist; it has no label
    verdict = _check(_admin_template("ghost"), {"ops": {"resource.kubernetes.io/admin-access": "true"}})
    assert o.paths(verdict.denials) == [(ADMIN_PATH, "FieldValueForbidden")]
    assert "(namespace 'ghost' does not exist)" in verdict.message


def test_every_admin_access_request_of_a_claim_is_forbidden_not_only_the_first() -> None:
    claim = o.claim(o.request("a", allocationMode="All", adminAccess=True), o.request("b"),
                    o.request("c", allocationMode="All", adminAccess=True), namespace="ops")
    verdict = _check(claim, {"ops": {}})
    assert o.paths(verdict.denials) == [("spec.devices.requests[0].exactly.adminAccess", "FieldValueForbidden"),
                                        ("spec.devices.requests[2].exactly.adminAccess", "FieldValueForbidden")]


def test_admin_access_is_checked_again_on_an_update_that_keeps_the_spec() -> None:
    # the label may have been removed since the claim was created: the namespace rule is the one check an
    # UPDATE that keeps the (immutable) spec still gets
    claim = o.claim(o.request("gpu", allocationMode="All", adminAccess=True), namespace="ops")
    relabelled = {**claim, "metadata": {**claim["metadata"], "labels": {"a": "b"}}}
    verdict = _check(relabelled, {"ops": {}}, operation="UPDATE", old_object=claim)
    assert o.paths(verdict.denials) == [("spec.devices.requests[0].exactly.adminAccess", "FieldValueForbidden")]
    assert _check(relabelled, {"ops": {"resource.kubernetes.io/admin-access": "true"}}, operation="UPDATE",
                  old_object=claim).allowed


def test_a_pod_still_asking_for_a_mapped_legacy_resource_follows_the_pod_policy() -> None:
    spec = {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 1}}}]}
    assert _check(o.pod(spec)).allowed  # podPolicy off by default
    denied = _check(o.pod(spec), validation={"podPolicy": "deny"})
    assert o.paths(denied.denials) == [("spec.containers[0].resources.limits[nvidia.com/gpu]", "FieldValueForbidden")]
    assert "maps it to DeviceClass gpu.nvidia.com" in denied.message
    opted = o.pod(spec, annotations={"gpuclaim.io/webhook": "disabled"})
    warned = _check(opted, validation={"podPolicy": "warn"})
    assert warned.allowed
    assert "the pod opts out with the annotation gpuclaim.io/webhook: disabled" in warned.warnings[0]


def test_pod_requests_and_templates_are_checked_against_the_templates_known() -> None:
    parsed, errors = api.parse_resource_claim_template(o.template(o.request("gpu"), name="t"))
    assert parsed is not None and not errors
    inventory = OfflineInventory(templates=[parsed])
    spec = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"},
                               {"name": "h", "resourceClaimTemplateName": "missing"}],
            "containers": [{"name": "c", "image": "i", "resources": {"claims": [
                {"name": "g", "request": "gpu"}, {"name": "g", "request": "nic"}, {"name": "nope"}]}}]}
    verdict = validate_object(o.pod(spec), operation="CREATE", inventory=inventory, config=o.config())
    assert o.paths(verdict.denials) == [("spec.containers[0].resources.claims[2].name", "FieldValueNotFound")]
    assert [w.split(": ")[0] for w in verdict.warnings] == [
        "spec.resourceClaims[1].resourceClaimTemplateName", "spec.containers[0].resources.claims[1].request"]
    assert "has no request 'nic' (its requests: gpu)" in verdict.warnings[1]


def test_pods_are_only_checked_on_create() -> None:
    spec = {"containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "nope"}]}}]}
    assert _check(o.pod(spec), operation="UPDATE", old_object=o.pod(spec)).allowed


def test_structure_errors_come_from_dra_api_with_their_paths() -> None:
    too_many = o.claim(*[o.request(f"r{i}") for i in range(33)])
    verdict = _check(too_many)
    assert ("spec.devices.requests", "FieldValueTooMany") in o.paths(verdict.denials)
    bad_ref = o.claim(o.request("gpu"), constraints=[{"requests": ["nic"], "matchAttribute": "a/b"}])
    assert o.paths(_check(bad_ref).denials) == [("spec.devices.constraints[0].requests[0]", "FieldValueInvalid")]
    unqualified = o.claim(o.request("gpu"), constraints=[{"matchAttribute": "pcieRoot"}])
    assert o.paths(_check(unqualified).denials) == [("spec.devices.constraints[0].matchAttribute",
                                                     "FieldValueInvalid")]


def test_claim_and_template_specs_are_immutable_on_update() -> None:
    old = o.claim(o.request("gpu"))
    new = o.claim(o.request("gpu", count=2))
    verdict = _check(new, operation="UPDATE", old_object=old)
    assert [(str(e.path), e.type, e.detail) for e in verdict.denials] == [
        ("spec", ErrorType.INVALID, "field is immutable")]
    relabelled = {**old, "metadata": {**old["metadata"], "labels": {"a": "b"}}}
    assert _check(relabelled, operation="UPDATE", old_object=old).allowed
    old_t, new_t = o.template(o.request("gpu")), o.template(o.request("gpu", count=3))
    assert o.paths(_check(new_t, operation="UPDATE", old_object=old_t).denials) == [("spec", "FieldValueInvalid")]


def test_an_unchanged_spec_is_not_dry_run_again_on_update() -> None:
    old = o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].index == 0"))
    assert _check(old, operation="UPDATE", old_object=old).allowed


def test_alpha_fields_are_accepted_with_a_warning_naming_the_gate() -> None:
    tolerations = o.claim(o.request("gpu", tolerations=[{"key": "k", "operator": "Exists"}]))
    verdict = _check(tolerations, kubernetes=versions.model_for(35))
    assert verdict.allowed
    assert verdict.warnings[0].startswith("spec.devices.requests[0].exactly.tolerations: needs the feature gate "
                                          "DRADeviceTaints (alpha, off by default in Kubernetes 1.35)")
    # 1.36 turns the gate on by default, and then nothing is said
    assert _check(tolerations, kubernetes=versions.model_for(36)).warnings == []
    assert _check(tolerations).warnings == []


def test_v1beta1_objects_are_checked_as_their_v1_conversion_with_a_warning() -> None:
    bad = "device.capacity['gpu.nvidia.com'].memory > quantity('1')"
    flat = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": bad}}]}
    old_shape = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
                 "metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": [flat]}}}
    verdict = _check(old_shape, lint=True)
    assert o.paths(verdict.denials) == [("spec.devices.requests[0].exactly.selectors[0].cel.expression",
                                         "FieldValueInvalid")]
    assert verdict.warnings[0].startswith("apiVersion: written for resource.k8s.io/v1beta1")
    # the webhook: kube-apiserver compiled the selector first, so gpuclaim only says it could not check it
    verdict = _check(old_shape)
    assert verdict.allowed and "not checked" in verdict.warnings[1]


def test_objects_of_other_kinds_and_operations_pass() -> None:
    assert _check({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}).allowed
    assert _check(o.claim(o.request("gpu", "1 +")), operation="DELETE").allowed
    assert not _check(["not", "an", "object"]).allowed
