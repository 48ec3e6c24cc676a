"""The double's TokenRequest, TokenReview and SubjectAccessReview: RBAC decided from the objects it stores."""

from __future__ import annotations

from typing import Any

import pytest

from gpuclaim.demo import viewers
from gpuclaim.double.apiserver import Store, create_app

RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
async def api(aiohttp_client: Any) -> Any:
    client = await aiohttp_client(create_app(Store()))
    for ns in ("gpuclaim", "ml-team", "ops-debug", "research"):
        r = await client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": ns}})
        assert r.status == 201, await r.text()
    for obj in viewers.objects():
        r = await client.post(viewers.path_of(obj), json=obj)
        assert r.status == 201, await r.text()
    return client


async def token(api: Any, ns: str, name: str) -> str:
    r = await api.post(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", json={"spec": {}})
    assert r.status == 201, await r.text()
    return str((await r.json())["status"]["token"])


async def review(api: Any, tok: str) -> dict[str, Any]:
    r = await api.post("/apis/authentication.k8s.io/v1/tokenreviews", json={"spec": {"token": tok}})
    assert r.status == 201
    return dict((await r.json())["status"])


async def allowed(api: Any, user: dict[str, Any], **attrs: str) -> bool:
    r = await api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                       json={"spec": {"user": user["username"], "groups": user["groups"], "resourceAttributes": attrs}})
    assert r.status == 201, await r.text()
    return bool((await r.json())["status"]["allowed"])


async def test_issued_tokens_authenticate_as_their_service_account(api: Any) -> None:
    status = await review(api, await token(api, "ml-team", "fleet-viewer"))
    assert status["authenticated"]
    assert status["user"]["username"] == "system:serviceaccount:ml-team:fleet-viewer"
    assert "system:serviceaccounts:ml-team" in status["user"]["groups"]
    assert not (await review(api, "made-up"))["authenticated"]
    r = await api.post("/api/v1/namespaces/ml-team/serviceaccounts/nobody/token", json={})
    assert r.status == 404


async def test_rbac_follows_bindings_roles_and_scopes(api: Any) -> None:
    admin = (await review(api, await token(api, "gpuclaim", "fleet-admin")))["user"]
    team = (await review(api, await token(api, "ml-team", "fleet-viewer")))["user"]
    none = (await review(api, await token(api, "ops-debug", "no-rights")))["user"]
    assert await allowed(api, admin, verb="list", resource="pods")
    assert await allowed(api, admin, verb="list", group="resource.k8s.io", resource="resourceclaims")
    assert not await allowed(api, admin, verb="delete", resource="pods")
    assert not await allowed(api, admin, verb="list", resource="secrets")
    assert not await allowed(api, team, verb="list", resource="pods")  # cluster scope: a RoleBinding is not enough
    assert await allowed(api, team, verb="list", resource="pods", namespace="ml-team")
    assert not await allowed(api, team, verb="list", resource="pods", namespace="research")
    assert not await allowed(api, none, verb="list", resource="pods", namespace="ops-debug")
    # resourceNames narrow a rule to the objects named
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"namespace": "ops-debug", "name": "one-pod"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p1"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"namespace": "ops-debug", "name": "one-pod"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one-pod"},
               "subjects": [{"kind": "Group", "name": "system:serviceaccounts:ops-debug"}]}
    assert (await api.post(f"{RBAC}/namespaces/ops-debug/roles", json=role)).status == 201
    assert (await api.post(f"{RBAC}/namespaces/ops-debug/rolebindings", json=binding)).status == 201
    assert await allowed(api, none, verb="get", resource="pods", namespace="ops-debug", name="p1")
    assert not await allowed(api, none, verb="get", resource="pods", namespace="ops-debug", name="p2")
    assert not await allowed(api, none, verb="list", resource="pods", namespace="ops-debug")
    # deleting the binding takes the right away
    assert (await api.delete(f"{RBAC}/namespaces/ops-debug/rolebindings/one-pod")).status == 200
    assert not await allowed(api, none, verb="get", resource="pods", namespace="ops-debug", name="p1")


async def test_bad_reviews_are_refused_naming_the_field(api: Any) -> None:
    r = await api.post("/apis/authentication.k8s.io/v1/tokenreviews", json={"spec": {}})
    assert r.status == 422 and "spec.token" in (await r.json())["message"]
    r = await api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json={"spec": {"user": "x"}})
    assert r.status == 422 and "spec.resourceAttributes" in (await r.json())["message"]
    r = await api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", data=b"{")
    assert r.status == 400
