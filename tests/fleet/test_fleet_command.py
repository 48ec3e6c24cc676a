"""`gpuclaim fleet nodes|pods` through the real CLI entry point, on dumps of the demo fleet (gpuclaim/demo/inventory.py:
real ResourceSlices of p5, p4d and T4 nodes, four running pods holding known devices): which devices a pod got and
in which topology group, per-node counts against the slices and allocations, text and JSON, namespaces, and every
bad input (exit 2, one line naming it)."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.cli import main
from gpuclaim.demo import inventory

Obj = dict[str, Any]
CHART = Path(__file__).resolve().parents[2] / "charts" / "gpuclaim"


def demo_objects() -> list[Obj]:
    return copy.deepcopy(inventory.build().objects)


def dump(directory: Path, objects: list[Obj]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    by_kind: dict[str, list[Obj]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, items in by_kind.items():  # as `kubectl get <kind> -A -o yaml` writes them: a List per file
        (directory / f"{kind.lower()}s.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                                                         "items": items}))
    return directory


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dump(tmp_path_factory.mktemp("demo") / "cluster", demo_objects())


def fleet(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(["fleet", *args])
    except SystemExit as exc:  # argparse's usage errors (exit 2, as the CLI's own)
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_pods_json_shows_the_devices_each_pod_got_and_their_topology_group(
        demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, "pods", "-n", "research", "--cluster", str(demo_dir), "-o", "json")
    assert code == 0, err
    view = json.loads(out)
    assert (view["apiVersion"], view["kind"], view["namespace"]) == ("gpuclaim.io/v1alpha1", "FleetPods", "research")
    pods = {p["name"]: p for p in view["pods"]}
    assert set(pods) == {"llm-finetune-0", "batch-infer-0", "notebook-0", "t4-infer-0"}
    finetune = pods["llm-finetune-0"]
    assert finetune["node"] == "p5-h100-1" and [c["name"] for c in finetune["claims"]] == ["llm-finetune-0-gpus"]
    devices = finetune["claims"][0]["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(6)]
    for d in devices:
        assert (d["driver"], d["pool"], d["state"]) == ("gpu.nvidia.com", "p5-h100-1", "allocated")
        assert d["model"] and "H100" in d["model"]
        assert d["group"]["kind"] in ("nvlink", "pcieRoot", "numa", "node") and d["group"]["name"]
    (mig,) = pods["notebook-0"]["claims"][0]["devices"]
    assert (mig["name"], mig["migParent"], mig["pool"]) == ("gpu-4-mig-1g5gb-19-0", "gpu-4", "p4d-a100-6")


def test_pods_text_has_one_line_per_device(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fleet(capsys, "pods", "-n", "research", "--cluster", str(demo_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "POD", "NODE", "CLAIM", "DEVICE", "MODEL", "STATE", "GROUP"]
    finetune = [line for line in lines if "llm-finetune-0 " in line]
    assert len(finetune) == 6
    assert all("p5-h100-1" in line and "allocated" in line for line in finetune)
    assert [re.search(r"gpu\.nvidia\.com/p5-h100-1/(gpu-\d)", line).group(1) for line in finetune] == [  # type: ignore[union-attr]
        f"gpu-{i}" for i in range(6)]
    assert "(MIG of gpu-4)" in next(line for line in lines if "notebook-0" in line)


def test_pods_of_another_namespace_and_of_all_namespaces(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fleet(capsys, "pods", "--cluster", str(demo_dir), "-o", "json")  # a dump's default: "default"
    assert code == 0 and json.loads(out)["pods"] == [] and json.loads(out)["namespace"] == "default"
    code, out, _ = fleet(capsys, "pods", "--cluster", str(demo_dir))
    assert out == "No pods with resource claims in namespace default.\n"
    code, out, _ = fleet(capsys, "pods", "-A", "--cluster", str(demo_dir), "-o", "json")
    view = json.loads(out)
    assert view["namespace"] is None
    assert [(p["namespace"], p["name"]) for p in view["pods"]] == sorted(
        ("research", n) for n in ("llm-finetune-0", "batch-infer-0", "notebook-0", "t4-infer-0"))


def test_a_pod_whose_claim_holds_no_device_is_listed_without_devices(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    objects = demo_objects()
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting", "namespace": "research"},
                    "spec": {"containers": [{"name": "c", "image": "x"}],
                             "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]},
                    "status": {"phase": "Pending",
                               "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "waiting-gpus-x1"}]}})
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "waiting-gpus-x1", "namespace": "research"},
                    "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                        "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}})
    code, out, _ = fleet(capsys, "pods", "-n", "research", "--cluster", str(dump(tmp_path / "c", objects)),
                         "-o", "json")
    assert code == 0
    (waiting,) = [p for p in json.loads(out)["pods"] if p["name"] == "waiting"]
    assert waiting == {"namespace": "research", "name": "waiting", "node": None,
                       "claims": [{"name": "waiting-gpus-x1", "devices": []}]}
    _, out, _ = fleet(capsys, "pods", "-n", "research", "--cluster", str(tmp_path / "c"))
    assert re.search(r"waiting\s+-\s+waiting-gpus-x1\s+-\s+-\s+not allocated", out)


def slice_devices(objects: list[Obj]) -> Counter[str]:
    """Devices per node in the dump's ResourceSlices (the truth the view's totals must match)."""
    count: Counter[str] = Counter()
    for s in objects:
        if s["kind"] == "ResourceSlice" and s["spec"].get("nodeName"):
            count[s["spec"]["nodeName"]] += len(s["spec"].get("devices") or ())
    return count


def test_nodes_json_is_the_fleet_document_and_counts_every_device_once(
        demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, "nodes", "--cluster", str(demo_dir), "-o", "json", "--kubernetes-version", "1.35")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["apiVersion"], doc["kind"]) == ("gpuclaim.io/v1alpha1", "Fleet")
    assert doc["kubernetesVersion"].startswith("v1.35")
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["generatedAt"])
    truth = slice_devices(demo_objects())
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert set(nodes) == {n for n, c in truth.items() if c}
    for name, node in nodes.items():
        seen = [d for g in node["groups"] for d in g["devices"]]
        assert node["summary"]["devices"]["total"] == len(seen) == truth[name], name
        states = Counter(d["state"] for d in seen)
        assert {k: v for k, v in node["summary"]["devices"].items() if k != "total" and v} == dict(states)
    held = {d["name"] for g in nodes["p5-h100-1"]["groups"] for d in g["devices"] if d["state"] == "allocated"}
    assert held == {f"gpu-{i}" for i in range(6)}
    assert doc["summary"]["devices"]["total"] == sum(truth.values())


def test_nodes_text_has_a_line_per_node_and_per_group(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = fleet(capsys, "nodes", "--cluster", str(demo_dir), "-o", "json")
    doc = json.loads(out)
    code, out, _ = fleet(capsys, "nodes", "--cluster", str(demo_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Kubernetes v1.37") and f"{doc['summary']['devices']['total']} devices" in lines[0]
    assert lines[2].split()[:4] == ["NODE", "/", "GROUP", "DEVICES"]
    for node in doc["nodes"]:
        (row,) = [line for line in lines[3:] if line.split()[0] == node["name"]]
        cells = row.split()
        s = node["summary"]
        assert cells[1:7] == [str(s["devices"][k]) for k in ("total", "free", "allocated", "reserved", "tainted",
                                                             "unhealthy")]
        assert cells[7:9] == [str(s["stranded"]), str(s["largestFreeTightGroup"])]
    groups = sum(len(n["groups"]) for n in doc["nodes"])
    assert len([line for line in lines[3:] if line.startswith("  ")]) == groups


BAD: dict[str, tuple[list[str], str]] = {
    "no-view": ([], "the following arguments are required: VIEW"),
    "unknown-view": (["gpus"], "invalid choice: 'gpus'"),
    "missing-dir": (["nodes", "--cluster", "/nonexistent"], "--cluster /nonexistent: not a directory"),
    "bad-version": (["nodes", "--cluster", "{dir}", "--kubernetes-version", "1.2"], "--kubernetes-version"),
    "bad-namespace": (["pods", "-n", "Team_A", "--cluster", "{dir}"], "-n: 'Team_A' is not a namespace name"),
    "namespace-and-all": (["pods", "-n", "a", "-A"], "not allowed with argument -n/--namespace"),
    "nodes-takes-no-namespace": (["nodes", "-n", "a"], "unrecognized arguments: -n a"),
    "bad-output": (["nodes", "-o", "yaml"], "argument -o/--output: invalid choice: 'yaml'"),
    "both-sources": (["nodes", "--cluster", "x", "--kubeconfig", "y"], "not allowed with argument --cluster"),
    "missing-kubeconfig": (["nodes", "--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig"),
    "version-on-a-live-cluster": (["nodes", "--kubeconfig", "/nonexistent", "--kubernetes-version", "1.35"],
                                  "--kubernetes-version: only for a dump"),
    "missing-config": (["nodes", "--cluster", "{dir}", "--config", "/nonexistent.yaml"], "--config /nonexistent"),
    "config-not-a-mapping": (["nodes", "--cluster", "{dir}", "--config", "{list}"], "expected a mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_with_one_line_naming_it(case: str, demo_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    args, expected = BAD[case]
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n")
    code, out, err = fleet(capsys, *[a.format(dir=demo_dir, list=listed) for a in args])
    assert code == 2
    assert out == ""
    assert expected in err and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_a_dump_with_unreadable_yaml_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c"
    bad.mkdir()
    (bad / "slices.yaml").write_text("kind: [unclosed\n")
    code, _, err = fleet(capsys, "nodes", "--cluster", str(bad))
    assert code == 2 and str(bad / "slices.yaml") in err and err.count("\n") == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(namespace=st.text(min_size=1, max_size=70))
def test_any_namespace_argument_is_shown_or_refused_never_crashes(namespace: str, demo_dir: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if namespace.startswith("-"):
        namespace = "x" + namespace
    code, out, err = fleet(capsys, "pods", "--cluster", str(demo_dir), "-o", "json", f"--namespace={namespace}")
    if re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", namespace):
        assert code == 0 and json.loads(out)["namespace"] == namespace
    else:
        assert code == 2 and err.startswith("gpuclaim fleet: -n: ") and err.count("\n") == 1


def test_the_live_reads_are_what_the_charts_fleet_roles_grant() -> None:
    import helm_python as helm

    from gpuclaim.commands.fleet import LISTED, NAMESPACED, TAINT_RULE_VERSIONS

    values = {"fleet": {"rbac": {"namespaceViewers": [{"namespace": "team-a", "subjects": [{"kind": "Group",
                                                                                           "name": "a"}]}]}}}
    out = helm.Chart.load(str(CHART)).render(values, name="gc", namespace="gpuclaim", is_install=True, revision=1)
    roles = {(o["kind"], o["metadata"]["name"]): {(g, r) for rule in o["rules"] for g in rule["apiGroups"]
                                                  for r in rule["resources"]}
             for o in yaml.safe_load_all(next(t for p, t in out.items() if p.endswith("fleet-rbac.yaml")))
             if o and o["kind"] in ("Role", "ClusterRole")}
    reads = {(k, v.rpartition("/")[0], plural) for k, v, plural in LISTED} | {
        ("DeviceTaintRule", v.rpartition("/")[0], "devicetaintrules") for v in TAINT_RULE_VERSIONS}
    # the whole fleet: everything, cluster-wide
    assert roles[("ClusterRole", "gc-gpuclaim-fleet-viewer")] == {(g, p) for _, g, p in reads}
    # `pods -n team-a`: the namespaced kinds in the namespace (Nodes are not read), the rest cluster-wide
    assert roles[("Role", "gc-gpuclaim-fleet-viewer")] == {(g, p) for k, g, p in reads if k in NAMESPACED}
    assert roles[("ClusterRole", "gc-gpuclaim-fleet-devices")] == {
        (g, p) for k, g, p in reads if k not in NAMESPACED and k != "Node"}


def test_the_fleet_pods_json_example_of_the_docs_is_what_the_cli_prints(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
    (block,) = [b for b in re.findall(r"```json\n(.*?)\n```", page, flags=re.S) if '"FleetPods"' in b]
    shown = json.loads(block)
    dump_dir = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "demo-fleet"
    code, out, _ = fleet(capsys, "pods", "-n", "research", "--cluster", str(dump_dir), "-o", "json")
    assert code == 0
    printed = json.loads(out)
    (pod,) = shown["pods"]  # the page shows one of the four pods
    assert pod in printed["pods"]
    assert {k: v for k, v in printed.items() if k != "pods"} == {k: v for k, v in shown.items() if k != "pods"}
