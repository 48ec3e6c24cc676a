"""`gpuclaim lint`: no false alarms on the upstream examples (verdicts of FEATURES.md, one deliberate
deviation), the invalid ones reported; text and JSON output; exit codes 0/1/2; --slices, --namespaces,
--strict; `kubectl get -o yaml` List input; pod templates of workloads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import validate_objects as o
import yaml

from gpuclaim.cli import main

# FEATURES.md's scan is YAML-level; this file has lower-case field names (`apiversion`, `resourceclaims`),
# which kubectl and the apiserver refuse: our verdict is INVALID.
OVERRIDES = {"intel/gpu/pod-inline-aligned-gpus.yaml": "INVALID"}


def _verdicts() -> dict[str, str]:
    rows = re.findall(r"^\| (ACCEPT\*?|GATED|INVALID|NOT-v1) \| ([^ |]+) \|", (o.EXAMPLES / "FEATURES.md").read_text(),
                      re.MULTILINE)
    return {**dict((file, verdict) for verdict, file in rows), **OVERRIDES}


VERDICTS = _verdicts()


def _lint(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[dict[str, Any]]]:
    code = main(["lint", *map(str, args), "-o", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else []


def test_every_example_of_features_md_is_covered() -> None:
    files = {str(p.relative_to(o.EXAMPLES)) for p in o.EXAMPLES.rglob("*.yaml")}
    assert set(VERDICTS) == files


@pytest.mark.parametrize("name", sorted(VERDICTS), ids=sorted(VERDICTS))
def test_upstream_examples_get_their_verdict(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, found = _lint(capsys, o.EXAMPLES / name)
    errors = [f for f in found if f["severity"] == "error"]
    if VERDICTS[name] == "INVALID":
        assert code == 1 and errors
    else:
        assert code == 0 and not errors, errors
    if VERDICTS[name] == "NOT-v1":
        assert any(f["field"] == "apiVersion" and "checked as its resource.k8s.io/v1 conversion" in f["message"]
                   for f in found)
    for finding in found:
        assert finding["field"], finding  # every finding names its field


def test_gated_examples_name_the_feature_gate(capsys: pytest.CaptureFixture[str]) -> None:
    example = o.EXAMPLES / "amd-k8s-gpu-dra-driver/example-partitions-distinct-parents.yaml"
    _, found = _lint(capsys, example, "--kubernetes-version", "1.34")
    assert [(f["field"], f["severity"]) for f in found] == [
        ("spec.devices.constraints[0].distinctAttribute", "warning"),
        ("spec.devices.constraints[0].distinctAttribute", "warning")]  # + the driver schema's (issue 16)
    assert "DRAConsumableCapacity (alpha, off by default in Kubernetes 1.34)" in found[0]["message"]
    assert "gpu.amd.com/deviceID is published on amdgpu-partition devices only by gpu.amd.com releases 2026" in \
        found[1]["message"]


def test_gated_fields_are_judged_per_version(capsys: pytest.CaptureFixture[str]) -> None:
    example = o.EXAMPLES / "amd-k8s-gpu-dra-driver/example-partitions-distinct-parents.yaml"
    # 1.35 drops the field and then refuses the distinctAttribute-only constraint (measured on a real 1.35.4)
    code, found = _lint(capsys, example, "--kubernetes-version", "1.35")
    assert code == 1 and [(f["field"], f["severity"]) for f in found] == [
        ("spec.devices.constraints[0].matchAttribute", "error"),
        ("spec.devices.constraints[0].distinctAttribute", "warning")]
    # 1.36 and 1.37 keep it (DRAConsumableCapacity beta, on): only the driver schema's warning is left
    for version in ("1.36", "1.37"):
        code, found = _lint(capsys, example, "--kubernetes-version", version)
        assert code == 0 and ["DRAConsumableCapacity" in f["message"] for f in found] == [False], version


def test_a_field_a_version_does_not_have_is_an_error_and_one_it_drops_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    derived = [{"name": "example.com/x", "expression": "device.driver"}]
    manifest = _write(tmp_path, "c.yaml", o.claim(o.request("gpu", derivedAttributes=derived)))
    code, found = _lint(capsys, manifest, "--kubernetes-version", "1.36")
    assert code == 1 and [(f["field"], f["severity"]) for f in found] == [
        ("spec.devices.requests[0].exactly.derivedAttributes", "error")]
    assert "from Kubernetes 1.37 (DRADerivedAttributes)" in found[0]["message"]
    code, found = _lint(capsys, manifest)  # 1.37 has the field and drops it with its alpha gate off
    assert code == 0 and [(f["field"], f["severity"]) for f in found] == [
        ("spec.devices.requests[0].exactly.derivedAttributes", "warning")]
    assert "DRADerivedAttributes (alpha, off by default in Kubernetes 1.37)" in found[0]["message"]


def test_lint_takes_the_gates_of_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _write(tmp_path, "c.yaml", o.claim(o.request("gpu", capacity={"requests": {"x.io/mem": "1Gi"}})))
    config = _write(tmp_path, "config.yaml", {"kubernetes": {"featureGates": {"DRAConsumableCapacity": False}}})
    _, found = _lint(capsys, manifest, "--config", config)
    assert [f["message"] for f in found] == [
        "needs the feature gate DRAConsumableCapacity (beta, off in this configuration): unless the cluster enables "
        "it, the apiserver drops this field"]
    assert _lint(capsys, manifest)[1] == []


def test_a_version_lint_cannot_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(o.EXAMPLES / "k8s-website/resourceclaim.yaml"), "--kubernetes-version", "1.33"]) == 2
    assert "Kubernetes 1.33 is not supported: gpuclaim supports 1.34 to 1.37" in capsys.readouterr().err


def test_the_invalid_website_claim_is_reported_with_its_paths(capsys: pytest.CaptureFixture[str]) -> None:
    code, found = _lint(capsys, o.EXAMPLES / "k8s-website/resourceclaim.yaml")
    assert code == 1
    assert [(f["kind"], f["name"], f["doc"], f["field"]) for f in found] == [
        ("ResourceClaim", "example-resource-claim", 1, "spec.devices.requests[0].exactly.selectors[0].expression"),
        ("ResourceClaim", "example-resource-claim", 1, "spec.devices.requests[0].exactly.selectors[0].cel")]


def test_a_template_in_another_namespace_than_its_pod_is_found_out(capsys: pytest.CaptureFixture[str]) -> None:
    _, found = _lint(capsys, o.EXAMPLES / "nvidia-dra-driver-gpu/quickstart_v1_gpu-test-vfio-config.yaml")
    assert [f["field"] for f in found] == ["spec.resourceClaims[0].resourceClaimTemplateName"]
    assert "gpu-test-vfiopci/single-gpu-full-vfioconfig does not exist" in found[0]["message"]


def _write(tmp_path: Path, name: str, *docs: Any) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_text_output_and_slices_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", "device.attributes['gpu.nvidia.com'].index == 0"), name="unguarded")
    manifest = _write(tmp_path, "claim.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
                      claim)
    assert main(["lint", str(manifest)]) == 0  # no inventory: nothing to dry-run against
    capsys.readouterr()
    code = main(["lint", str(manifest), "--slices", str(o.H100_SLICES), str(o.CLASSES)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith(f"{manifest}:2: ResourceClaim/unguarded: "
                          "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: ")
    assert "CEL runtime error on 16 devices" in out


def test_strict_fails_on_warnings_and_lists_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = _write(tmp_path, "list.yaml", {"apiVersion": "v1", "kind": "List", "items": [
        o.claim(o.request("gpu", tolerations=[{"key": "k", "operator": "Exists"}]))]})
    assert main(["lint", str(listed), "--kubernetes-version", "1.35"]) == 0
    capsys.readouterr()
    code, found = _lint(capsys, listed, "--strict", "--kubernetes-version", "1.35")
    assert code == 1
    assert [(f["doc"], f["item"], f["severity"]) for f in found] == [(1, 0, "warning")]


def test_admin_access_uses_the_namespaces_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = _write(tmp_path, "t.yaml", o.template(o.request("gpu", allocationMode="All", adminAccess=True),
                                                     namespace="ops"))
    namespaces = _write(tmp_path, "ns.yaml", {"apiVersion": "v1", "kind": "NamespaceList", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}]})
    code, found = _lint(capsys, manifest, "--namespaces", namespaces)
    assert code == 1 and found[0]["field"] == "spec.spec.devices.requests[0].exactly.adminAccess"
    assert "namespace 'ops' has no label resource.kubernetes.io/admin-access" in found[0]["message"]


def test_workload_pod_templates_get_the_pod_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod_spec = {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}
    job = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
           "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": pod_spec}}}}}
    manifest = _write(tmp_path, "job.yaml", job)
    config = _write(tmp_path, "config.yaml", {"validation": {"podPolicy": "deny"}})
    code, found = _lint(capsys, manifest, "--config", config)
    assert code == 1
    assert found[0]["field"] == "spec.jobTemplate.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"


@pytest.mark.parametrize("content", ["a: [unclosed", None], ids=["bad-yaml", "missing-file"])
def test_unreadable_input_exits_2(tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["lint", str(path)]) == 2
    assert "gpuclaim lint:" in capsys.readouterr().err


def _slice(devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": "n", "devices": devices, **spec}}


def test_slice_limits_are_the_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(5)]
    manifest = _write(tmp_path, "s.yaml", _slice([{"name": "d", "taints": taints}]))
    code, found = _lint(capsys, manifest, "--kubernetes-version", "1.34")
    assert code == 1 and ("spec.devices[0].taints", "error") in [(f["field"], f["severity"]) for f in found]
    assert "has 5, must have at most 4 items" in found[0]["message"]
    code, found = _lint(capsys, manifest, "--kubernetes-version", "1.37")  # 16 from 1.35, and the gate is on
    assert code == 0 and found == []


def test_counters_and_devices_share_a_slice_only_in_1_34(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    manifest = _write(tmp_path, "s.yaml", _slice([{"name": "d"}], sharedCounters=counters))
    code, found = _lint(capsys, manifest, "--kubernetes-version", "1.34")
    assert code == 0 and [(f["field"], f["severity"]) for f in found] == [("spec.sharedCounters", "warning")]
    assert "DRAPartitionableDevices (alpha, off by default in Kubernetes 1.34)" in found[0]["message"]
    code, found = _lint(capsys, manifest, "--kubernetes-version", "1.36")
    assert code == 1 and [(f["field"], f["severity"]) for f in found] == [("spec.sharedCounters", "error")]
    assert "only one of sharedCounters or devices is allowed in Kubernetes 1.36" in found[0]["message"]
