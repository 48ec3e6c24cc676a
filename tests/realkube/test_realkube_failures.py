"""Failure modes, dryRun and garbage collection on the real control plane, with the chart's registrations.

The chart's defaults: both webhooks failurePolicy Ignore, timeoutSeconds 5, matchConditions that send only GPU
pods; the extender prioritize-only and ignorable. CPU pods must always be created and scheduled; GPU pods follow
the failurePolicy (Ignore: created unconverted — with no device plugin they stay Pending up to 1.35 and are
scheduled by kube-scheduler's own KEP-5004 path from 1.36 on; Fail: refused).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator

import pytest
import yaml
from realkube_cluster import Kube, cpu_pod, gpu_pod

from e2e.kube.api import collection
from gpuclaim.dra import versions

MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpuclaim-webhook"
TIMEOUT_SECONDS = 5  # the chart's default webhook.mutating/validating.timeoutSeconds


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with kube.scratch_namespace("fail") as name:
        yield name


@contextlib.contextmanager
def failure_policy(kube: Kube, policy: str) -> Iterator[None]:
    """The mutating registration with `policy` (the chart's `webhook.mutating.failurePolicy`), restored after."""
    original = kube.api.get(MUTATING)
    changed = {**original, "webhooks": [{**h, "failurePolicy": policy} for h in original["webhooks"]]}
    kube.api.call("PUT", MUTATING, changed)
    # kube-apiserver's admission plugin reads registrations through an informer: a pod created a few milliseconds
    # after the PUT can still meet the old policy (seen: Ignore's two timeouts and a 201 under "Fail")
    time.sleep(1)
    try:
        yield
    finally:
        current = kube.api.get(MUTATING)
        kube.api.call("PUT", MUTATING, {**current, "webhooks": original["webhooks"]})


def create(kube: Kube, obj: dict) -> tuple[int, dict, float]:
    started = time.monotonic()
    status, body = kube.api.request("POST", collection("Pod", obj["metadata"]["namespace"]), obj)
    return status, body, time.monotonic() - started


def assert_cpu_pod_scheduled(kube: Kube, ns: str, name: str) -> float:
    status, body, seconds = create(kube, cpu_pod(name, ns))
    assert status == 201, body
    assert kube.wait_bound(ns, name)["spec"].get("nodeName"), f"CPU pod {name} not scheduled"
    return seconds


def assert_converted_and_scheduled(kube: Kube, ns: str, name: str) -> dict:
    status, body, _ = create(kube, gpu_pod(name, ns))
    assert status == 201, body
    assert body["spec"].get("resourceClaims"), "GPU pod not converted"
    pod = kube.wait_bound(ns, name)
    assert pod["spec"].get("nodeName"), f"GPU pod {name} not scheduled: {pod['status']}"
    # allocated once: the conversion removed the legacy limit, so where KEP-5004 is on (1.36+) the scheduler
    # makes no extended-resource claim beside the pod's own
    assert not (pod.get("status") or {}).get("extendedResourceClaimStatus"), pod["status"]
    owned = [c for c in kube.api.list("ResourceClaim", ns)
             if any(o.get("uid") == pod["metadata"]["uid"] for o in c["metadata"].get("ownerReferences") or ())]
    assert len(owned) == 1 and "resource.kubernetes.io/extended-resource-claim" not in (
        owned[0]["metadata"].get("annotations") or {}), owned
    return pod


def test_webhook_stopped_ignore_cpu_pods_scheduled_gpu_pods_unconverted(kube: Kube, ns: str) -> None:
    """Under Ignore an unconverted GPU pod is stored as written. What happens next is the version's: up to 1.35
    DRAExtendedResource is off and no node advertises nvidia.com/gpu, so it stays Pending; from 1.36 (beta, on;
    GA and locked in 1.37) kube-scheduler serves it itself through the demo's DeviceClass that declares
    `extendedResourceName: nvidia.com/gpu`, with a claim of its own (KEP-5004) — one GPU, never two."""
    with kube.stopped("webhook"):
        assert_cpu_pod_scheduled(kube, ns, "cpu-1")
        status, body, _ = create(kube, gpu_pod("gpu-1", ns))
        assert status == 201, body  # Ignore: admitted as written
        assert not body["spec"].get("resourceClaims")
        assert body["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        if not versions.model_for(kube.minor).gate("DRAExtendedResource"):
            pod = kube.wait_bound(ns, "gpu-1", timeout=3)
            assert not pod["spec"].get("nodeName")  # no node advertises nvidia.com/gpu: Pending, not mis-placed
        else:
            pod = kube.wait_bound(ns, "gpu-1")
            assert pod["spec"].get("nodeName"), f"KEP-5004: the scheduler did not place it: {pod['status']}"
            native = _wait_extended_resource_claim(kube, ns, "gpu-1")
            (result,) = native["status"]["allocation"]["devices"]["results"]
            assert result["request"] == "container-0-request-0" and result["driver"] == "gpu.nvidia.com"
            claims = kube.api.list("ResourceClaim", ns)
            assert [c["metadata"]["name"] for c in claims] == [native["metadata"]["name"]]  # nothing of gpuclaim's
    # back up: GPU pods are converted and scheduled again
    assert_converted_and_scheduled(kube, ns, "gpu-2")


def _wait_extended_resource_claim(kube: Kube, ns: str, pod: str) -> dict:
    """The claim kube-scheduler made for the pod's extended resources, once the pod's status names it."""
    deadline = time.monotonic() + 30
    while True:
        status = kube.api.get(f"{collection('Pod', ns)}/{pod}").get("status") or {}
        name = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if name:
            claim = kube.api.get(f"{collection('ResourceClaim', ns)}/{name}")
            assert name.startswith(f"{pod}-extended-resources-"), name
            assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
            return claim
        assert time.monotonic() < deadline, f"no extendedResourceClaimStatus on {pod}: {status}"
        time.sleep(0.2)


def test_webhook_stopped_fail_refuses_gpu_pods_only(kube: Kube, ns: str) -> None:
    with failure_policy(kube, "Fail"), kube.stopped("webhook"):
        status, body, _ = create(kube, gpu_pod("gpu-1", ns))
        assert status == 500 and "failed calling webhook" in body["message"], body
        assert "pods.mutate.gpuclaim.io" in body["message"]
        assert_cpu_pod_scheduled(kube, ns, "cpu-1")  # matchConditions: never sent, never blocked


def test_webhook_slower_than_its_timeout(kube: Kube, ns: str) -> None:
    with kube.paused("webhook"):
        cpu_seconds = assert_cpu_pod_scheduled(kube, ns, "cpu-1")
        assert cpu_seconds < TIMEOUT_SECONDS / 2, f"a CPU pod waited {cpu_seconds:.1f}s on a hung webhook"
        status, body, gpu_seconds = create(kube, gpu_pod("gpu-1", ns))
        assert status == 201, body  # Ignore: after the timeout, admitted unconverted
        assert not body["spec"].get("resourceClaims")
        # the mutating call times out, then the validating one (the legacy GPU limit is still there)
        assert TIMEOUT_SECONDS - 0.5 <= gpu_seconds <= 2 * TIMEOUT_SECONDS + 5, gpu_seconds
    with failure_policy(kube, "Fail"), kube.paused("webhook"):
        status, body, seconds = create(kube, gpu_pod("gpu-2", ns))
        assert status == 500 and "context deadline exceeded" in body["message"], body
        assert seconds <= TIMEOUT_SECONDS + 5
    assert_converted_and_scheduled(kube, ns, "gpu-3")


def test_extender_stopped_every_pod_is_still_scheduled(kube: Kube, ns: str) -> None:
    with kube.stopped("extender"):
        assert_cpu_pod_scheduled(kube, ns, "cpu-1")
        pod = assert_converted_and_scheduled(kube, ns, "gpu-1")  # ignorable: scheduled without scores
        claims = kube.api.list("ResourceClaim", ns)
        assert len(claims) == 1 and claims[0]["status"]["allocation"]["devices"]["results"]
        assert claims[0]["status"]["reservedFor"][0]["uid"] == pod["metadata"]["uid"]


def test_dry_run_creates_nothing(kube: Kube, ns: str, tmp_path) -> None:
    before = {t["metadata"]["name"] for t in kube.api.list("ResourceClaimTemplate", ns)}
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(gpu_pod("dry", ns, 2)))
    done = subprocess.run([kube.kubectl, "--kubeconfig", kube.kubeconfig, "create", "--dry-run=server", "-o", "yaml",
                           "-f", str(manifest)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    answered = yaml.safe_load(done.stdout)
    template = answered["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]  # converted in the answer
    assert "nvidia.com/gpu" not in answered["spec"]["containers"][0]["resources"].get("limits", {})
    assert kube.api.request("GET", f"{collection('Pod', ns)}/dry")[0] == 404
    after = {t["metadata"]["name"] for t in kube.api.list("ResourceClaimTemplate", ns)}
    assert after == before and template not in after  # sideEffects NoneOnDryRun: no template made
    # the same pod for real makes the template, exactly once
    status, body, _ = create(kube, gpu_pod("real", ns, 2))
    assert status == 201 and body["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == template
    assert {t["metadata"]["name"] for t in kube.api.list("ResourceClaimTemplate", ns)} == before | {template}


def test_deployment_claims_are_garbage_collected_with_the_pods(kube: Kube, ns: str) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "trainer"}},
                 "template": {"metadata": {"labels": {"app": "trainer"}},
                              "spec": gpu_pod("x", ns)["spec"]}}}
    kube.api.create(deployment)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = kube.api.list("Pod", ns)
        claims = kube.api.list("ResourceClaim", ns)
        if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods) and len(claims) == 3 and all(
                (c.get("status") or {}).get("allocation") for c in claims):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"3 scheduled pods with 3 allocated claims: got {len(pods)} pods, {len(claims)} claims")
    uids = {p["metadata"]["uid"] for p in pods}
    owners = {o["uid"] for c in claims for o in c["metadata"]["ownerReferences"] if o["kind"] == "Pod"}
    assert owners == uids  # one claim per pod, owned by it
    assert len({r["device"] + r["pool"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]}) \
        == 3  # three distinct devices
    # delete the Deployment; its pods are bound, so (no kubelet) delete them with grace 0 as a kubelet would confirm
    kube.api.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/trainer", grace=None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pod in kube.api.list("Pod", ns):
            kube.api.delete(f"{collection('Pod', ns)}/{pod['metadata']['name']}")
        if not kube.api.list("Pod", ns) and not kube.api.list("ResourceClaim", ns):
            break
        time.sleep(0.5)
    assert kube.api.list("Pod", ns) == []
    assert kube.api.list("ResourceClaim", ns) == [], "claims not garbage-collected with their pods"


