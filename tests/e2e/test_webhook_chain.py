"""The double's admission chain calls real TLS webhooks as kube-apiserver does, with the chart's own configurations.

Covers: mutating then validating with the JSONPatch applied; the AdmissionReview request fields; failurePolicy
Fail/Ignore with the webhook down; timeoutSeconds; matchConditions; namespace selection; denials, warnings and
audit annotations; dryRun and sideEffects; reinvocation; invalid responses and an untrusted certificate.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import orjson
import pytest
from e2e_hooks import SERVICE_KEY, chart_configurations, pod
from e2e_servers import Cluster, TlsServer

from gpuclaim.kube import ApiError

PODS = "/api/v1/namespaces/default/pods"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
GPU = {"nvidia.com/gpu": "1"}

def allow(body: dict[str, Any], **response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": body["request"]["uid"], "allowed": True, **response}}


async def convert(body: dict[str, Any]) -> dict[str, Any]:
    """Every container's nvidia.com/gpu limit becomes a claim on one template; idempotent, as the real webhook is."""
    spec = body["request"]["object"]["spec"]
    ops: list[dict[str, Any]] = []
    for i, container in enumerate(spec["containers"]):
        if "nvidia.com/gpu" in container.get("resources", {}).get("limits", {}):
            ops += [{"op": "remove", "path": f"/spec/containers/{i}/resources/limits/nvidia.com~1gpu"},
                    {"op": "add", "path": f"/spec/containers/{i}/resources/claims", "value": [{"name": "gpu"}]}]
    if ops and "resourceClaims" not in spec:
        ops.append({"op": "add", "path": "/spec/resourceClaims",
                    "value": [{"name": "gpu", "resourceClaimTemplateName": "gpuclaim-t"}]})
    if not ops:
        return allow(body)
    return allow(body, patchType="JSONPatch", patch=base64.b64encode(orjson.dumps(ops)).decode())


async def check(body: dict[str, Any]) -> dict[str, Any]:
    obj = body["request"]["object"]
    if (obj["metadata"].get("labels") or {}).get("deny") == "yes":
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": body["request"]["uid"], "allowed": False, "warnings": ["denied on purpose"],
                             "status": {"code": 403, "reason": "Forbidden", "message": "pod asks for 9 GPUs"}}}
    return allow(body, warnings=['claim "gpu": no node offers "x"'], auditAnnotations={"dra-check": "ok"})


async def install(cluster: Cluster, server: TlsServer, *, failure_policy: str = "Fail",
                  edit: Any = None) -> None:
    cluster.chain.services[SERVICE_KEY] = f"127.0.0.1:{server.port}"
    server.routes.update({"/mutate": convert, "/validate": check})
    for config in chart_configurations(ca_bundle=server.ca_bundle, failure_policy=failure_policy):
        if edit is not None:
            edit(config)
        path = MUTATING if config["kind"] == "MutatingWebhookConfiguration" else VALIDATING
        await cluster.client.create(path, config)


def reviews(server: TlsServer, path: str) -> list[dict[str, Any]]:
    return [body["request"] for p, body in server.seen if p == path]


