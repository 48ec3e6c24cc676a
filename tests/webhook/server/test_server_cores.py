"""The server with the real cores (conversion and validation) and the cluster view of the API double, in
process over TLS: dryRun creates nothing, a real admission creates the template the patch references, a
selector gpuclaim cannot compile is admitted with a warning at its field path (the apiserver compiled it first),
and the Kubernetes version is read from /version and followed across a relist."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from eventually import eventually
from official_schemas import assert_valid
from server_helpers import FIXTURES, Server, classes_double, make_config, pod_review, reloader_for, serving

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import Fault, RunningDouble
from gpuclaim.dra.config import load_config
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.client import KubeClient
from gpuclaim.webhook import admit, app, keys

SLICES = FIXTURES.parent / "resourceslices" / "aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/gpu-test1/resourceclaimtemplates"


@pytest.fixture
async def double(tmp_path: Path) -> AsyncIterator[RunningDouble]:
    running = await classes_double(tmp_path, "gpu-test1")
    for item in yaml.safe_load(SLICES.read_text())["items"]:
        running.store.restore(item)
    yield running
    await running.close()


@contextlib.asynccontextmanager
async def _serving(double: RunningDouble, tls_files: selfsigned.TlsFiles, config: Any,
                   synced: bool = True) -> AsyncIterator[Server]:
    """The app with the real cores and the double's cluster view, in process over TLS; with `synced`, once its
    /readyz answers 200 (10 s at most: the tests that need it ready say so)."""
    application = app.create_app(config, checks=admit.core_checks(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    async with serving(application, tls_files) as server:
        for _ in range(200 if synced else 0):
            if (await server.get("/readyz"))[0] == 200:
                break
            await asyncio.sleep(0.05)
        yield server


def _policy(mutate: str, **sections: Any) -> Any:
    return load_config({**sections, "webhook": {"internalErrorPolicy": {"mutate": mutate}}})


@pytest.fixture
async def live(double: RunningDouble, tls_files: selfsigned.TlsFiles) -> AsyncIterator[Server]:
    async with _serving(double, tls_files, make_config()) as server:
        assert (await server.get("/readyz"))[0] == 200
        yield server


async def _templates(double: RunningDouble) -> list[dict[str, Any]]:
    client = KubeClient(kube_config.from_kubeconfig(double.kubeconfig))
    try:
        return (await client.list(TEMPLATES))["items"]
    finally:
        await client.close()


async def test_dry_run_converts_the_pod_but_creates_nothing(live: Server, double: RunningDouble) -> None:
    status, body = await live.post("/mutate", pod_review(gpus=2, dry_run=True))
    response = body["response"]
    assert status == 200 and response["allowed"] is True and response["patchType"] == "JSONPatch"
    assert await _templates(double) == []
    sample = live.app[keys.REGISTRY].get_sample_value
    assert sample("gpuclaim_webhook_templates_created_total") == 0
    assert sample("gpuclaim_webhook_conversions_total") == 1


async def test_a_real_admission_creates_the_template_the_patched_pod_references(
        live: Server, double: RunningDouble) -> None:
    sent = pod_review(gpus=2)
    status, body = await live.post("/mutate", sent)
    response = body["response"]
    assert status == 200 and response["allowed"] is True, response
    patched = jsonpatch.apply_patch(sent["request"]["object"], orjson.loads(base64.b64decode(response["patch"])))
    assert_valid(patched)
    limits = patched["spec"]["containers"][0].get("resources", {}).get("limits", {})
    assert "nvidia.com/gpu" not in limits
    (template,) = await _templates(double)
    referenced = {c.get("resourceClaimTemplateName") for c in patched["spec"]["resourceClaims"]}
    assert template["metadata"]["name"] in referenced
    assert live.app[keys.REGISTRY].get_sample_value("gpuclaim_webhook_templates_created_total") == 1
    # a second pod of the same shape reuses it
    status, body = await live.post("/mutate", pod_review(gpus=2, name="pod1", uid="u-second"))
    assert status == 200 and body["response"]["allowed"] is True
    assert len(await _templates(double)) == 1


async def test_an_api_server_outage_while_creating_admits_the_pod_unchanged_with_a_warning(
        live: Server, double: RunningDouble) -> None:
    await double.close()  # the cluster view saw no template, and creating one now cannot work
    status, body = await live.post("/mutate", pod_review(gpus=1, uid="u-outage"))
    response = body["response"]
    assert status == 200 and response["allowed"] is True and "patch" not in response
    assert "admitted unchanged" in response["warnings"][0] and "u-outage" in response["warnings"][0]


def _claim_review(expression: str) -> dict[str, Any]:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c", "namespace": "gpu-test1"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
                     "expression": expression}}]}}]}}}
    doc = pod_review()
    doc["request"].update(kind={"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
                          resource={"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
                          object=claim, name="c")
    return doc


async def test_validate_admits_a_selector_it_cannot_compile_with_a_warning_at_its_field_path(live: Server) -> None:
    # kube-apiserver compiles selectors before any webhook runs: one gpuclaim cannot compile was admitted there
    status, body = await live.post("/validate", _claim_review(
        'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")'))
    response = body["response"]
    assert status == 200 and response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("spec.devices.requests[0].exactly.selectors[0].cel.expression: not checked: ")


async def test_the_kubernetes_version_is_read_from_the_cluster_and_followed_after_a_relist(
        live: Server, double: RunningDouble) -> None:
    registry = live.app[keys.REGISTRY]
    state = live.app[keys.STATE]

    def modelled(name: str) -> bool:
        return registry.get_sample_value("gpuclaim_kubernetes_version_info", {
            "model": name, "cluster": double.settings.git_version, "source": "cluster"}) == 1.0

    def relist_at(git_version: str) -> None:
        """The control plane changes version: its watches answer 410 and gpuclaim relists."""
        double.settings.git_version = git_version
        double.faults.add(Fault(kind="status", verbs=frozenset({"watch"}), resources=frozenset({"nodes"}),
                                code=410, times=1))
        double.store.close_watches()

    sort = "[2, 1].sort()[0] == 1"  # ext.Lists v3: new selectors have it from 1.35
    await eventually(lambda: modelled("1.37"))  # the double plays the newest minor
    relist_at("v1.34.4")
    await eventually(lambda: modelled("1.34"), within=10.0)
    _, body = await live.post("/validate", _claim_review(sort))
    assert "not checked" in body["response"]["warnings"][0]
    relist_at("v1.37.2")  # upgraded
    await eventually(lambda: modelled("1.37"), within=10.0)
    assert state.context.kubernetes().name == "1.37"
    _, body = await live.post("/validate", _claim_review(sort))
    assert body["response"]["allowed"] is True and "warnings" not in body["response"]


async def test_validate_dry_runs_selectors_against_the_live_devices(live: Server) -> None:
    # the p5 nodes publish H100s: a selector for A100s matches none of them (a warning by default)
    a100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
    h100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    for _ in range(2):  # the live inventory is built once, not per request
        _, none = await live.post("/validate", _claim_review(a100))
        _, some = await live.post("/validate", _claim_review(h100))
        assert none["response"]["allowed"] is True and none["response"]["warnings"]
        assert some["response"]["allowed"] is True and "warnings" not in some["response"]


async def test_before_the_cluster_view_has_synced_gpu_pods_follow_the_internal_error_policy(
        double: RunningDouble, tls_files: selfsigned.TlsFiles) -> None:
    # found by the reliability suite: right after a restart the view knew no DeviceClass yet, and a GPU pod was
    # refused with "the mapped DeviceClass ... not found" although the class existed
    double.faults.add(Fault("delay", verbs=frozenset({"list"}), resources=frozenset({"deviceclasses"}),
                            delay_seconds=30.0, times=None))
    try:
        async with _serving(double, tls_files, _policy("deny"), synced=False) as server:
            assert (await server.get("/readyz"))[0] == 503
            status, body = await server.post("/mutate", pod_review(gpus=1, uid="u-early"))
            response = body["response"]
            assert status == 200 and response["allowed"] is False
            assert response["status"]["code"] == 500  # a retriable failure, not a refusal of the pod
            assert "not finished its first list" in response["status"]["message"]
            assert "not found" not in response["status"]["message"]
            # a pod with nothing to convert is not held up by the unsynced view
            status, body = await server.post("/mutate", pod_review(gpus=None, uid="u-plain"))
            assert status == 200 and body["response"]["allowed"] is True and "patch" not in body["response"]
    finally:
        double.faults.clear()


@pytest.mark.parametrize("policy", ["allow", "deny"])
async def test_a_pod_whose_conversion_is_refused_follows_the_policy_before_the_first_list(
        double: RunningDouble, tls_files: selfsigned.TlsFiles, policy: str) -> None:
    """Issue 22, item 8: before the first list a pod gpuclaim would refuse (500m of a GPU) cannot be judged either
    (its class may be missing too): it follows internalErrorPolicy.mutate, and is never admitted silently."""
    double.faults.add(Fault("delay", verbs=frozenset({"list"}), resources=frozenset({"deviceclasses"}),
                            delay_seconds=30.0, times=None))
    try:
        async with _serving(double, tls_files, _policy(policy), synced=False) as server:
            assert (await server.get("/readyz"))[0] == 503
            sent = pod_review(uid="u-half")
            sent["request"]["object"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
            status, body = await server.post("/mutate", sent)
    finally:
        double.faults.clear()
    response = body["response"]
    assert status == 200 and "patch" not in response
    if policy == "deny":
        assert response["allowed"] is False and response["status"]["code"] == 500
        assert "not finished its first list" in response["status"]["message"]
    else:
        assert response["allowed"] is True
        (warning,) = response["warnings"]
        assert "not finished its first list" in warning and "admitted unchanged" in warning


@pytest.mark.parametrize("code", [403, 404, 422, 429], ids=["quota-full", "namespace-missing", "invalid", "throttled"])
async def test_a_template_the_api_server_refuses_denies_the_pod_even_when_internal_errors_allow(
        double: RunningDouble, tls_files: selfsigned.TlsFiles, code: int) -> None:
    """Issue 22, item 2: a 4xx on the template create was answered like an outage, and `mutate: allow` admitted
    the GPU pod with its legacy limit. It is the pod's refusal, with the API server's code and message."""
    async with _serving(double, tls_files, _policy("allow")) as server:
        double.faults.add(Fault("status", verbs=frozenset({"create"}),
                                resources=frozenset({"resourceclaimtemplates"}), code=code, times=None))
        status, body = await server.post("/mutate", pod_review(gpus=1, uid="u-refused"))
    response = body["response"]
    assert status == 200 and response["allowed"] is False and "patch" not in response
    assert response["status"]["code"] == code  # 429: the pod's client retries, as after the API server's own
    message = response["status"]["message"]
    assert message.startswith("spec.resourceClaims: Forbidden: gpuclaim could not create")
    assert "ResourceClaimTemplate gpu-test1/gpuclaim-" in message and f"refused it: {code}" in message
    assert await _templates(double) == []


_MANY_PRODUCTS = [f"NVIDIA-H100-80GB-HBM3-REV{i:04d}" for i in range(400)]  # ~14 KiB as a productName `in` list


@pytest.mark.parametrize("keep", [True, False], ids=["keepNodeSelector", "dropNodeSelector"])
async def test_a_required_affinity_past_the_selector_limit_stays_a_node_constraint(
        live: Server, double: RunningDouble, keep: bool, tls_files: selfsigned.TlsFiles) -> None:
    """Issue 22, item 2: 400 product names made a 14 KiB selector, the apiserver refused the template and the pod
    was admitted unconverted. Now the pod is converted and the affinity is left as a node constraint only (the
    device plugin's meaning: any GPU of the chosen node), with a warning."""
    config = _policy("allow", conversion={"gfdMigration": {"keepNodeSelector": keep}})
    sent = pod_review(gpus=2, uid="u-many")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": _MANY_PRODUCTS}]}]}}}
    sent["request"]["object"]["spec"]["affinity"] = affinity
    async with _serving(double, tls_files, config) as server:
        status, body = await server.post("/mutate", sent)
    response = body["response"]
    assert status == 200 and response["allowed"] is True, response
    patched = jsonpatch.apply_patch(sent["request"]["object"], orjson.loads(base64.b64decode(response["patch"])))
    assert patched["spec"]["affinity"] == affinity
    assert "nvidia.com/gpu" not in patched["spec"]["containers"][0].get("resources", {}).get("limits", {})
    (template,) = await _templates(double)
    assert "productName" not in orjson.dumps(template["spec"]).decode()
    (warning,) = [w for w in response["warnings"] if "node constraint" in w]
    assert warning.startswith("gpuclaim did not turn spec.affinity.nodeAffinity.requiredDuringScheduling")
    assert "more than the 10240 a CEL selector may hold" in warning


async def test_an_object_gpuclaims_own_validation_refuses_is_never_created_and_the_pod_is_refused(
        double: RunningDouble, tls_files: selfsigned.TlsFiles) -> None:
    """Issue 22, item 2: every object the conversion makes is checked with gpuclaim's resource.k8s.io/v1
    validation before it is created. A mapping selector comparing quantities with `>=` (no such overload) would
    make every GPU pod's template invalid: each pod is refused naming the field, none admitted unconverted."""
    mappings = [{"resource": "nvidia.com/gpu", "deviceClassName": "gpu.nvidia.com",
                 "selectors": ['device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")']}]
    async with _serving(double, tls_files, _policy("allow", conversion={"mappings": mappings})) as server:
        status, body = await server.post("/mutate", pod_review(gpus=1, uid="u-invalid"))
    response = body["response"]
    assert status == 200 and response["allowed"] is False and response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith("spec.resourceClaims: Forbidden: gpuclaim converts this pod's GPUs to "
                              "ResourceClaimTemplate gpuclaim-")
    assert "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value" in message
    assert await _templates(double) == []


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
async def test_validate_allows_a_delete_whose_object_is_null(live: Server, operation: str) -> None:
    """Issue 22, item 7: a DELETE carries `object: null` (the old object in oldObject); it was denied with 422."""
    sent = _claim_review('device.driver == "gpu.nvidia.com"')
    sent["request"].update(operation=operation, oldObject=sent["request"]["object"], object=None)
    status, body = await live.post("/validate", sent)
    assert status == 200 and body["response"]["allowed"] is True, body
    assert "status" not in body["response"] or body["response"]["status"].get("code") != 422


@pytest.mark.parametrize(("extra", "checked"), [(0, True), (1, False)], ids=["exactly-the-budget", "one-byte-over"])
async def test_selectors_adding_up_to_exactly_the_budget_are_still_checked(
        double: RunningDouble, tls_files: selfsigned.TlsFiles, extra: int, checked: bool) -> None:
    """Issue 22, item 8: `validation.maxSelectorBytes` is the most an object's selectors may hold and still be
    compiled; one byte more and they are left to kube-apiserver, with a warning."""
    budget = 200
    bad = 'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")'  # no `>=` on quantities
    good = 'device.driver == "gpu.nvidia.com"'
    padded = bad + " " * (budget - len(bad) - len(good) + extra)
    sent = _claim_review(padded)
    selectors = sent["request"]["object"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
    selectors.append({"cel": {"expression": good}})
    assert sum(len(s["cel"]["expression"]) for s in selectors) == budget + extra
    config = load_config({"validation": {"maxSelectorBytes": budget}})
    async with _serving(double, tls_files, config) as server:
        status, body = await server.post("/validate", sent)
    response = body["response"]
    # kube-apiserver admitted the claim, so a selector gpuclaim cannot compile is a warning either way: what tells
    # the two apart is whether gpuclaim compiled it (issue 24: never refuse what the apiserver admitted)
    assert status == 200 and response["allowed"] is True, response
    compiled = [w for w in response["warnings"]
                if w.startswith("spec.devices.requests[0].exactly.selectors[0].cel.expression: not checked: ")]
    over_budget = [w for w in response["warnings"] if "validation.maxSelectorBytes" in w]
    assert (bool(compiled), bool(over_budget)) == (checked, not checked), response["warnings"]


async def test_past_the_namespace_cap_a_pod_needing_a_new_template_is_refused(
        double: RunningDouble, tls_files: selfsigned.TlsFiles) -> None:
    """Issue 22, item 6: 50,000 forged reviews of distinct shapes made 50,000 templates. gpuclaim makes at most
    `conversion.maxObjectsPerNamespace` objects per namespace, counting creations the watch has not shown yet;
    pods of a shape it already made go on being converted."""
    config = load_config({"conversion": {"maxObjectsPerNamespace": 2}})
    async with _serving(double, tls_files, config) as server:
        answers = [(await server.post("/mutate", pod_review(gpus=n, name=f"p{n}", uid=f"u-{n}")))[1]["response"]
                   for n in (1, 2, 3)]
        again = (await server.post("/mutate", pod_review(gpus=1, name="p1-again", uid="u-again")))[1]["response"]
    assert [a["allowed"] for a in answers] == [True, True, False] and again["allowed"] is True
    assert answers[2]["status"]["code"] == 422
    message = answers[2]["status"]["message"]
    assert message.startswith("spec.resourceClaims: Forbidden: gpuclaim would create ResourceClaimTemplate gpuclaim-")
    assert "namespace gpu-test1 already holds 2 objects gpuclaim made" in message
    assert "conversion.maxObjectsPerNamespace is 2" in message
    assert len(await _templates(double)) == 2


async def test_concurrent_pods_of_distinct_shapes_do_not_pass_the_namespace_cap_together(
        double: RunningDouble, tls_files: selfsigned.TlsFiles) -> None:
    """Issue 22, item 6: the count includes what is being created, so a burst cannot pass the cap before the
    watch reports its templates."""
    config = load_config({"conversion": {"maxObjectsPerNamespace": 2}})
    async with _serving(double, tls_files, config) as server:
        double.faults.add(Fault("delay", verbs=frozenset({"create"}), resources=frozenset({"resourceclaimtemplates"}),
                                delay_seconds=0.3, times=None))
        answers = await asyncio.gather(*(server.post("/mutate", pod_review(gpus=n, name=f"p{n}", uid=f"u-{n}"))
                                         for n in range(1, 7)))
        double.faults.clear()
    assert sum(body["response"]["allowed"] for _, body in answers) == 2
    assert len(await _templates(double)) == 2
