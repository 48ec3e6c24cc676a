"""`gpuclaim audit --cluster DIR` through the real CLI entry point, on a prepared dump: every section of the JSON
report field by field, the hazards and the exit status, text output, and bad input (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuclaim.cli import main

CLASSES = Path(__file__).resolve().parents[2] / "gpuclaim" / "demo" / "fleet" / "nvidia-deviceclasses.yaml"


def pod(name: str, ns: str, resource: str = "nvidia.com/gpu", count: str = "1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: count}}}]}}


def dump(tmp_path: Path, *, mixed: bool = True, kept: bool = False) -> Path:
    directory = tmp_path / "cluster"
    directory.mkdir()
    shutil.copy(CLASSES, directory / "classes.yaml")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": "team"},
                  "spec": {"template": {"spec": pod("x", "team", count="2")["spec"]}}}
    legacy = {"apiVersion": "v1", "kind": "ResourceQuota",
              "metadata": {"name": "gpu-quota", "namespace": "team", "uid": "u1"},
              "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-1g.5gb": "2"}}}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "legacy",
                                                              "labels": {"gpuclaim.io/webhook": "disabled"}}},
        deployment,
        {**pod("bare", "team", "nvidia.com/mig-1g.5gb"), "spec": {**pod("bare", "team", "nvidia.com/mig-1g.5gb")[
            "spec"], "nodeName": "n1"}},
        pod("cpu", "team", "cpu", "1"),
        pod("trainer-abc", "team", ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "t",
                                                     "uid": "r1", "controller": True}]),  # listed as its workload
        {**pod("old", "legacy"), "spec": {**pod("old", "legacy")["spec"], "nodeName": "n1"}},
        pod("bad", "team", "nvidia.com/mig-nonsense"),
        legacy,
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8" if mixed else "0"}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                          "resourceSliceCount": 1}, "devices": []}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "team"},
         "spec": {}, "status": {"allocation": {"devices": {"results": [
             {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}}}},
    ]
    if kept:
        from gpuclaim.dra import quota
        from gpuclaim.dra.config import ConversionConfig
        from gpuclaim.dra.mapping import MappingTable
        from gpuclaim.dra.versions import model_for

        objects.append(quota.mirror_object(legacy, quota.mirror_of(legacy, MappingTable(ConversionConfig(), {}),
                                                                   model_for(35))))
    (directory / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    return directory


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_json_report_field_by_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", str(dump(tmp_path)), "--kubernetes-version", "1.35", "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["version"] == "1"
    assert report["kubernetes"]["model"] == "1.35" and report["kubernetes"]["gates"]["DRAExtendedResource"] is False
    by_name = {w["name"]: w for w in report["workloads"]}
    assert set(by_name) == {"trainer", "bare", "old", "bad"}
    assert by_name["trainer"]["kind"] == "Deployment" and by_name["trainer"]["outcome"] == "converted"
    assert by_name["trainer"]["resources"] == {"nvidia.com/gpu": 2}
    assert by_name["trainer"]["devices"] == {"gpu.nvidia.com": 2}
    assert by_name["trainer"]["templates"][0].startswith("gpuclaim-")
    assert by_name["bare"]["devices"] == {"mig.nvidia.com": 1}
    assert by_name["old"]["outcome"] == "unchanged" and "gpuclaim.io/webhook=disabled" in by_name["old"]["detail"]
    assert by_name["bad"]["outcome"] == "refused" and "MIG profile" in by_name["bad"]["detail"]
    assert {"namespace": "legacy", "why": "label gpuclaim.io/webhook=disabled"} in report["optedOutNamespaces"]
    (q,) = report["quotas"]
    assert (q["namespace"], q["name"], q["state"], q["mirror"]) == ("team", "gpu-quota", "stops-applying", None)
    assert q["wanted"] == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 4,
                           "mig.nvidia.com.deviceclass.resource.k8s.io/devices": 2}
    assert {e["legacy"]: e["chargedNatively"] for e in q["entries"]} == {
        "requests.nvidia.com/gpu": False, "requests.nvidia.com/mig-1g.5gb": False}
    assert report["mixedNodes"] == [{"node": "n1", "overlaps": [{"resource": "nvidia.com/gpu", "allocatable": "8",
                                                                 "deviceClass": "gpu.nvidia.com",
                                                                 "driver": "gpu.nvidia.com"}]}]
    (cls,) = report["deviceClasses"]
    assert cls["name"] == "gpu.nvidia.com" and cls["extendedResourceName"] == "nvidia.com/gpu"
    assert "off in 1.35" in cls["effect"]
    assert report["devicesInUse"] == {"devicePlugin": {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.5gb": 1},
                                      "dra": {"gpu.nvidia.com": 1}}
    assert sorted(h["kind"] for h in report["hazards"]) == ["mixed-node", "quota", "refusal"]


def test_on_137_the_class_charges_the_legacy_name_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = audit(capsys, "--cluster", str(dump(tmp_path)), "--kubernetes-version", "1.37", "-o", "json")
    report = json.loads(out)
    (q,) = report["quotas"]
    assert {e["legacy"]: e["chargedNatively"] for e in q["entries"]} == {
        "requests.nvidia.com/gpu": True, "requests.nvidia.com/mig-1g.5gb": False}
    assert q["state"] == "stops-applying"  # the MIG entry still escapes
    assert "locked on" in report["deviceClasses"][0]["effect"]


def test_a_kept_quota_and_no_mixed_node_is_no_hazard_but_the_refusal(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", str(dump(tmp_path, mixed=False, kept=True)), "-o", "json")
    report = json.loads(out)
    assert report["quotas"][0]["state"] == "kept" and report["quotas"][0]["mirror"] == "gpuclaim-gpu-quota"
    assert report["mixedNodes"] == []
    assert [h["kind"] for h in report["hazards"]] == ["refusal"] and code == 1


def test_text_output_names_every_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--cluster", str(dump(tmp_path)))
    assert code == 1
    for heading in ("Kubernetes 1.37", "Workloads asking for legacy GPU resources: 4", "Namespaces opted out:",
                    "GPU quotas: 1", "Mixed nodes: 1", "DeviceClasses with extendedResourceName: 1",
                    "Devices in use: device plugin nvidia.com/gpu=1", "Hazards: 3"):
        assert heading in out, out


@pytest.mark.parametrize(("args", "message"), [
    (["--cluster", "/nonexistent"], "not a directory"),
    (["--kubernetes-version", "1.20"], "not supported"),
    # a live cluster's version is its /version: the flag would be ignored, so it is refused (as `fleet` does)
    (["--kubeconfig", "/nonexistent", "--kubernetes-version", "1.35"], "--kubernetes-version: only for a dump"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                          message: str) -> None:
    if "--cluster" not in args and "--kubeconfig" not in args:
        args = ["--cluster", str(dump(tmp_path)), *args]
    code, _, err = audit(capsys, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
