"""What the API double serves for kubectl: /version, discovery (aggregated and legacy), Tables, OpenAPI v3 paths,
the strategic merge patch, and clear refusals (406, 415, 400) for what it does not serve. Through the app factory
the servers use; tests/e2e/test_kubectl.py runs the real kubectl on top of it."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from gpuclaim.double.apiserver import RESOURCE_TYPES, Store, create_app, discovery, patches, tables

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_DISCOVERY = f"{V2},application/json"
KUBECTL_GET = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io," \
              "application/json"
PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    containers = [{"name": "main", "image": "busybox", "ports": [{"containerPort": 80, "name": "http"}]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": containers, **spec}}


@pytest.fixture
async def api(aiohttp_client: Any) -> Any:
    return await aiohttp_client(create_app(Store(clock=lambda: 1_800_000_000.0)))


async def _get(api: Any, path: str, accept: str = "application/json", **params: str) -> tuple[int, Any, str]:
    response = await api.get(path, headers={"Accept": accept}, params=params)
    return response.status, await response.json(content_type=None), response.headers["Content-Type"]


async def test_version_claims_the_newest_release_and_says_it_is_the_double(api: Any) -> None:
    status, body, _ = await _get(api, "/version")
    assert status == 200
    assert (body["major"], body["minor"], body["gitVersion"]) == ("1", "37", "v1.37.2+gpuclaim-double")
    assert "not a kube-apiserver" in body["platform"]


async def test_aggregated_discovery_lists_every_served_kind_once_with_the_doubles_verbs(api: Any) -> None:
    status, core, content_type = await _get(api, "/api", KUBECTL_DISCOVERY)
    assert status == 200 and content_type == V2
    _, groups, _ = await _get(api, "/apis", KUBECTL_DISCOVERY)
    served = {}
    for item in core["items"] + groups["items"]:
        for version in item["versions"]:
            for resource in version["resources"]:
                served[(item["metadata"].get("name", ""), version["version"], resource["resource"])] = resource
    assert set(served) == {(rt.group, rt.version, rt.plural) for rt in RESOURCE_TYPES}
    pods = served[("", "v1", "pods")]
    assert pods["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
    assert (pods["scope"], pods["shortNames"], pods["categories"]) == ("Namespaced", ["po"], ["all"])
    assert pods["subresources"] == [{"subresource": "status", "responseKind": pods["responseKind"],
                                     "verbs": ["get", "patch", "update"]}]
    assert served[("resource.k8s.io", "v1", "resourceslices")]["scope"] == "Cluster"


async def test_legacy_discovery_when_the_client_asks_for_plain_json(api: Any) -> None:
    _, versions, content_type = await _get(api, "/api")
    assert content_type.startswith("application/json") and versions["versions"] == ["v1"]
    _, groups, _ = await _get(api, "/apis")
    assert {g["name"] for g in groups["groups"]} == {"resource.k8s.io", "coordination.k8s.io",
                                                      "admissionregistration.k8s.io", "rbac.authorization.k8s.io"}
    _, resources, _ = await _get(api, "/apis/resource.k8s.io/v1")
    assert resources["groupVersion"] == "resource.k8s.io/v1"
    assert {r["name"] for r in resources["resources"]} == {"resourceslices", "resourceclaims",
                                                           "resourceclaims/status", "resourceclaimtemplates",
                                                           "deviceclasses", "devicetaintrules",
                                                           "devicetaintrules/status"}
    _, group, _ = await _get(api, "/apis/coordination.k8s.io")
    assert group["preferredVersion"] == {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}


@pytest.mark.parametrize("path", ["/apis/apps/v1", "/apis/resource.k8s.io/v1beta2", "/apis/apps", "/api/v2"],
                         ids=["group", "version", "group-only", "core-version"])
async def test_what_is_not_served_is_a_404_status_that_says_so(api: Any, path: str) -> None:
    status, body, _ = await _get(api, path)
    assert status == 404 and body["kind"] == "Status" and "does not serve" in body["message"]


async def test_get_as_table_has_the_1_37_pod_columns_and_metadata_rows(api: Any) -> None:
    assert (await api.post(PODS, json=_pod("a", nodeName="n1"))).status == 201
    status, table, _ = await _get(api, PODS, KUBECTL_GET)
    assert status == 200 and (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    assert [c["priority"] for c in table["columnDefinitions"]][4:] == [0, 1, 1, 1, 1]
    (row,) = table["rows"]
    assert row["cells"] == ["a", "0/1", "Pending", "0", "0s", "<none>", "n1", "<none>", "<none>"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "a"
    assert table["metadata"]["resourceVersion"]
    _, single, _ = await _get(api, f"{PODS}/a", KUBECTL_GET, includeObject="None")
    assert "object" not in single["rows"][0]


def test_table_ages_and_claim_states_read_as_kubectl_prints_them() -> None:
    assert [tables.human_duration(s) for s in (5, 119, 125, 600, 3 * 3600 + 60, 50 * 3600, 800 * 86400)] == [
        "5s", "119s", "2m5s", "10m", "3h1m", "2d2h", "2y70d"]
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {}, "reservedFor": [{"name": "p"}]}}
    assert tables._claim_state(claim) == "allocated,reserved"
    assert tables._claim_state({"metadata": {"deletionTimestamp": "x"}}) == "deleted"


async def test_an_accept_the_double_cannot_serve_is_406_naming_it(api: Any) -> None:
    status, body, _ = await _get(api, PODS, "application/vnd.kubernetes.protobuf")
    assert status == 406 and "application/vnd.kubernetes.protobuf" in body["message"]
    status, body, _ = await _get(api, PODS, "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
    assert status == 406 and body["reason"] == "NotAcceptable"
    status, _, _ = await _get(api, PODS, "application/vnd.kubernetes.protobuf,application/json")
    assert status == 200  # the client's fallback is served


async def test_a_bad_include_object_is_400(api: Any) -> None:
    status, body, _ = await _get(api, PODS, KUBECTL_GET, includeObject="Everything")
    assert status == 400 and "includeObject" in body["message"]


async def test_openapi_v3_says_patch_takes_field_validation_and_holds_the_schemas(api: Any) -> None:
    _, index, _ = await _get(api, "/openapi/v3")
    assert set(index["paths"]) == {"api/v1", "apis/resource.k8s.io/v1", "apis/coordination.k8s.io/v1",
                                   "apis/admissionregistration.k8s.io/v1", "apis/rbac.authorization.k8s.io/v1"}
    kinds = set()
    for entry in index["paths"].values():
        _, doc, _ = await _get(api, entry["serverRelativeURL"])
        for item in doc["paths"].values():
            gvk = item["patch"]["x-kubernetes-group-version-kind"]
            assert "fieldValidation" in {p["name"] for p in item["patch"]["parameters"] if p["in"] == "query"}
            kinds.add((gvk["group"], gvk["kind"]))
    assert kinds == {(rt.group, rt.kind) for rt in RESOURCE_TYPES}
    _, core, _ = await _get(api, index["paths"]["api/v1"]["serverRelativeURL"])
    pod = core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]  # what `kubectl explain` looks up
    assert {"group": "", "kind": "Pod", "version": "v1"} in pod["x-kubernetes-group-version-kind"]
    assert pod["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]
    assert pod["properties"]["apiVersion"]["type"] == "string"
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', str(orjson.dumps(core))))
    assert refs <= set(core["components"]["schemas"]), "every $ref resolves inside the document"
    status, body, _ = await _get(api, "/openapi/v2")
    assert status == 404 and "does not serve /openapi/v2" in body["message"]


async def test_field_validation_values_are_checked(api: Any) -> None:
    response = await api.post(PODS, json=_pod(), params={"fieldValidation": "Lenient"})
    assert response.status == 400 and "fieldValidation" in (await response.json())["message"]
    assert (await api.post(PODS, json=_pod(), params={"fieldValidation": "Strict"})).status == 201


async def _patch(api: Any, body: Any, content_type: str) -> tuple[int, Any]:
    response = await api.patch(f"{PODS}/p", json=body, headers={"Content-Type": content_type})
    return response.status, await response.json()


async def test_a_strategic_merge_patch_merges_containers_by_name_and_keeps_the_rest(api: Any) -> None:
    await api.post(PODS, json=_pod(tolerations=[{"key": "a", "operator": "Exists"}]))
    smp = "application/strategic-merge-patch+json"
    patch = {"metadata": {"labels": {"tier": "gpu"}},
             "spec": {"$setElementOrder/containers": [{"name": "main"}],
                      "containers": [{"name": "main", "image": "busybox:2"}]}}
    status, pod = await _patch(api, patch, smp)
    assert status == 200, pod
    assert pod["metadata"]["labels"] == {"app": "p", "tier": "gpu"}
    (container,) = pod["spec"]["containers"]
    assert (container["image"], container["ports"]) == ("busybox:2", [{"containerPort": 80, "name": "http"}])
    assert pod["spec"]["tolerations"] == [{"key": "a", "operator": "Exists"}]  # no merge key: replaced only if sent
    status, pod = await _patch(api, {"spec": {"containers": [{"name": "side", "image": "x"}]}}, smp)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "side"]
    status, pod = await _patch(api, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}, smp)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main"]


@pytest.mark.parametrize(("body", "fragment"), [
    ({"spec": {"containers": ["main"]}}, "spec.containers: every element must be an object with the merge key"),
    ({"metadata": {"$patch": "shuffle"}}, "metadata: unknown $patch directive 'shuffle'"),
    ({"$patch": "delete"}, "cannot delete the whole object"),
    ({"metadata": "x"}, "metadata: must be an object"),
], ids=["list-without-merge-key", "unknown-directive", "delete-everything", "metadata-not-an-object"])
async def test_a_bad_strategic_merge_patch_is_a_4xx_naming_the_field(api: Any, body: Any, fragment: str) -> None:
    await api.post(PODS, json=_pod())
    status, answer = await _patch(api, body, "application/strategic-merge-patch+json")
    assert 400 <= status < 500 and fragment in answer["message"], answer


async def test_server_side_apply_is_refused_by_name(api: Any) -> None:
    await api.post(PODS, json=_pod())
    status, answer = await _patch(api, _pod(), "application/apply-patch+yaml")
    assert status == 415 and "does not serve server-side apply" in answer["message"]


def test_the_merge_key_metadata_comes_from_the_schemas() -> None:
    current = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
               "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}]}}
    patched = patches.strategic_merge_patch(current, {"status": {"conditions": [{"type": "Ready",
                                                                                  "status": "True"}]}})
    assert patched["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]
    assert discovery.GIT_VERSION.startswith(discovery.KUBERNETES_VERSION)


@pytest.mark.parametrize(("path", "named"), [
    ("/apis/apps/v1/namespaces/default/deployments", "apps/v1 deployments"),
    ("/api/v1/namespaces/default/services", "v1 services"),
    ("/api/v1/nodes/n1/proxy", "the proxy subresource of nodes"),
    (f"{PODS}/p/log", "the log subresource of pods"),
], ids=["group-kind", "core-kind", "node-proxy", "pod-log"])
async def test_an_object_path_the_double_does_not_serve_is_a_404_naming_it(api: Any, path: str, named: str) -> None:
    status, body, _ = await _get(api, path)
    assert status == 404
    assert body["message"].startswith("the server could not find the requested resource: ")
    assert f"does not serve {named} " in body["message"]
