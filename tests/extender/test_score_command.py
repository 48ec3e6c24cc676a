"""`gpuclaim score` through the real CLI entry point: text and JSON output, ordering, unfit nodes, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuclaim.cli import main

from . import fleet

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _write(path: Path, objects: list[dict[str, Any]]) -> None:
    path.write_text(yaml.safe_dump_all(objects))


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    directory = tmp_path / "cluster"
    directory.mkdir()
    shutil.copy(fleet.SLICES / "aws-p4d-8xA100-SXM4-40GB-nvidia.yaml", directory)
    shutil.copy(fleet.SLICES / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml", directory)
    _write(directory / "classes.yaml", [*fleet.gpu_classes(), fleet.template("two", fleet.tight_or_any(2)),
                                        fleet.template("nine", {"requests": [fleet.exact("gpu", 9)]})])
    # a Node with no slice is a candidate too (and the pod cannot fit there)
    _write(directory / "nodes.yaml", [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-only"}}])
    return directory


def _pod_file(tmp_path: Path, pod: dict[str, Any]) -> Path:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    return path


def test_json_output_is_sorted_best_first_with_unfit_nodes_last(
        cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", "--cluster", str(cluster), "--pod", str(_pod_file(tmp_path, fleet.pod("two"))),
                 "-o", "json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["node"] for r in rows] == ["ip-192-168-153-160.ec2.internal", "ip-10-0-171-111.ec2.internal",
                                         "ip-10-0-206-2.ec2.internal", "cpu-only"]
    assert all(set(r) == {"node", "score", "devices", "reason"} for r in rows)
    assert rows[0]["score"] == 9 and rows[0]["devices"] == [
        "gpu.nvidia.com/ip-192-168-153-160.ec2.internal/gpu-0", "gpu.nvidia.com/ip-192-168-153-160.ec2.internal/gpu-1"]
    assert rows[-1]["score"] is None and rows[-1]["devices"] == []
    assert "do not fit" in rows[-1]["reason"]


def test_text_output_names_every_node_with_its_devices_and_reason(
        cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--cluster", str(cluster), "--pod", str(_pod_file(tmp_path, fleet.pod("two")))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ip-192-168-153-160.ec2.internal  score 9\n")
    assert "    gpu.nvidia.com/ip-192-168-153-160.ec2.internal/gpu-0\n" in out
    assert "cpu-only  score -\n" in out and "subrequest tight (1st of 2)" in out


def test_a_pod_that_fits_nowhere_gets_null_everywhere(
        cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--cluster", str(cluster), "--pod", str(_pod_file(tmp_path, fleet.pod("nine"))),
                 "-o", "json"]) == 0
    assert {r["score"] for r in json.loads(capsys.readouterr().out)} == {None}


def test_a_pod_without_claims_scores_zero_everywhere(
        cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    assert main(["score", "--cluster", str(cluster), "--pod", str(_pod_file(tmp_path, plain)), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["score"] for r in rows} == {0} and "no DRA claims" in rows[0]["reason"]


@pytest.mark.parametrize(("setup", "message"), [
    ("no-dir", "not a directory"),
    ("empty-dir", "no .yaml, .yml or .json files"),
    ("bad-yaml", "not YAML"),
    ("bad-slice", "spec.devices[0].name"),
    ("two-pods", "expected exactly one object of kind Pod, found 2"),
    ("bad-policy", "metadata.annotations[gpuclaim.io/placement-policy]: must be binpack or spread"),
    ("containers-5", "spec.containers: expected an array"),
    ("claims-7", "spec.containers[0].resources.claims: expected an array"),
    ("no-claims-containers-5", "spec.containers: expected an array"),
    ("bad-claim", "claim two: spec.devices.requests[0].exactly.count: Invalid value"),
], ids=["no-dir", "empty-dir", "bad-yaml", "bad-slice", "two-pods", "bad-policy", "containers-5", "claims-7",
        "no-claims-containers-5", "bad-claim"])  # fmt: skip
def test_bad_input_exits_2_with_one_line_naming_the_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, message: str) -> None:
    directory = tmp_path / "c"
    pod: Any = fleet.pod("two")
    if setup != "no-dir":
        directory.mkdir()
    if setup == "bad-yaml":
        (directory / "x.yaml").write_text("a: [b\n")
    elif setup == "bad-slice":
        bad = fleet.node_slice("n", [{"name": "Not_A_Name"}])
        _write(directory / "x.yaml", [bad])
    elif setup in ("two-pods", "bad-policy"):
        _write(directory / "x.yaml", [fleet.pairs_node("n")])
    pod_path = _pod_file(tmp_path, pod)
    if setup == "two-pods":
        pod_path.write_text(yaml.safe_dump_all([pod, pod]))
    if setup == "bad-policy":
        pod_path = _pod_file(tmp_path, fleet.pod("two", annotations={"gpuclaim.io/placement-policy": "fill"}))
    if setup in ("containers-5", "claims-7", "no-claims-containers-5", "bad-claim"):
        _write(directory / "x.yaml", [fleet.pairs_node("n"), *fleet.gpu_classes(),
                                      fleet.template("two", {"requests": [fleet.exact("gpu", "2")]})])
        if setup == "containers-5":
            pod["spec"]["containers"] = 5
        elif setup == "claims-7":
            pod["spec"]["containers"][0]["resources"]["claims"] = 7
        elif setup == "no-claims-containers-5":
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": 5}}
        pod_path = _pod_file(tmp_path, pod)
    if setup == "bad-yaml":
        message = f"{directory / 'x.yaml'}: "
    elif setup not in ("no-dir", "empty-dir", "bad-slice"):
        message = f"--pod {pod_path}: {message}"  # the line names the file, then the field
    assert main(["score", "--cluster", str(directory), "--pod", str(pod_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_node_where_an_allocated_claim_of_the_pod_cannot_be_used_is_unfit(
        cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The pod's claim "held" is allocated on one p5 node: kube-scheduler's Filter rejects every other node
    (dynamicresources.go:947), however well the pending claim would fit there (the p4d node scores best alone)."""
    pinned_node = "ip-10-0-206-2.ec2.internal"
    held = fleet.allocated_claim("held", [(pinned_node, "gpu-0")])
    held["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [pinned_node]}]}]}  # fmt: skip
    _write(cluster / "held.yaml", [held])
    pod = fleet.pod("two")
    pod["spec"]["resourceClaims"].append({"name": "held", "resourceClaimName": "held"})
    assert main(["score", "--cluster", str(cluster), "--pod", str(_pod_file(tmp_path, pod)), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["node"] == pinned_node and rows[0]["score"] > 0
    assert len(rows[0]["devices"]) == 2 and f"gpu.nvidia.com/{pinned_node}/gpu-0" not in rows[0]["devices"]
    for row in rows[1:]:
        assert row["score"] is None and row["devices"] == []
        assert row["reason"].startswith("resourceclaim not available on the node: claim held is allocated")


def test_a_cel_runtime_error_names_the_claim_and_the_request_as_the_docs_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md quotes the reason for a node where allocation would abort; the command prints exactly that."""
    shown = re.search(r"`(allocation would fail with an error: [^`]*)`", (DOCS / "cli.md").read_text()).group(1)
    directory = tmp_path / "c"
    directory.mkdir()
    selector = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].noSuchAttribute == 1"}}
    _write(directory / "x.yaml", [fleet.pairs_node("n"), *fleet.gpu_classes(),
                                  fleet.template("gpu", {"requests": [fleet.exact("gpu", selectors=[selector])]})])
    assert main(["score", "--cluster", str(directory), "--pod", str(_pod_file(tmp_path, fleet.pod("gpu"))),
                 "-o", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["score"] is None and row["reason"] == shown
