"""convert_pod, rule by rule: mapping, requests per container, init containers, topology, refusals, skips."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from convert_support import check_conversion, config, convert, ctr, device_counts, nvidia_classes, pod, request_counts

from gpuclaim.dra.fieldpath import ErrorType
from gpuclaim.webhook.convert import convert_pod


def claim_spec(result: Any) -> dict[str, Any]:
    (obj,) = result.objects
    return obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]


def test_one_gpu_becomes_one_request_of_the_default_class_in_a_managed_template() -> None:
    p = pod(ctr("app", {"nvidia.com/gpu": 1, "cpu": "1"}))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    (template,) = result.templates
    assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuclaim"}
    assert template["metadata"]["name"].startswith("gpuclaim-") and len(template["metadata"]["name"]) == 25
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "app-gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                        "count": 1}}]
    assert patched["spec"]["resourceClaims"] == [
        {"name": "gpuclaim", "resourceClaimTemplateName": template["metadata"]["name"]}]
    assert patched["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1"}, "claims": [{"name": "gpuclaim", "request": "app-gpu"}]}


def test_mig_and_amd_defaults_map_to_their_classes_with_the_profile_selector() -> None:
    p = pod(ctr("a", {"nvidia.com/mig-1g.10gb": 2}), ctr("b", {"amd.com/gpu": 1}))
    result, cfg = convert(p, topology={"mode": "off"})
    check_conversion(p, result, cfg, nvidia_classes())
    requests = {r["name"]: r["exactly"] for r in claim_spec(result)["devices"]["requests"]}
    assert requests["a-mig-1g-10gb"]["deviceClassName"] == "mig.nvidia.com"
    assert requests["a-mig-1g-10gb"]["selectors"] == [{"cel": {"expression": (
        "'profile' in device.attributes['gpu.nvidia.com'] && "
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")}}]
    assert requests["b-gpu"]["deviceClassName"] == "gpu.amd.com"


def test_each_container_gets_its_own_request_in_one_template_per_pod() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}), ctr("b", {"nvidia.com/gpu": 1}), ctr("c", {"cpu": "1"}))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert len(result.templates) == 1 and len(patched["spec"]["resourceClaims"]) == 1
    assert request_counts(claim_spec(result)) == {"a-gpu": 1, "b-gpu": 1}
    assert "claims" not in patched["spec"]["containers"][2].get("resources", {})


def test_template_name_is_a_stable_hash_of_the_spec_shared_by_pods_of_the_same_shape() -> None:
    one, _ = convert(pod(ctr("a", {"nvidia.com/gpu": 2})))
    two, _ = convert(pod(ctr("a", {"nvidia.com/gpu": "2"}), ctr("x", {"cpu": "2"})))
    other, _ = convert(pod(ctr("a", {"nvidia.com/gpu": 3})))
    assert one.templates[0]["metadata"]["name"] == two.templates[0]["metadata"]["name"]
    assert one.templates[0]["metadata"]["name"] != other.templates[0]["metadata"]["name"]


@pytest.mark.parametrize(("resources", "present"), [
    ({"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}, None),
    ({"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}, "requests": {"nvidia.com/gpu": "1", "cpu": "1"}},
     {"limits": {"memory": "1Gi"}, "requests": {"cpu": "1"}}),
], ids=["only-gpu", "others-kept"])
def test_legacy_requests_and_limits_are_removed(resources: dict[str, Any], present: dict[str, Any] | None) -> None:
    p = pod(ctr("a", resources=resources))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    got = dict(patched["spec"]["containers"][0]["resources"])
    got.pop("claims")
    assert got == (present or {})


def test_patch_works_when_resource_claims_and_container_claims_already_exist() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}), ctr("b"))
    p["spec"]["resourceClaims"] = [{"name": "gpuclaim", "resourceClaimName": "their-own"}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpuclaim"}]
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert [e["name"] for e in patched["spec"]["resourceClaims"]] == ["gpuclaim", "gpuclaim-2"]
    assert patched["spec"]["resourceClaims"][0] == {"name": "gpuclaim", "resourceClaimName": "their-own"}
    assert patched["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "gpuclaim"}, {"name": "gpuclaim-2", "request": "a-gpu"}]


def test_paths_are_escaped_in_the_patch() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                          "zone": "a"})
    result, cfg = convert(p, gfdMigration={"keepNodeSelector": False})
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert {"op": "remove", "path": "/spec/nodeSelector/nvidia.com~1gpu.product"} in result.patch
    assert patched["spec"]["nodeSelector"] == {"zone": "a"}


def test_a_converted_pod_yields_no_patch_and_keeps_its_own_claims() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 2}))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert convert_pod(patched, config=cfg, device_classes=nvidia_classes()).patch == []


# --- init containers and sidecars ---

def test_a_regular_init_container_reuses_the_app_containers_devices() -> None:
    p = pod(ctr("app", {"nvidia.com/gpu": 2}), init=(ctr("warmup", {"nvidia.com/gpu": 2}),))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert request_counts(claim_spec(result)) == {"app-gpu": 2}  # legacy footprint: max(2, 2) = 2
    assert patched["spec"]["initContainers"][0]["resources"]["claims"] == [{"name": "gpuclaim", "request": "app-gpu"}]


def test_a_bigger_init_container_reuses_what_it_can_and_gets_only_the_shortfall() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}), ctr("b", {"nvidia.com/gpu": 2}), init=(ctr("i", {"nvidia.com/gpu": 4}),))
    result, cfg = convert(p, topology={"mode": "off"})
    patched = check_conversion(p, result, cfg, nvidia_classes())
    counts = request_counts(claim_spec(result))
    assert counts == {"a-gpu": 1, "b-gpu": 2, "i-gpu": 1}  # 4 devices, as kubelet's max(4, 1 + 2)
    assert device_counts(patched, result) == {"i": 4, "a": 1, "b": 2}


def test_an_init_container_picks_an_exact_subset_of_requests() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 2}), ctr("b", {"nvidia.com/gpu": 1}), init=(ctr("i", {"nvidia.com/gpu": 1}),))
    result, cfg = convert(p)
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert patched["spec"]["initContainers"][0]["resources"]["claims"] == [{"name": "gpuclaim", "request": "b-gpu"}]
    assert sum(request_counts(claim_spec(result)).values()) == 3


def test_a_sidecar_gets_its_own_devices_and_a_later_init_container_cannot_use_them() -> None:
    sidecar = ctr("proxy", {"nvidia.com/gpu": 1}, restartPolicy="Always")
    p = pod(ctr("app", {"nvidia.com/gpu": 1}), init=(sidecar, ctr("setup", {"nvidia.com/gpu": 2})))
    result, cfg = convert(p, topology={"mode": "off"})
    patched = check_conversion(p, result, cfg, nvidia_classes())
    counts = request_counts(claim_spec(result))
    assert counts["proxy-gpu"] == 1 and counts["app-gpu"] == 1
    setup = [r["request"] for r in patched["spec"]["initContainers"][1]["resources"]["claims"]]
    assert "proxy-gpu" not in setup and "app-gpu" in setup
    assert sum(counts.values()) == 3  # proxy 1 + max(setup 2, app 1) ... setup reuses app's one device


def test_a_sidecar_declared_after_an_init_container_can_inherit_its_devices() -> None:
    p = pod(ctr("app", {"cpu": "1"}), init=(ctr("setup", {"nvidia.com/gpu": 1}),
                                            ctr("proxy", {"nvidia.com/gpu": 1}, restartPolicy="Always")))
    result, cfg = convert(p)
    check_conversion(p, result, cfg, nvidia_classes())
    assert request_counts(claim_spec(result)) == {"proxy-gpu": 1}


# --- topology ---

def test_count_above_one_gets_first_available_from_tightest_to_unconstrained() -> None:
    attrs = ["resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"]
    p = pod(ctr("a", {"nvidia.com/gpu": 4}))
    result, cfg = convert(p, topology={"attributes": attrs})
    check_conversion(p, result, cfg, nvidia_classes())
    devices = claim_spec(result)["devices"]
    (request,) = devices["requests"]
    assert [s["name"] for s in request["firstAvailable"]] == ["pcieroot", "numanode", "any"]
    assert devices["constraints"] == [
        {"requests": ["a-gpu/pcieroot"], "matchAttribute": attrs[0]},
        {"requests": ["a-gpu/numanode"], "matchAttribute": attrs[1]}]


@pytest.mark.parametrize(("mode", "shape", "constraints"), [
    ("required", "exactly", [{"requests": ["a-gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
    ("off", "exactly", None),
], ids=["required", "off"])
def test_topology_modes(mode: str, shape: str, constraints: Any) -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 2}))
    result, cfg = convert(p, topology={"mode": mode})
    check_conversion(p, result, cfg, nvidia_classes())
    devices = claim_spec(result)["devices"]
    assert shape in devices["requests"][0]
    assert devices.get("constraints") == constraints


def test_a_single_device_needs_no_topology() -> None:
    result, _ = convert(pod(ctr("a", {"nvidia.com/gpu": 1})))
    assert "constraints" not in claim_spec(result)["devices"]


# --- refusals ---

@pytest.mark.parametrize("value", ["1.5", "500m", -1, "-0.5", "x", True, 1.5, None], ids=str)
def test_a_count_that_is_not_a_positive_whole_number_is_refused(value: Any) -> None:
    result, _ = convert(pod(ctr("a", {"cpu": "1"}), ctr("train", {"nvidia.com/gpu": value})))
    assert [(str(e.path), e.type) for e in result.refusals] == [
        ("spec.containers[1].resources.limits[nvidia.com/gpu]", ErrorType.INVALID)]
    assert result.patch == [] and result.objects == []
    assert "nvidia.com/gpu in container 'train'" in result.message()


def test_more_than_32_devices_in_one_claim_is_refused_naming_the_containers() -> None:
    result, _ = convert(pod(ctr("a", {"nvidia.com/gpu": 16}), ctr("b", {"nvidia.com/gpu": 17})))
    assert [(str(e.path), e.type) for e in result.refusals] == [
        ("spec.containers[1].resources.limits[nvidia.com/gpu]", ErrorType.INVALID)]
    assert "a: 16 nvidia.com/gpu, b: 17 nvidia.com/gpu" in result.message()
    assert "33" in result.message()


def test_32_devices_are_fine() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 32}))
    result, cfg = convert(p)
    check_conversion(p, result, cfg, nvidia_classes())


@pytest.mark.parametrize(("resources", "path"), [
    ({"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}}, "requests"),
    ({"requests": {"nvidia.com/gpu": 1}}, "limits"),
], ids=["differ", "request-only"])
def test_requests_must_equal_limits(resources: dict[str, Any], path: str) -> None:
    result, _ = convert(pod(ctr("a", resources=resources)))
    assert [str(e.path) for e in result.refusals] == [f"spec.containers[0].resources.{path}[nvidia.com/gpu]"]


def test_an_unknown_target_class_is_refused_when_classes_must_exist() -> None:
    p = pod(ctr("a", {"example.com/gpu": 1}))
    mapping = {"mappings": [{"resource": "example.com/gpu", "deviceClassName": "gpu.example.org"}]}
    result, _ = convert(p, **mapping)
    assert [(str(e.path), e.type) for e in result.refusals] == [
        ("spec.containers[0].resources.limits[example.com/gpu]", ErrorType.NOT_FOUND)]
    assert "gpu.example.org" in result.message()
    relaxed, cfg = convert(p, requireClassesExist=False, **mapping)
    check_conversion(p, relaxed, cfg, nvidia_classes())


def test_refusals_in_init_containers_name_the_init_container() -> None:
    result, _ = convert(pod(ctr("a"), init=(ctr("i", {"nvidia.com/gpu": "0.5"}),)))
    assert str(result.refusals[0].path) == "spec.initContainers[0].resources.limits[nvidia.com/gpu]"


# --- skips, opt-out, KEP-5004, schedulerName ---

@pytest.mark.parametrize("where", ["kube-system", "gpuclaim-system", "batch"])
def test_excluded_namespaces_are_untouched(where: str) -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}))
    p["metadata"]["namespace"] = where
    result = convert_pod(p, config=config({"excludedNamespaces": ["kube-system", "batch"]}),
                         device_classes=nvidia_classes(), own_namespace="gpuclaim-system")
    assert result.patch == [] and result.skipped == f"namespace {where} is excluded"


def test_the_admission_namespace_wins_over_a_missing_metadata_namespace() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}))
    del p["metadata"]["namespace"]
    result = convert_pod(p, config=config(), device_classes=nvidia_classes(), namespace="kube-system")
    assert result.skipped and not result.patch


def test_opt_out_by_pod_annotation_and_namespace_label() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}))
    by_label = convert_pod(p, config=config(), device_classes=nvidia_classes(),
                           namespace_labels={"gpuclaim.io/webhook": "disabled"})
    assert by_label.patch == [] and by_label.skipped
    p["metadata"]["annotations"] = {"gpuclaim.io/webhook": "disabled"}
    by_annotation, _ = convert(p)
    assert by_annotation.patch == [] and by_annotation.skipped
    p["metadata"]["annotations"] = {"gpuclaim.io/webhook": "enabled"}
    assert convert(p)[0].patch


def test_kep_5004_convert_says_so_in_a_warning() -> None:
    result, _ = convert(pod(ctr("a", {"nvidia.com/gpu": 1})))
    assert result.patch and any("gpu.nvidia.com declares it as extendedResourceName" in w for w in result.warnings)


def test_kep_5004_leave_keeps_the_limit_for_the_scheduler_and_warns() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}), ctr("b", {"nvidia.com/mig-1g.10gb": 1}))
    result, cfg = convert(p, extendedResourceClasses="leave")
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert patched["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert request_counts(claim_spec(result)) == {"b-mig-1g-10gb": 1}
    assert any(w.startswith("gpuclaim left nvidia.com/gpu to the scheduler") for w in result.warnings)


def test_scheduler_name_is_set_on_converted_pods_only() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 1}))
    result, cfg = convert(p, schedulerName="gpu-scheduler")
    patched = check_conversion(p, result, cfg, nvidia_classes())
    assert patched["spec"]["schedulerName"] == "gpu-scheduler"
    plain, _ = convert(pod(ctr("a", {"cpu": "1"})), schedulerName="gpu-scheduler")
    assert plain.patch == []
    custom = pod(ctr("a", {"nvidia.com/gpu": 1}), schedulerName="volcano")
    kept, _ = convert(custom, schedulerName="gpu-scheduler")
    assert not any(op["path"] == "/spec/schedulerName" for op in kept.patch) and kept.warnings


def test_the_input_pod_is_not_modified() -> None:
    p = pod(ctr("a", {"nvidia.com/gpu": 2}), init=(ctr("i", {"nvidia.com/gpu": 1}),),
            nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    before = copy.deepcopy(p)
    convert(p, gfdMigration={"keepNodeSelector": False})
    assert p == before


def test_too_many_topology_constraints_are_reduced_to_the_tightest_with_a_warning() -> None:
    attrs = [f"example.com/level{i}" for i in range(7)]
    p = pod(*(ctr(f"c{i}", {"nvidia.com/gpu": 2}) for i in range(5)))
    result, cfg = convert(p, topology={"attributes": attrs})
    check_conversion(p, result, cfg, nvidia_classes())
    constraints = claim_spec(result)["devices"]["constraints"]
    assert len(constraints) == 5 and {c["matchAttribute"] for c in constraints} == {attrs[0]}
    assert any("at most 32 constraints" in w for w in result.warnings)


def test_long_container_names_give_valid_unique_request_names() -> None:
    long = "x" * 63
    p = pod(ctr(long, {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 1}))
    result, cfg = convert(p)
    check_conversion(p, result, cfg, nvidia_classes())
    names = list(request_counts(claim_spec(result)))
    assert len(set(names)) == 2 and all(len(n) <= 63 for n in names)