async def test_gpu_pod_is_mutated_then_validated_with_the_patch_applied(cluster: Cluster,
                                                                        tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    created = await cluster.client.create(PODS, pod("train", limits={**GPU, "cpu": "1"}))
    assert created["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpuclaim-t"}]
    assert created["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "claims": [{"name": "gpu"}]}
    (mutate,) = reviews(tls_server, "/mutate")
    (validate,) = reviews(tls_server, "/validate")
    assert mutate["object"]["spec"]["containers"][0]["resources"]["limits"] == {**GPU, "cpu": "1"}
    assert validate["object"]["spec"]["resourceClaims"] == created["spec"]["resourceClaims"]  # sees the patch
    for review in (mutate, validate):
        assert review["kind"] == review["requestKind"] == {"group": "", "version": "v1", "kind": "Pod"}
        assert review["resource"] == {"group": "", "version": "v1", "resource": "pods"}
        assert (review["name"], review["namespace"], review["operation"]) == ("train", "default", "CREATE")
        assert review["userInfo"]["username"] == "kubernetes-admin" and review["dryRun"] is False
        assert review["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        assert review["oldObject"] is None
    assert mutate["uid"] != validate["uid"]
    assert "uid" not in mutate["object"]["metadata"] and "uid" in validate["object"]["metadata"]


async def test_generated_names_are_not_yet_known_to_mutating_webhooks(cluster: Cluster,
                                                                      tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    body = pod("", limits=GPU)
    body["metadata"] = {"generateName": "job-", "namespace": "default"}
    created = await cluster.client.create(PODS, body)
    assert created["metadata"]["name"].startswith("job-") and created["spec"]["resourceClaims"]
    (mutate,) = reviews(tls_server, "/mutate")
    (validate,) = reviews(tls_server, "/validate")
    assert mutate["name"] == "" and "name" not in mutate["object"]["metadata"]
    assert validate["name"] == created["metadata"]["name"]


async def test_plain_pod_never_reaches_the_webhook(cluster: Cluster, tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    await cluster.client.create(PODS, pod("web", limits={"cpu": "1", "memory": "1Gi"}))
    assert tls_server.seen == []
    assert cluster.chain.calls == {}


async def test_webhook_down_with_fail_blocks_only_gpu_pods(cluster: Cluster, tls_server: TlsServer) -> None:
    await install(cluster, tls_server, failure_policy="Fail")
    await tls_server.stop()
    await cluster.client.create(PODS, pod("web", limits={"cpu": "1"}))
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU))
    error = info.value
    assert (error.code, error.reason) == (500, "InternalError")
    assert error.message.startswith('Internal error occurred: failed calling webhook "pods.mutate.gpuclaim.io": '
                                    'failed to call webhook: Post "https://gc-gpuclaim-webhook.gpuclaim-system.svc:443'
                                    '/mutate?timeout=5s": ')
    names = [p["metadata"]["name"] for p in (await cluster.client.list(PODS))["items"]]
    assert names == ["web"]


async def test_webhook_down_with_ignore_lets_gpu_pods_through_unconverted(cluster: Cluster,
                                                                          tls_server: TlsServer) -> None:
    await install(cluster, tls_server, failure_policy="Ignore")
    await tls_server.stop()
    created = await cluster.client.create(PODS, pod("train", limits=GPU))
    assert created["spec"]["containers"][0]["resources"]["limits"] == GPU
    assert "resourceClaims" not in created["spec"]


async def test_timeout_seconds_bounds_the_call(cluster: Cluster, tls_server: TlsServer) -> None:
    def one_second(config: dict[str, Any]) -> None:
        for hook in config["webhooks"]:
            hook["timeoutSeconds"] = 1

    await install(cluster, tls_server, edit=one_second)

    release = asyncio.Event()

    async def stuck(body: dict[str, Any]) -> dict[str, Any]:
        await release.wait()  # answers only after the test is done with it
        return allow(body)

    tls_server.routes["/mutate"] = stuck
    started = time.monotonic()
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU))
    release.set()
    assert time.monotonic() - started < 4
    assert info.value.code == 500 and info.value.message.endswith('/mutate?timeout=1s": context deadline exceeded')


async def test_denial_and_warnings_reach_the_client(cluster: Cluster, tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    status, body, warnings = await cluster.raw("POST", PODS, pod("big", limits=GPU, labels={"deny": "yes"}))
    assert status == 403
    assert body["message"] == 'admission webhook "pods.validate.gpuclaim.io" denied the request: pod asks for 9 GPUs'
    assert (body["reason"], body["code"], body["kind"]) == ("Forbidden", 403, "Status")
    assert warnings == ['299 - "denied on purpose"']
    status, body, warnings = await cluster.raw("POST", PODS, pod("ok", limits=GPU))
    assert status == 201 and warnings == ['299 - "claim \\"gpu\\": no node offers \\"x\\""']
    (record,) = [r for r in cluster.chain.audit if r.name == "ok" and "pods.validate.gpuclaim.io/dra-check" in
                 r.annotations]
    assert record.annotations["pods.validate.gpuclaim.io/dra-check"] == "ok"


async def test_dry_run_creates_nothing_and_says_so_to_the_webhooks(cluster: Cluster, tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    created = await cluster.client.create(PODS, pod("train", limits=GPU), dry_run=True)
    assert created["spec"]["resourceClaims"]
    assert (await cluster.client.list(PODS))["items"] == []
    assert {r["dryRun"] for p in ("/mutate", "/validate") for r in reviews(tls_server, p)} == {True}
    assert reviews(tls_server, "/mutate")[0]["options"]["dryRun"] == ["All"]


async def test_webhook_with_side_effects_refuses_dry_run(cluster: Cluster, tls_server: TlsServer) -> None:
    def unknown(config: dict[str, Any]) -> None:
        for hook in config["webhooks"]:
            hook["sideEffects"] = "Some" if config["kind"].startswith("Mutating") else hook["sideEffects"]

    await install(cluster, tls_server, edit=unknown)
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU), dry_run=True)
    assert (info.value.code, info.value.message) == (
        400, 'admission webhook "pods.mutate.gpuclaim.io" does not support dry run')
    assert tls_server.seen == []


