"""`gpuclaim demo` as a user runs it: a subprocess, its JSON report, and no process left behind."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import helm_python as helm
import orjson
import pytest
import yaml
from official_schemas import assert_valid

from gpuclaim.demo import inventory, mig

REPO = Path(__file__).resolve().parents[2]
DEMO_BUDGET_S = 60


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("demo")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "demo", "-o", "json", "--workdir", str(workdir)],
                          capture_output=True, timeout=DEMO_BUDGET_S + 30, cwd=REPO, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr.decode()[-2000:] + done.stdout.decode()[-3000:]
    return {"report": orjson.loads(done.stdout), "elapsed": elapsed, "workdir": workdir}


def _workload(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(w for w in report["workloads"] if w["key"] == key)


def test_the_demo_finishes_within_its_budget_and_every_check_holds(demo: dict[str, Any]) -> None:
    assert demo["elapsed"] < DEMO_BUDGET_S
    report = demo["report"]
    assert report["version"] == "1"
    assert report["stack"]["skipped"] == {}
    assert [c for c in report["checks"] if not c["ok"]] == []


def test_every_workload_has_an_outcome(demo: dict[str, Any]) -> None:
    workloads = demo["report"]["workloads"]
    assert {w["key"] for w in workloads} == {"single-gpu", "train-4gpu", "mig-1g", "gfd-pinned", "shared-a",
                                             "shared-b", "cpu-only", "bad-quantity", "bad-unguarded",
                                             "admin-access"}
    for w in workloads:
        assert w["admission"] in ("converted", "untouched", "created", "denied"), w
        if w["kind"] == "Pod" and w["admission"] != "denied":
            assert w["scheduling"]["outcome"] == "scheduled", w
            assert w["scheduling"]["node"] in {n["node"] for n in demo["report"]["nodes"]}


def test_converted_pods_lose_their_legacy_limits_and_get_claims(demo: dict[str, Any]) -> None:
    for key in ("single-gpu", "train-4gpu", "mig-1g", "gfd-pinned", "shared-a", "shared-b"):
        w = _workload(demo["report"], key)
        assert w["admission"] == "converted"
        assert any(op.startswith("add /spec/resourceClaims") for op in w["patch"]), w["patch"]
        assert any(op.startswith("remove /spec/containers/0/resources/limits") for op in w["patch"]), w["patch"]
        assert w["scheduling"]["devices"], w
    assert _workload(demo["report"], "cpu-only")["patch"] == []


def test_the_mig_pod_gets_a_mig_device_and_the_pinned_pod_an_a100(demo: dict[str, Any]) -> None:
    mig_pod = _workload(demo["report"], "mig-1g")["scheduling"]
    assert all("-mig-1g5gb-" in d for d in mig_pod["devices"]), mig_pod
    pinned = _workload(demo["report"], "gfd-pinned")["scheduling"]
    assert pinned["node"].startswith(inventory.A100.prefix)


def test_the_shared_pair_uses_the_same_device(demo: dict[str, Any]) -> None:
    a = _workload(demo["report"], "shared-a")["scheduling"]
    b = _workload(demo["report"], "shared-b")["scheduling"]
    assert a["node"] == b["node"] and a["devices"] == b["devices"] and len(a["devices"]) == 1


@pytest.mark.parametrize(("key", "fragment"), [
    ("bad-quantity", "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    ("bad-unguarded", "no such key: profile"),
    ("admin-access", "spec.devices.requests[0].exactly.adminAccess: Forbidden"),
], ids=["quantity-relational-operator", "unguarded-attribute", "admin-access-unlabelled-namespace"])
def test_broken_claims_are_denied_with_their_reason(demo: dict[str, Any], key: str, fragment: str) -> None:
    w = _workload(demo["report"], key)
    assert w["admission"] == "denied" and w["httpStatus"] == 422
    if key == "bad-quantity":
        # a selector that does not compile is the apiserver's own refusal, before any webhook (as on a real one)
        assert w["message"].startswith('ResourceClaim.resource.k8s.io "big-memory" is invalid: ')
    else:
        assert 'admission webhook "dra.validate.gpuclaim.io" denied the request' in w["message"]
    assert fragment in w["message"]


def test_the_4gpu_pod_lands_on_a_node_with_the_best_topology(demo: dict[str, Any]) -> None:
    s = _workload(demo["report"], "train-4gpu")["scheduling"]
    assert len(s["devices"]) == 4
    assert s["locality"] is not None and s["locality"] == s["bestFeasibleLocality"]
    assert s["score"] == s["bestFeasibleScore"]
    assert s["extenderConverged"] is True


def test_no_process_is_left_behind(demo: dict[str, Any]) -> None:
    stack = demo["report"]["stack"]
    pids = [stack[part]["pid"] for part in ("apiserver", "webhook", "extender")]
    assert all(isinstance(p, int) for p in pids)
    assert _wait_gone(pids) == []
    assert _processes_mentioning(str(demo["workdir"])) == []


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_demo_stops_every_process_it_started(tmp_path: Path) -> None:
    workdir = tmp_path / "interrupted"
    # Ctrl-C as a terminal delivers it: a child inherits an ignored SIGINT across exec (pytest under nohup, CI
    # runners, `trap '' INT`), and Python then never raises KeyboardInterrupt, so restore the default first
    demo = subprocess.Popen([sys.executable, "-m", "gpuclaim", "demo", "--workdir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
                            preexec_fn=_sigint_default)
    try:
        # wait for the processes themselves, not their log files: the demo opens a log before the child
        # has exec'd, so a scan right then can miss it
        deadline = time.monotonic() + 30
        children: list[int] = []
        while len(children) < 3 and time.monotonic() < deadline:  # the double, the webhook and the extender
            assert demo.poll() is None, demo.stderr.read() if demo.stderr else b""
            time.sleep(0.05)
            if (workdir / "logs" / "extender.log").exists():
                children = [p for p in _processes_mentioning(str(workdir)) if p != demo.pid]
        assert len(children) >= 3
        demo.send_signal(signal.SIGINT)
        assert demo.wait(30) == 130
    finally:
        if demo.poll() is None:
            demo.kill()  # no clean-up from a SIGKILLed demo: end its children here, so a failure leaks nothing
            demo.wait()
            for pid in _processes_mentioning(str(workdir)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if demo.stderr:
            demo.stderr.close()
    assert _wait_gone(children) == []


def test_the_embedded_fleet_is_valid_kubernetes_1_34() -> None:
    fleet = inventory.build()
    for obj in fleet.objects + inventory.registrations():
        assert_valid(obj)
    assert len(fleet.nodes) == 19


def test_constructed_mig_geometry_fits_an_a100() -> None:
    fleet = inventory.build()
    slice_ = next(s for s in fleet.of_kind("ResourceSlice") if s["spec"]["nodeName"] == "p4d-a100-6")
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for device in slice_["spec"]["devices"]:
        if device["attributes"]["type"]["string"] == "mig":
            by_parent.setdefault(device["attributes"]["parentUUID"]["string"], []).append(device)
    assert len(by_parent) == len(inventory.MIG_GPUS)
    for devices in by_parent.values():
        slices = [k for d in devices for k in d["capacity"] if k.startswith("memorySlice")]
        assert len(slices) == len(set(slices)) <= 8  # no memory slice given twice
        compute = sum(int(d["attributes"]["profile"]["string"][0]) for d in devices)
        assert compute <= 7
        for d in devices:
            profile = mig.A100_40GB[d["attributes"]["profile"]["string"]]
            assert d["name"].startswith(f"gpu-{d['name'].split('-')[1]}-mig-{profile.name.replace('.', '')}-"
                                        f"{profile.gi_profile_id}-")
    whole = [d["name"] for d in slice_["spec"]["devices"] if d["attributes"]["type"]["string"] == "gpu"]
    assert whole == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]  # a GPU in MIG mode is not also offered whole


def test_the_registrations_are_the_charts_current_rendering() -> None:
    out = helm.Chart.load(str(REPO / "charts" / "gpuclaim")).render(
        {}, name="gpuclaim", namespace="gpuclaim", is_install=True, revision=1)
    rendered = [d for d in yaml.safe_load_all(out["gpuclaim/templates/webhookconfigurations.yaml"]) if d]
    assert inventory.registrations() == rendered
    extenders = yaml.safe_load(out["gpuclaim/templates/scheduler-extender-configmap.yaml"])["data"]["extenders.yaml"]
    assert inventory.extender_entries() == yaml.safe_load(extenders)["extenders"]


def test_the_report_excerpt_in_docs_demo_md_is_the_demos_own_text(demo: dict[str, Any]) -> None:
    """docs/demo.md shows an excerpt of the text report: apart from the `[...]` lines that mark what it leaves out,
    each run of lines is a run of the report's own lines, in the report's order."""
    from gpuclaim.demo.report import render

    out = io.StringIO()
    render(demo["report"], out)
    report = [line.rstrip() for line in out.getvalue().splitlines()]
    page = (REPO / "docs" / "demo.md").read_text(encoding="utf-8")
    excerpt = page.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n").splitlines()
    segments: list[list[str]] = [[]]
    for line in excerpt:
        if line == "[...]":
            segments.append([])
        else:
            segments[-1].append(line.rstrip())
    at = 0
    for segment in filter(None, segments):
        starts = [i for i in range(at, len(report) - len(segment) + 1) if report[i:i + len(segment)] == segment]
        assert starts, f"not in the report (after line {at}): {segment}"
        at = starts[0] + len(segment)
