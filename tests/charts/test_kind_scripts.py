"""e2e/kind cannot run here (no Docker). What can be checked without a cluster is checked: the
scripts parse, the kind config enables DRA on 1.34, the values the run installs pass the chart's
schema and render valid 1.34 objects, the object names the script waits for are the ones the
chart renders, and the sample pods are exactly the ones the webhook's matchConditions select."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from celpy import celtypes
from chart_helpers import REPO, cel_eval, render_values
from official_schemas import assert_valid

KIND = REPO / "e2e" / "kind"
SCRIPTS = sorted(KIND.glob("*.sh"))


def kind_values() -> dict[str, Any]:
    return yaml.safe_load((KIND / "values.yaml").read_text())


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_scripts_parse_and_are_strict(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert os.access(script, os.X_OK)


def test_there_are_scripts_to_run_and_to_tear_down() -> None:
    assert {s.name for s in SCRIPTS} == {"run.sh", "down.sh"}


def test_kind_cluster_runs_kubernetes_1_34_with_dra() -> None:
    config = yaml.safe_load((KIND / "cluster.yaml").read_text())
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert config["featureGates"]["DynamicResourceAllocation"] is True
    assert config["runtimeConfig"]["resource.k8s.io/v1"] == "true"
    assert sum(1 for n in config["nodes"] if n["role"] == "worker") >= 2
    run = (KIND / "run.sh").read_text()
    image = re.search(r'NODE_IMAGE="\$\{NODE_IMAGE:-kindest/node:v(\d+)\.(\d+)\.\d+\}"', run)
    assert image and (int(image.group(1)), int(image.group(2))) == (1, 34)


def test_the_release_the_script_installs_renders_valid_objects_with_the_names_it_waits_for() -> None:
    from chart_helpers import _chart

    values = kind_values()
    _chart().validate_schema(values)
    out = _chart().render(values, name="gpuclaim", namespace="gpuclaim-system", is_install=True, revision=1)
    manifests = [text for path, text in out.items() if not path.endswith("NOTES.txt")]
    objects = [d for text in manifests for d in yaml.safe_load_all(text) if d]
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for obj in objects:
        assert_valid(obj)
    run = (KIND / "run.sh").read_text()
    assert 'RELEASE="gpuclaim"' in run and 'NS="gpuclaim-system"' in run
    # Every "${RELEASE}-..." object run.sh waits for or inspects exists in the release.
    expected = {
        ("Job", "gpuclaim-certs-1"),
        ("MutatingWebhookConfiguration", "gpuclaim-webhook"),
        ("ValidatingWebhookConfiguration", "gpuclaim-webhook"),
        ("Deployment", "gpuclaim-webhook"),
        ("Deployment", "gpuclaim-extender"),
        ("Deployment", "gpuclaim-scheduler"),
    }
    assert expected <= names
    for suffix in re.findall(r'\$\{RELEASE\}-([a-z0-9-]+)', run):
        assert any(name == f"gpuclaim-{suffix}" for _, name in names) or suffix == "tls", suffix
    scheduler = yaml.safe_load(next(o for o in objects if o["kind"] == "ConfigMap"
                                    and o["metadata"]["name"] == "gpuclaim-scheduler")["data"]["config.yaml"])
    assert scheduler["profiles"][0]["schedulerName"] in run


def test_sample_pods_are_valid_and_exactly_the_gpu_ones_reach_the_webhook() -> None:
    rendered = render_values(kind_values())
    (hook,) = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    (condition,) = hook["matchConditions"]
    docs = [d for d in yaml.safe_load_all((KIND / "pods.yaml").read_text()) if d]
    seen = {}
    for doc in docs:
        assert_valid(doc)
        if doc["kind"] == "Pod":
            pod = doc
        elif doc["kind"] == "Deployment":
            pod = {"metadata": doc["spec"]["template"]["metadata"], "spec": doc["spec"]["template"]["spec"]}
        else:
            continue
        result = cel_eval(condition["expression"], object=pod)
        assert isinstance(result, celtypes.BoolType)
        seen[doc["metadata"]["name"]] = bool(result)
        assert bool(result) is (pod["metadata"]["labels"]["gpu"] == "yes")
    assert seen == {"one-gpu": True, "two-gpus": True, "replicas": True, "no-gpu": False}