async def test_excluded_namespace_is_never_sent(cluster: Cluster, tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    await cluster.client.create("/api/v1/namespaces/kube-system/pods", pod("dev", limits=GPU, namespace="kube-system"))
    await cluster.client.create(PODS, pod("opt-out", limits=GPU, labels={"gpuclaim.io/webhook": "disabled"}))
    assert tls_server.seen == []


@pytest.mark.parametrize(("response", "reason"), [
    ({"uid": "00000000-0000-0000-0000-000000000000", "allowed": True},
     'received invalid webhook response: expected response.uid="'),
    (None, "received invalid webhook response: webhook response was absent"),
    ({"allowed": True, "patch": "W10="}, "received invalid webhook response: webhook returned response.patch but "
                                         "not response.patchType"),
], ids=["wrong-uid", "no-response", "patch-without-type"])
async def test_invalid_responses_follow_the_failure_policy(cluster: Cluster, tls_server: TlsServer,
                                                           response: dict[str, Any] | None, reason: str) -> None:
    await install(cluster, tls_server)

    async def broken(body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        if response is not None:
            out["response"] = {"uid": body["request"]["uid"], **response}
        return out

    tls_server.routes["/mutate"] = broken
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU))
    assert info.value.code == 500
    assert f'failed calling webhook "pods.mutate.gpuclaim.io": {reason}' in info.value.message


async def test_certificate_not_signed_by_the_ca_bundle_is_refused(cluster: Cluster, tls_server: TlsServer) -> None:
    from gpuclaim.double import tls as selfsigned

    other = selfsigned.issue(tls_server.tls.cert_path.parent / "other")

    def wrong_ca(config: dict[str, Any]) -> None:
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = base64.b64encode(other.ca_pem).decode()

    await install(cluster, tls_server, edit=wrong_ca)
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU))
    assert "certificate verify failed" in info.value.message and tls_server.seen == []


async def test_match_condition_error_follows_the_failure_policy(cluster: Cluster, tls_server: TlsServer) -> None:
    def broken_condition(config: dict[str, Any]) -> None:
        for hook in config["webhooks"]:
            hook["matchConditions"] = [{"name": "typo", "expression": "object.spec.nodeName == 'x'"}]

    await install(cluster, tls_server, edit=broken_condition)
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("train", limits=GPU))
    assert info.value.code == 500 and "failed to evaluate matchConditions: typo: " in info.value.message


async def test_if_needed_webhook_is_reinvoked_once_after_a_later_change(cluster: Cluster,
                                                                        tls_server: TlsServer) -> None:
    await install(cluster, tls_server)
    # a later webhook adds a GPU sidecar: the converter (IfNeeded) must see and convert it too
    label = [{"op": "add", "path": "/metadata/labels", "value": {"sidecar": "added"}},
             {"op": "add", "path": "/spec/containers/-", "value": {"name": "helper", "image": "busybox",
                                                                    "resources": {"limits": GPU}}}]

    async def sidecar(body: dict[str, Any]) -> dict[str, Any]:
        if body["request"]["object"]["metadata"].get("labels"):
            return allow(body)
        return allow(body, patchType="JSONPatch", patch=base64.b64encode(orjson.dumps(label)).decode())

    tls_server.routes["/sidecar"] = sidecar
    later = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "zz-sidecar"},
             "webhooks": [{"name": "sidecar.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                           "clientConfig": {"url": tls_server.url("/sidecar"), "caBundle": tls_server.ca_bundle},
                           "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                      "resources": ["pods"]}]}]}
    await cluster.client.create(MUTATING, later)
    created = await cluster.client.create(PODS, pod("train", limits=GPU))
    assert created["metadata"]["labels"] == {"sidecar": "added"} and created["spec"]["resourceClaims"]
    assert [p for p, _ in tls_server.seen] == ["/mutate", "/sidecar", "/mutate", "/validate"]
    assert reviews(tls_server, "/mutate")[1]["object"]["metadata"]["labels"] == {"sidecar": "added"}
    assert [c["resources"] for c in created["spec"]["containers"]] == [{"limits": {}, "claims": [{"name": "gpu"}]}] * 2
    (record,) = [r for r in cluster.chain.audit if r.operation == "CREATE" and r.name == "train"
                 and any(k.startswith("mutation.") for k in r.annotations)]
    assert sorted(record.annotations) == [f"mutation.webhook.admission.k8s.io/round_{r}_index_{i}"
                                          for r, i in ((0, 0), (0, 1), (1, 0))]
