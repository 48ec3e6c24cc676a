"""The reliability suite: its invariant checks on hand-made ledgers, and the short run as CI runs it (the long
run with GPUCLAIM_LONG=1)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from e2e.reliability import invariants
from e2e.reliability.traffic import BASE_SHAPES, Record, Shape

REPO = Path(__file__).resolve().parents[2]
GPU1 = next(s for s in BASE_SHAPES if s.key == "gpu-1")
CPU = next(s for s in BASE_SHAPES if s.key == "cpu")
BAD = next(s for s in BASE_SHAPES if s.expect == "denied")


def _converted(name: str, template: str = "gpuclaim-abc") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "main", "resources": {"claims": [{"name": "gpuclaim", "request": "main-gpu"}]}}],
        "resourceClaims": [{"name": "gpuclaim", "resourceClaimTemplateName": template}]}}


def _template(count: int) -> dict[str, Any]:
    return {"spec": {"spec": {"devices": {"requests": [{"name": "main-gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": count}}]}}}}


def _created(name: str, shape: Shape = GPU1) -> Record:
    return Record(name, "chaos", shape, outcome="created", status=201)


def test_a_clean_ledger_passes() -> None:
    records = [_created("a"), _created("b"), Record("c", "chaos", BAD, outcome="denied", status=422,
                                                     message="bad group"), _created("d", CPU)]
    pods = {"a": _converted("a"), "b": _converted("b"),
            "d": {"metadata": {"name": "d"}, "spec": {"containers": [{"name": "main"}]}}}
    verdict = invariants.check(records, pods, {"gpuclaim-abc": _template(1)})
    assert verdict["ok"], verdict
    assert (verdict["converted"], verdict["untouched"], verdict["denied"]) == (2, 1, 1)


def test_a_patch_applied_twice_is_found() -> None:
    twice = _converted("a")
    twice["spec"]["resourceClaims"].append(copy.deepcopy(twice["spec"]["resourceClaims"][0]))
    twice["spec"]["containers"][0]["resources"]["claims"].append({"name": "gpuclaim", "request": "main-gpu"})
    verdict = invariants.check([_created("a")], {"a": twice}, {"gpuclaim-abc": _template(1)})
    assert not verdict["ok"] and verdict["podProblems"] == 2
    assert any("applied twice" in e for e in verdict["examples"])


def test_an_unconverted_pod_and_a_lost_admission_are_found() -> None:
    unconverted = {"metadata": {"name": "a"}, "spec": {"containers": [
        {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    lost = Record("b", "chaos", GPU1, outcome="lost", status=500, message="failed calling webhook")
    verdict = invariants.check([_created("a"), lost], {"a": unconverted}, {})
    assert not verdict["ok"] and verdict["lost"] == 1
    assert any("legacy resources left" in e for e in verdict["examples"])


def test_a_template_whose_spec_does_not_fit_the_pod_is_found() -> None:
    verdict = invariants.check([_created("a")], {"a": _converted("a")}, {"gpuclaim-abc": _template(4)})
    assert not verdict["ok"] and verdict["podProblems"] == 1


def test_one_template_name_reached_from_two_shapes_is_a_conflict() -> None:
    four = next(s for s in BASE_SHAPES if s.key == "gpu-4")
    records = [_created("a"), _created("b", four)]
    verdict = invariants.check(records, {"a": _converted("a"), "b": _converted("b")},
                               {"gpuclaim-abc": _template(1)})
    assert verdict["templatesShapeConflicts"] == 1 and not verdict["ok"]


def test_a_denial_without_a_reason_or_of_a_valid_pod_is_found() -> None:
    records = [Record("a", "chaos", BAD, outcome="denied", status=422, message=""),
               Record("b", "chaos", GPU1, outcome="denied", status=422, message="no")]
    verdict = invariants.check(records, {}, {})
    assert verdict["deniedWithoutReason"] == 1 and verdict["wrongOutcome"] == 1


def _run(*extra: str, timeout: float) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "e2e.reliability", *extra], capture_output=True, cwd=REPO,
                          timeout=timeout, check=False)
    report = orjson.loads(done.stdout) if done.stdout.strip() else {}
    assert done.returncode == 0, orjson.dumps(report).decode()[-4000:] + done.stderr.decode()[-2000:]
    return dict(report)


def _assert_holds(report: dict[str, Any]) -> None:
    chaos = report["chaos"]
    assert [s["step"] for s in chaos["steps"]] == ["webhook-restart", "extender-kill", "watches-dropped",
                                                    "watch-410-expired", "list-watch-500", "slow-template-creates",
                                                    "certificate-rotation"]
    for step in chaos["steps"]:
        assert step["ok"], step
        assert step["webhookConverged_s"] is not None and step["extenderConverged_s"] is not None
    # the outage was real: the client met the webhook being down and retried through it
    assert chaos["steps"][0]["transientFailures"].get("webhook-unavailable", 0) > 0
    inv = chaos["invariants"]
    assert inv["ok"] and inv["lost"] == 0 and inv["podProblems"] == 0 and inv["templatesShapeConflicts"] == 0
    assert inv["converted"] > 0 and inv["denied"] > 0
    load = report["load"]
    assert load["errors"] == 0 and load["rss_growth_after_warmup_pct"] <= 10.0


def test_the_short_run_keeps_every_invariant() -> None:
    report = _run(timeout=150)
    assert report["mode"] == "short"
    _assert_holds(report)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("GPUCLAIM_LONG") != "1", reason="long run: set GPUCLAIM_LONG=1")
@pytest.mark.timeout(1800)
def test_the_long_run_keeps_every_invariant() -> None:
    report = _run("--long", timeout=1700)
    assert report["mode"] == "long"
    _assert_holds(report)