def test_a_template_the_apiserver_refuses_refuses_the_gpu_pod(kube: Kube, ns: str) -> None:
    """Issue 22, item 2: a full `count/resourceclaimtemplates` quota made the template create fail with 403, which
    the webhook took for an outage; the chart's internalErrorPolicy.mutate (allow) then admitted the GPU pod with
    its legacy limit. Now the pod is refused with the apiserver's code and message; CPU pods are untouched."""
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-templates", "namespace": ns},
             "spec": {"hard": {"count/resourceclaimtemplates.resource.k8s.io": "0"}}}
    quotas = f"/api/v1/namespaces/{ns}/resourcequotas"
    kube.api.call("POST", quotas, quota)
    deadline = time.monotonic() + 30
    while not (kube.api.get(f"{quotas}/no-templates").get("status") or {}).get("hard"):
        assert time.monotonic() < deadline, "the quota controller never filled in the quota's status"
        time.sleep(0.2)
    status, body, _ = create(kube, gpu_pod("gpu-quota", ns))
    assert status == 403, body
    assert "gpuclaim could not create" in body["message"] and "exceeded quota: no-templates" in body["message"]
    assert kube.api.list("Pod", ns) == [] and kube.api.list("ResourceClaimTemplate", ns) == []
    assert_cpu_pod_scheduled(kube, ns, "cpu-quota")


