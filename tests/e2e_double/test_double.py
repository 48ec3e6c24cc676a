
"""The Kubernetes API double: the semantics clients depend on, over TLS on loopback."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes_validate
import pytest
import yaml
from official_schemas import MINORS, assert_valid

from gpuclaim.double.apiserver import AdmissionAttributes, ApiError, Fault, RunningDouble, schemas
from gpuclaim.kube import ApiError as ClientApiError
from gpuclaim.kube import KubeClient, config

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
HOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def _claim(name: str = "c", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, **meta},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}


async def _events(client: KubeClient, path: str, params: dict[str, str], count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with client.stream(path, params={"watch": "true", **params}, silence_timeout=3) as events:
        async for event in events:
            out.append(event)
            if len(out) == count:
                break
    return out


async def _error(call: Any) -> ClientApiError:
    with pytest.raises(ClientApiError) as info:
        await call
    return info.value


async def test_lists_filter_by_label_and_field_selectors(client: KubeClient) -> None:
    for name, zone in (("a", "z1"), ("b", "z2"), ("c", "z1")):
        await client.create(NODES, _node(name, zone=zone))
    names = lambda r: [i["metadata"]["name"] for i in r["items"]]  # noqa: E731
    assert names(await client.list(NODES, params={"labelSelector": "zone=z1"})) == ["a", "c"]
    assert names(await client.list(NODES, params={"labelSelector": "zone in (z2),!missing"})) == ["b"]
    assert names(await client.list(NODES, params={"fieldSelector": "metadata.name!=a"})) == ["b", "c"]
    listed = await client.list(NODES)
    assert listed["kind"] == "NodeList" and "kind" not in listed["items"][0]
    error = await _error(client.list(NODES, params={"fieldSelector": "spec.bogus=1"}))
    assert error.code == 400 and "field label not supported" in error.message


async def test_paged_lists_are_a_consistent_snapshot(client: KubeClient) -> None:
    for i in range(5):
        await client.create(NODES, _node(f"n{i}"))
    first = await client.list(NODES, params={"limit": "2"})
    await client.create(NODES, _node("n9"))  # after the first page: not in this list
    second = await client.list(NODES, params={"limit": "2", "continue": first["metadata"]["continue"]})
    third = await client.list(NODES, params={"limit": "2", "continue": second["metadata"]["continue"]})
    assert [i["metadata"]["name"] for p in (first, second, third) for i in p["items"]] == [f"n{i}" for i in range(5)]
    assert "continue" not in third["metadata"]
    error = await _error(client.list(NODES, params={"limit": "2", "continue": "bogus"}))
    assert error.code == 410


async def test_create_assigns_metadata_and_generate_name(client: KubeClient) -> None:
    created = await client.create(CLAIMS, {**_claim(), "metadata": {"generateName": "pod-gpu-"}})
    meta = created["metadata"]
    assert meta["name"].startswith("pod-gpu-") and len(meta["name"]) == len("pod-gpu-") + 5
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"] and meta["namespace"] == "default"
    assert created["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}  # defaulted
    assert_valid(created)


@pytest.mark.parametrize(("body", "code", "reason", "text"), [
    (_claim("dup"), 409, "AlreadyExists", 'resourceclaims.resource.k8s.io "dup" already exists'),
    ({**_claim("bad"), "spec": {"devices": {"requests": [{"name": "g", "exactly": {"bogus": 1}}]}}}, 422,
     "Invalid", "spec.devices.requests[0].exactly"),
    ({**_claim("x"), "metadata": {"name": "x", "namespace": "other"}}, 400, "BadRequest", "does not match"),
], ids=["name-conflict", "schema-invalid", "namespace-mismatch"])
async def test_bad_creates_get_kubernetes_status_errors(client: KubeClient, body: dict[str, Any], code: int,
                                                        reason: str, text: str) -> None:
    await client.create(CLAIMS, _claim("dup"))
    error = await _error(client.create(CLAIMS, body))
    assert (error.code, error.reason) == (code, reason)
    assert text in error.message
    assert error.status["kind"] == "Status" and error.status["status"] == "Failure"


async def test_missing_objects_and_namespaces_are_404_status(client: KubeClient) -> None:
    error = await _error(client.get(f"{CLAIMS}/nope"))
    assert (error.code, error.reason, error.message) == (404, "NotFound",
                                                         'resourceclaims.resource.k8s.io "nope" not found')
    error = await _error(client.create("/apis/resource.k8s.io/v1/namespaces/ghost/resourceclaims", _claim()))
    assert error.message == 'namespaces "ghost" not found'


async def test_dry_run_stores_nothing(double: RunningDouble, client: KubeClient) -> None:
    await client.create(NODES, _node("dry"), dry_run=True)
    assert (await client.list(NODES))["items"] == []


async def test_stale_updates_conflict_and_no_op_updates_keep_the_version(client: KubeClient) -> None:
    created = await client.create(NODES, _node("n", a="1"))
    updated = await client.update(f"{NODES}/n", {**created, "metadata": {**created["metadata"], "labels": {"a": "2"}}})
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    error = await _error(client.update(f"{NODES}/n", created))  # carries the old resourceVersion
    assert error.code == 409 and "the object has been modified" in error.message
    same = await client.update(f"{NODES}/n", updated)
    assert same["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


async def test_claim_status_goes_through_the_status_subresource_and_spec_is_immutable(client: KubeClient) -> None:
    created = await client.create(CLAIMS, {**_claim(), "status": {"reservedFor": []}})
    assert "status" not in created
    allocation = {"allocation": {"devices": {"results": [
        {"request": "g", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"}]}}}
    ignored = await client.update(f"{CLAIMS}/c", {**created, "status": allocation})
    assert "status" not in ignored
    written = await client.update(f"{CLAIMS}/c/status", {**created, "status": allocation})
    assert written["status"] == allocation
    changed = {**written, "spec": {"devices": {"requests": []}}}
    error = await _error(client.update(f"{CLAIMS}/c", changed))
    assert error.code == 422 and "field is immutable" in error.message


async def test_merge_and_json_patches(client: KubeClient) -> None:
    await client.create(NODES, _node("n", a="1", b="2"))
    merged = await client.patch(f"{NODES}/n", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert merged["metadata"]["labels"] == {"b": "2", "c": "3"}
    patched = await client.patch(f"{NODES}/n", [{"op": "add", "path": "/metadata/labels/d", "value": "4"}],
                                 patch_type="json")
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3", "d": "4"}
    error = await _error(client.patch(f"{NODES}/n", [{"op": "test", "path": "/metadata/labels/b", "value": "x"}],
                                      patch_type="json"))
    assert error.code == 422
    stale = {"metadata": {"resourceVersion": "1", "labels": {"e": "5"}}}
    assert (await _error(client.patch(f"{NODES}/n", stale))).code == 409


async def test_finalizers_hold_a_delete_until_removed(client: KubeClient) -> None:
    await client.create(CLAIMS, _claim(finalizers=["resource.kubernetes.io/delete-protection"]))
    deleting = await client.delete(f"{CLAIMS}/c")
    assert deleting["metadata"]["deletionTimestamp"]
    assert (await client.get(f"{CLAIMS}/c"))["metadata"]["deletionTimestamp"]
    await client.patch(f"{CLAIMS}/c", {"metadata": {"finalizers": None}})
    assert (await _error(client.get(f"{CLAIMS}/c"))).code == 404


async def test_delete_preconditions_on_uid_and_resource_version_are_409_as_in_apimachinery(
        client: KubeClient) -> None:
    created = await client.create(CLAIMS, _claim())
    uid, version = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    wrong_uid = await _error(client.delete(f"{CLAIMS}/c", preconditions={"uid": "other", "resourceVersion": version}))
    assert (wrong_uid.code, wrong_uid.reason) == (409, "Conflict")
    assert wrong_uid.message == (f'Operation cannot be fulfilled on ResourceClaim.resource.k8s.io "c": the UID in the '
                                 f"precondition (other) does not match the UID in record ({uid}). The object might "
                                 "have been deleted and then recreated")  # kube-apiserver 1.34's words
    await client.patch(f"{CLAIMS}/c", {"metadata": {"labels": {"touched": "yes"}}})
    stale = await _error(client.delete(f"{CLAIMS}/c", preconditions={"uid": uid, "resourceVersion": version}))
    assert stale.code == 409 and f"the ResourceVersion in the precondition ({version}) does not match" in stale.message
    current = (await client.get(f"{CLAIMS}/c"))["metadata"]["resourceVersion"]
    await client.delete(f"{CLAIMS}/c", preconditions={"uid": uid, "resourceVersion": current})
    assert (await _error(client.get(f"{CLAIMS}/c"))).code == 404
    bad = await _error(client.request("DELETE", f"{CLAIMS}/x", body={"preconditions": {"uid": 7}}))
    assert bad.code == 400


async def test_leases_are_served_and_validated_against_the_1_34_schema(client: KubeClient) -> None:
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-11-25T03:00:00.000000Z"}}
    created = await client.create(leases, lease)
    assert_valid(created)
    stale = {**created, "spec": {**created["spec"], "holderIdentity": "b"}}
    await client.update(f"{leases}/l", stale)
    assert (await _error(client.update(f"{leases}/l", stale))).code == 409  # the resourceVersion moved on
    invalid = await _error(client.create(leases, {**lease, "metadata": {"name": "m"},
                                                  "spec": {"leaseDurationSeconds": "long"}}))
    assert invalid.code == 422


async def test_watch_replays_from_a_version_and_reports_selector_transitions(client: KubeClient) -> None:
    start = (await client.list(NODES))["metadata"]["resourceVersion"]
    await client.create(NODES, _node("n", zone="a"))
    await client.patch(f"{NODES}/n", {"metadata": {"labels": {"zone": "b"}}})
    await client.delete(f"{NODES}/n")
    everything = await _events(client, NODES, {"resourceVersion": start}, 3)
    assert [e["type"] for e in everything] == ["ADDED", "MODIFIED", "DELETED"]
    in_a = await _events(client, NODES, {"resourceVersion": start, "labelSelector": "zone=a"}, 2)
    assert [e["type"] for e in in_a] == ["ADDED", "DELETED"]  # leaving the selector is a DELETED


async def test_watch_from_zero_lists_first_and_sends_bookmarks(client: KubeClient) -> None:
    await client.create(NODES, _node("n"))
    events = await _events(client, NODES, {"resourceVersion": "0", "allowWatchBookmarks": "true"}, 2)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["kind"] == "Node" and events[1]["object"]["metadata"]["resourceVersion"]


async def test_a_watch_from_a_compacted_version_gets_410_expired(double: RunningDouble, client: KubeClient) -> None:
    start = (await client.list(NODES))["metadata"]["resourceVersion"]
    await client.create(NODES, _node("n"))
    double.store.compact()
    [event] = await _events(client, NODES, {"resourceVersion": start}, 1)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


async def test_history_is_bounded(double: RunningDouble, client: KubeClient) -> None:
    start = (await client.list(NODES))["metadata"]["resourceVersion"]
    for i in range(201):  # the fixture's history holds 200 events
        await client.create(NODES, _node(f"n{i}"))
    [event] = await _events(client, NODES, {"resourceVersion": start}, 1)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


async def test_faults_over_http(double: RunningDouble, client: KubeClient) -> None:
    async with aiohttp.ClientSession() as session:
        ssl_context = client.config.ssl_context()
        url = f"{double.url}/_double/faults"
        fault = {"kind": "status", "code": 429, "retryAfter": 3, "verbs": ["list"], "resources": ["nodes"]}
        async with session.post(url, json=fault, ssl=ssl_context) as response:
            assert response.status == 200
        async with session.post(url, json={"kind": "nonsense"}, ssl=ssl_context) as response:
            assert response.status == 400
    error = await _error(client.list(NODES))
    assert (error.code, error.retry_after) == (429, 3.0)
    await client.list(NODES)  # fired once
    double.faults.add(Fault(kind="status", code=500, verbs=frozenset({"get"})))
    assert (await _error(client.get(f"{NODES}/x"))).code == 500


async def test_a_dropped_watch_ends_after_the_given_number_of_events(double: RunningDouble,
                                                                     client: KubeClient) -> None:
    for i in range(3):
        await client.create(NODES, _node(f"n{i}"))
    double.faults.add(Fault(kind="drop_watch", every=2))
    async with client.stream(NODES, params={"watch": "true", "resourceVersion": "0"}, silence_timeout=3) as events:
        received = [e async for e in events]
    assert len(received) == 2


async def test_webhook_configurations_and_secrets_are_served(client: KubeClient) -> None:
    hook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "gpuclaim"}, "webhooks": [{
                "name": "pods.gpuclaim.dev", "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
                "clientConfig": {"service": {"name": "gpuclaim", "namespace": "gpuclaim"}}}]}
    await client.create(HOOKS, hook)
    await client.patch(f"{HOOKS}/gpuclaim", [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle",
                                              "value": "Y2E="}], patch_type="json")
    assert (await client.get(f"{HOOKS}/gpuclaim"))["webhooks"][0]["clientConfig"]["caBundle"] == "Y2E="
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
              "data": {"tls.crt": "Y2E=", "tls.key": "a2V5"}}
    await client.create("/api/v1/namespaces/default/secrets", secret)
    assert (await client.get("/api/v1/namespaces/default/secrets/tls"))["type"] == "kubernetes.io/tls"


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def mutate(self, attrs: AdmissionAttributes) -> dict[str, Any]:
        self.calls.append(f"mutate {attrs.operation} {attrs.resource.kind} dryRun={attrs.dry_run}")
        return {**attrs.obj, "metadata": {**attrs.obj["metadata"], "labels": {"mutated": "yes"}}}

    async def validate(self, attrs: AdmissionAttributes) -> None:
        self.calls.append(f"validate {attrs.operation} {attrs.obj['metadata'].get('labels')}")
        if attrs.name == "denied":
            raise ApiError(403, 'admission webhook "x" denied the request: no', reason="Forbidden")


async def test_writes_pass_mutating_then_validating_admission(double: RunningDouble, client: KubeClient) -> None:
    recorder = _Recorder()
    double.store.admission = recorder
    created = await client.create(NODES, _node("n"))
    assert created["metadata"]["labels"] == {"mutated": "yes"}
    assert recorder.calls == ["mutate CREATE Node dryRun=False", "validate CREATE {'mutated': 'yes'}"]
    error = await _error(client.create(NODES, _node("denied")))
    assert (error.code, error.reason) == (403, "Forbidden")


@pytest.mark.parametrize("minor", MINORS)
def test_the_cached_validator_agrees_with_kubernetes_validate(minor: str) -> None:
    good = _claim()
    bad = {**_claim(), "spec": {"devices": {"requests": [{"name": "g", "exactly": {"count": "x"}}]}}}
    schemas.validate(good, minor)
    kubernetes_validate.validate(good, f"{minor}.0", strict=True)
    with pytest.raises(schemas.SchemaError) as info:
        schemas.validate(bad, minor)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, f"{minor}.0", strict=True)
    assert info.value.field.startswith("spec.devices.requests[0].exactly")


def test_the_double_checks_writes_with_the_schemas_of_the_minor_it_plays() -> None:
    # DeviceTaintRule is resource.k8s.io/v1 from 1.37 (v1alpha3 before): 1.37's schemas know it, 1.34's do not
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com"},
                     "taint": {"key": "maintenance", "effect": "NoSchedule"}}}
    schemas.validate(rule, "1.37")
    kubernetes_validate.validate(rule, "1.37.0", strict=True)
    with pytest.raises(schemas.SchemaError, match=re.escape("no 1.34 schema for resource.k8s.io/v1/DeviceTaintRule")):
        schemas.validate(rule, "1.34")


async def test_the_process_prints_its_kubeconfig_first_and_serves_tls(tmp_path: Path) -> None:
    (tmp_path / "load").mkdir()
    (tmp_path / "load" / "nodes.yaml").write_text(yaml.safe_dump_all([_node("preloaded"), _claim("c")]))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim.double.apiserver", "--listen", "127.0.0.1:0", "--load", str(tmp_path / "load"),
        "--workdir", str(tmp_path / "work"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        kubeconfig = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
        kube_client = KubeClient(config.from_kubeconfig(kubeconfig))
        try:
            assert kube_client.config.server.startswith("https://127.0.0.1:")
            nodes = await kube_client.list(NODES)
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["preloaded"]
            assert (await kube_client.get(f"{CLAIMS}/c"))["metadata"]["namespace"] == "default"
        finally:
            await kube_client.close()
    finally:
        process.terminate()
        await process.wait()


def test_the_process_rejects_a_bad_load_directory_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node",
                                                       "metadata": {"name": "n"}, "spec": {"bogus": 1}}))
    result = subprocess.run([sys.executable, "-m", "gpuclaim.double.apiserver", "--load", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Node 'n'" in result.stderr and "bogus" in result.stderr
