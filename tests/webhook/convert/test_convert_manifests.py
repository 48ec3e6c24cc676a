"""Real and seed manifests through convert_object: workloads' pod templates, MIG, KEP-5004, sharing, pass-through."""

from __future__ import annotations

import functools
from typing import Any

import jsonpatch
import pytest
import yaml
from convert_support import FIXTURES, config, nvidia_classes, request_counts, selectors_of
from official_schemas import assert_valid

from gpuclaim.dra.api import DeviceClass, flatten_documents, parse_device_class
from gpuclaim.dra.config import Config
from gpuclaim.webhook.convert import ObjectConversion, convert_object

MANIFESTS = FIXTURES / "manifests"


@functools.cache
def documents(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(d for d in flatten_documents(yaml.safe_load_all((MANIFESTS / name).read_text())) if d)


def by_name(name: str, object_name: str) -> dict[str, Any]:
    return next(d for d in documents(name) if d["metadata"].get("name") == object_name)


def converted(obj: dict[str, Any], cfg: Config | None = None,
              classes: dict[str, DeviceClass] | None = None) -> ObjectConversion:
    cfg = cfg or config()
    classes = nvidia_classes() if classes is None else classes
    result = convert_object(obj, config=cfg, device_classes=classes)
    assert result is not None
    assert not result.conversion.refusals, result.conversion.message()
    assert jsonpatch.apply_patch(obj, result.conversion.patch) == result.converted
    assert_valid(result.converted)
    for made in result.conversion.objects:
        assert_valid(made)
    again = convert_object(result.converted, config=cfg, device_classes=classes)
    assert again is not None and again.conversion.patch == []
    return result


def spec_of(result: ObjectConversion) -> dict[str, Any]:
    (obj,) = result.conversion.objects
    return obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]


def test_seed_deployment_of_three_replicas_converts_its_pod_template() -> None:
    deployment = by_name("seed-legacy-workloads.yaml", "inference")
    result = converted(deployment)
    assert all(op["path"].startswith("/spec/template/spec/") for op in result.conversion.patch)
    pod_spec = result.converted["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"] == {
        "limits": {"memory": "16Gi"}, "requests": {"cpu": "2", "memory": "16Gi"},
        "claims": [{"name": "gpuclaim", "request": "server-gpu"}]}
    assert result.converted["spec"]["replicas"] == 3
    (template,) = result.conversion.templates
    assert template["metadata"]["namespace"] == "ml"
    assert request_counts(template["spec"]["spec"]) == {"server-gpu": 1}
    assert any("productName" in s for s in selectors_of(template["spec"]["spec"]))


def test_seed_two_container_pod_gets_two_requests_and_topology_for_the_four() -> None:
    result = converted(by_name("seed-legacy-workloads.yaml", "trainer"))
    spec = spec_of(result)
    assert request_counts(spec) == {"trainer-gpu": 4, "evaluator-gpu": 1}
    assert spec["devices"]["constraints"] == [
        {"requests": ["trainer-gpu/pcieroot"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]


def test_seed_mig_pod_targets_the_mig_class_and_profile() -> None:
    result = converted(by_name("seed-legacy-workloads.yaml", "notebook"))
    (request,) = spec_of(result)["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert "profile == '1g.10gb'" in request["exactly"]["selectors"][0]["cel"]["expression"]


def test_seed_cronjob_patch_goes_under_the_job_template() -> None:
    result = converted(by_name("seed-legacy-workloads.yaml", "nightly"))
    assert all(op["path"].startswith("/spec/jobTemplate/spec/template/spec/") for op in result.conversion.patch)


def test_a_sharing_group_references_one_named_claim_for_every_pod() -> None:
    a = converted(by_name("seed-legacy-workloads.yaml", "chat-a"))
    b = converted(by_name("seed-legacy-workloads.yaml", "chat-b"))
    assert a.conversion.templates == [] and a.conversion.claims == b.conversion.claims
    (claim,) = a.conversion.claims
    assert claim["metadata"]["name"].startswith("gpuclaim-shared-chat-") and len(claim["metadata"]["name"]) == 37
    assert claim["metadata"]["annotations"] == {"gpuclaim.io/sharing-group": "chat"}
    assert a.converted["spec"]["resourceClaims"] == [{"name": "gpuclaim",
                                                      "resourceClaimName": claim["metadata"]["name"]}]


def test_an_invalid_sharing_group_is_refused_with_the_annotation_path() -> None:
    pod = {**by_name("seed-legacy-workloads.yaml", "chat-a")}
    pod["metadata"] = {**pod["metadata"], "annotations": {"gpuclaim.io/sharing-group": "Chat Room"}}
    result = convert_object(pod, config=config(), device_classes=nvidia_classes())
    assert result is not None
    assert [str(e.path) for e in result.conversion.refusals] == ["metadata.annotations[gpuclaim.io/sharing-group]"]


def test_a_refusal_inside_a_deployment_names_the_template_path() -> None:
    deployment = by_name("seed-legacy-workloads.yaml", "inference")
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "500m"
    result = convert_object(bad, config=config(), device_classes=nvidia_classes())
    assert result is not None and result.converted is bad
    assert [str(e.path) for e in result.conversion.refusals] == [
        "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"]


def test_nvidia_gpu_full_example_converts_with_a_kep_5004_warning() -> None:
    result = converted(by_name("extended-resources_gpu-full.yaml", "gpu-full-pod"))
    assert request_counts(spec_of(result)) == {"cuda-container-gpu": 1}
    assert any("KEP-5004" in w for w in result.conversion.warnings)


def _mig_example_classes() -> dict[str, DeviceClass]:
    classes = dict(nvidia_classes())
    for doc in documents("extended-resources_mig-1g-12gb.yaml"):
        if doc["kind"] == "DeviceClass":
            model, errors = parse_device_class(doc)
            assert model is not None and not errors
            classes[model.name] = model
    return classes


@pytest.mark.parametrize("choice", ["convert", "leave"])
def test_nvidia_mig_example_follows_the_kep_5004_choice(choice: str) -> None:
    pod = by_name("extended-resources_mig-1g-12gb.yaml", "mig-1g12gb-pod")
    cfg = config({"extendedResourceClasses": choice})
    result = converted(pod, cfg, _mig_example_classes())
    (warning,) = result.conversion.warnings
    assert "mig-1g-12gb.gpu.nvidia.com" in warning
    if choice == "leave":
        assert result.converted is pod and warning.startswith("gpuclaim left nvidia.com/mig-1g.12gb")
    else:
        (request,) = spec_of(result)["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"


def test_intel_deployment_converts_with_an_admin_mapping_and_passes_through_without() -> None:
    deployment = documents("intel-gpu-deployment-extended-resources.yaml")[0]
    plain = converted(deployment)
    assert plain.converted is deployment and plain.conversion.patch == []
    cfg = config({"mappings": [{"resource": "intel.com/gpu", "deviceClassName": "gpu.intel.com"}]})
    result = converted(deployment, cfg)
    assert request_counts(spec_of(result)) == {"workload-gpu": 1}
    assert spec_of(result)["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.intel.com"


@pytest.mark.parametrize("name", ["intel-gaudi-deployment-extended-resources.yaml",
                                  "initcontainer-shared-gpu_initcontainer-shared-gpu.yaml"])
def test_manifests_without_mapped_resources_pass_through_unchanged(name: str) -> None:
    for doc in documents(name):
        result = convert_object(doc, config=config(), device_classes=nvidia_classes())
        assert result is None or (result.converted is doc and result.conversion.patch == [])
