"""The real kube-apiserver's verdict on ResourceClaims, ResourceClaimTemplates and DeviceClasses (gpuclaim's webhooks
off: its validating registration is removed for the module; every create is a dryRun) equals
`gpuclaim lint`'s: on every such object of the upstream examples in tests/fixtures/examples, and on generated
claims. The apiserver refuses (422) exactly what lint reports an error for (lint is given the namespace, for
the adminAccess label rule). A manifest at a version the 1.34 apiserver does not serve by default (v1beta1,
v1beta2: 404) gets lint's apiVersion warning.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realkube_cluster import REPO, Kube

EXAMPLES = REPO / "tests" / "fixtures" / "examples"
KINDS = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
         "DeviceClass": "deviceclasses"}


def example_objects() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                out.append((f"{path.relative_to(EXAMPLES)}#{index}", doc))
    return out


VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpuclaim-webhook"


@pytest.fixture(scope="module")
def unhooked(kube: Kube) -> Iterator[str]:
    """A namespace, with gpuclaim's validating registration removed for the module (the chart's opt-out label
    skips pods only: DRA objects are validated everywhere); restored as it was, caBundle included."""
    name = "lint-unhooked"
    kube.api.apply_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
    registration = kube.api.get(VALIDATING)
    kube.api.delete(VALIDATING, grace=None)
    try:
        yield name
    finally:
        meta = registration["metadata"]
        for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            meta.pop(key, None)
        kube.api.create({**registration, "kind": "ValidatingWebhookConfiguration",
                         "apiVersion": "admissionregistration.k8s.io/v1"})
        kube.api.delete(f"/api/v1/namespaces/{name}", grace=None)


def apiserver_verdict(kube: Kube, namespace: str, obj: dict) -> tuple[int, str]:
    api_version = obj.get("apiVersion", "")
    kind = obj["kind"]
    where = "" if kind == "DeviceClass" else f"namespaces/{namespace}/"
    status, body = kube.api.request("POST", f"/apis/{api_version}/{where}{KINDS[kind]}", obj,
                                    params={"dryRun": "All"})
    return status, str(body.get("message", ""))


def lint_verdicts(tmp: Path, namespace: str, objects: list[dict], minor: str) -> list[list[dict]]:
    """`gpuclaim lint -o json --kubernetes-version <minor>` once over one file per object; each object's
    findings."""
    files = []
    for index, obj in enumerate(objects):
        files.append(tmp / f"object-{index}.yaml")
        files[-1].write_text(yaml.safe_dump(obj))
    namespaces = tmp / "namespaces.yaml"
    namespaces.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}}))
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "lint", "-o", "json", "--namespaces", str(namespaces),
                           "--kubernetes-version", minor, *map(str, files)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    assert done.returncode in (0, 1), done.stderr
    findings = orjson.loads(done.stdout)
    return [[f for f in findings if f["file"] == str(path)] for path in files]


def in_namespace(obj: dict, namespace: str) -> dict:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    if obj["kind"] == "DeviceClass":
        meta.pop("namespace", None)
    else:
        meta["namespace"] = namespace
    return obj


def differences(kube: Kube, unhooked: str, tmp: Path, objects: list[dict]) -> tuple[list[str | None], int]:
    """Per object None when the apiserver and lint agree, else what differs; and how many the apiserver refused."""
    out: list[str | None] = []
    refused = 0
    for obj, findings in zip(objects, lint_verdicts(tmp, unhooked, objects, kube.minor), strict=True):
        status, message = apiserver_verdict(kube, unhooked, obj)
        # admission-stage errors only: what lint knows the scheduler would refuse (driver schemas) the apiserver admits
        errors = [f"{f['field']}: {f['message']}" for f in findings
                  if f["severity"] == "error" and f["stage"] == "admission"]
        if status == 404:  # this apiVersion is not served by a default 1.34 apiserver
            warned = [f for f in findings if f["field"] == "apiVersion" and f["severity"] == "warning"]
            out.append(None if warned or errors else f"apiserver: not served ({message}); lint: no warning")
            continue
        assert status in (200, 201, 422), (status, message)
        refused += status == 422
        agree = (status == 422) == bool(errors)
        out.append(None if agree else f"apiserver {status} {message[:300]!r}; lint {errors}")
    return out, refused


def test_upstream_examples_verdicts_equal(kube: Kube, unhooked: str, tmp_path: Path) -> None:
    examples = example_objects()
    assert len(examples) >= 100
    objects = [in_namespace(obj, unhooked) for _, obj in examples]
    verdicts, refused = differences(kube, unhooked, tmp_path, objects)
    differ = {where: why for (where, _), why in zip(examples, verdicts, strict=True) if why}
    assert not differ, differ
    assert refused >= 4  # the examples include refused ones (adminAccess without the label, a malformed selector)


# ---- generated claims -------------------------------------------------------------------------------------------
EXPRESSIONS = [
    "device.driver == 'gpu.nvidia.com'",
    "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",  # no such overload
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
    "device.attributes['gpu.nvidia.com'].?profile.orValue('') == '1g.5gb'",
    "'profile' in device.attributes['gpu.nvidia.com']",
    "device.attributes['gpu.nvidia.com'].index < 4",
    "device.attributes['gpu.nvidia.com'].index",  # not a bool
    "device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA (A|H)100')",
    "device.nosuchfield == 1",  # undeclared field
    "device.driver ==",  # syntax error
    "size(device.attributes) > 0",
    "true",
    "device.attributes['gpu.nvidia.com'].uuid.lowerAscii().contains('gpu-')",
    "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
    "device.attributes['gpu.nvidia.com'].productName.split(' ')[0] == 'NVIDIA'",
]
names = st.sampled_from(["gpu", "g-1", "Bad_Name", "a" * 64, "x"])
requests = st.fixed_dictionaries({
    "name": names,
    "exactly": st.fixed_dictionaries({
        "deviceClassName": st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com", "Not A Class"]),
        "count": st.integers(-1, 40),
        "selectors": st.lists(st.sampled_from(EXPRESSIONS).map(lambda e: {"cel": {"expression": e}}), max_size=3),
    }, optional={"allocationMode": st.sampled_from(["ExactCount", "All", "Some"]), "adminAccess": st.booleans()}),
})
claims = st.builds(lambda reqs, template: {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate" if template else "ResourceClaim",
    "metadata": {"name": "generated"},
    **({"spec": {"spec": {"devices": {"requests": reqs}}}} if template else {"spec": {"devices": {"requests": reqs}}}),
}, st.lists(requests, min_size=1, max_size=3), st.booleans())


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(drawn=st.lists(claims, min_size=25, max_size=30))
def test_generated_claims_verdicts_equal(kube: Kube, unhooked: str, tmp_path_factory, drawn: list[dict]) -> None:
    objects = []
    for index, obj in enumerate(drawn):
        obj = in_namespace(obj, unhooked)
        obj["metadata"]["name"] = f"generated-{index}"
        for request in obj["spec"].get("spec", obj["spec"])["devices"]["requests"]:
            if request["exactly"].get("allocationMode") == "All":
                request["exactly"].pop("count")  # count with All is its own error; keep the draws meaningful
        objects.append(obj)
    verdicts, _ = differences(kube, unhooked, tmp_path_factory.mktemp("lint"), objects)
    differ = {i: (why, objects[i]) for i, why in enumerate(verdicts) if why}
    assert not differ, differ