def test_a_required_affinity_of_many_products_is_converted_and_the_apiserver_takes_the_template(
        kube: Kube, ns: str) -> None:
    """Issue 22, item 2: 400 product names would make a selector past the apiserver's 10 KiB; the conversion leaves
    that affinity as a node constraint and writes no such selector, so the template is created and the pod
    converted, never admitted with its legacy limit."""
    pod = gpu_pod("gpu-many-products", ns)
    values = [f"NVIDIA-H100-80GB-HBM3-REV{i:04d}" for i in range(400)]
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": values}]}]}}}
    status, body, _ = create(kube, pod)
    assert status == 201, body
    assert body["spec"].get("resourceClaims"), "GPU pod not converted"
    assert "nvidia.com/gpu" not in body["spec"]["containers"][0]["resources"].get("limits", {})
    assert body["spec"]["affinity"] == pod["spec"]["affinity"]
    (template,) = kube.api.list("ResourceClaimTemplate", ns)
    assert "productName" not in str(template["spec"])


def test_the_webhook_answers_only_the_apiservers_client_certificate(kube: Kube, ns: str) -> None:
    """Issue 22, item 6: the chart turns client authentication on by default; e2e.kube configures kube-apiserver's
    admission client certificate as docs/hardening.md tells an admin. A review POSTed by anyone else is refused
    (401); the apiserver's own calls go through: a GPU pod is converted."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=str(kube.run / "tls" / "ca.crt"))
    context.check_hostname = False
    port = kube.state["gpuclaimPorts"]["webhook"]
    forged = urllib.request.Request(f"https://127.0.0.1:{port}/mutate", data=b"{}", method="POST",
                                    headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, context=context, timeout=5)
    refused.value.close()
    assert refused.value.code == 401
    assert_converted_and_scheduled(kube, ns, "gpu-authenticated")
