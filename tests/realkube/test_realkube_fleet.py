"""The fleet API against a real control plane: real TokenReview and SubjectAccessReview, ServiceAccount tokens
from TokenRequest, real RBAC, and the pods the real scheduler placed (one run per minor under test).

The fleet app runs in the test (fed by a kube cache on the cluster, as the extender's is) and asks the real
apiserver about each viewer: a cluster-wide viewer, a viewer bound in one namespace, an account without rights.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry
from realkube_cluster import Kube, gpu_pod

from e2e.kube.api import collection
from gpuclaim.commands._config import load_config_file
from gpuclaim.extender.view import extender_specs
from gpuclaim.fleet import access, api, model
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.cache import ClusterCache
from gpuclaim.kube.client import KubeClient
from gpuclaim.kube.version import ClusterVersion

RBAC = "rbac.authorization.k8s.io"
HOSTILE = ["driver=Bad_Driver", "namespace=NOT-A-NS", "since=-3", "nodeSelector=a%20in%20(b", "x=1",
           "driver=a.b&driver=c.d", "model=" + "m" * 300, "nodeSelector=%00", "since=1e9"]


def _token(kube: Kube, ns: str, name: str) -> str:
    kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": ns, "name": name}})
    answer = kube.api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(answer["status"]["token"])


def _rbac(kube: Kube, role: str, ns_a: str, admin: str, viewer: str) -> list[str]:
    kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": role},
                     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                               {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]}]})
    ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}
    kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
                     "roleRef": ref, "subjects": [{"kind": "ServiceAccount", "namespace": ns_a, "name": admin}]})
    kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": {"namespace": ns_a, "name": role},
                     "roleRef": ref, "subjects": [{"kind": "ServiceAccount", "namespace": ns_a, "name": viewer}]})
    return [f"/apis/{RBAC}/v1/clusterrolebindings/{role}", f"/apis/{RBAC}/v1/clusterroles/{role}"]


async def _ask(kube: Kube, tokens: dict[str, str], claims: dict[str, dict[str, Any]], ns_a: str, ns_b: str) -> None:
    client = KubeClient(kube_config.from_kubeconfig(Path(kube.kubeconfig)), timeout=10.0)
    registry = CollectorRegistry()
    config = load_config_file(Path(kube.config_path))
    cache = ClusterCache(client, registry=registry, rng=random.Random(1), specs=extender_specs(config),
                         version=ClusterVersion(config.kubernetes, registry=registry))
    index = model.FleetIndex(config)
    cache.subscribe(index.on_event)
    app = api.create_app(config, index=index, access=api.access_from(config, access.KubeReviewer(client)))
    server = TestServer(app)
    await cache.start()
    try:
        await cache.wait_synced(30)
        await server.start_server()
        async with aiohttp.ClientSession(str(server.make_url(""))) as http:
            async def get(token: str | None, query: str = "") -> tuple[int, bytes]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with http.get(f"/api/v1/fleet{'?' + query if query else ''}", headers=headers) as r:
                    return r.status, await r.read()

            assert (await get(None))[0] == 401
            assert (await get("not-a-token"))[0] == 401
            status, body = await get(tokens["none"])
            assert status == 403, body
            status, body = await get(tokens["admin"])
            assert status == 200, body
            fleet = orjson.loads(body)
            assert fleet["scope"]["clusterWide"] and fleet["revision"] > 0
            devices = {(d["driver"], d["pool"], d["name"]): d for n in fleet["nodes"] for g in n["groups"]
                       for d in g["devices"]}
            for ns, claim in claims.items():
                pod = {"namespace": ns, "name": claim["pod"]}
                for result in claim["results"]:
                    device = devices[(result["driver"], result["pool"], result["device"])]
                    assert device["state"] == "allocated" and pod in device["pods"], device
            status, body = await get(tokens["viewer"])
            assert status == 200, body
            fleet = orjson.loads(body)
            assert fleet["scope"]["clusterWide"] is False and ns_a in fleet["scope"]["namespaces"]
            assert ns_b not in fleet["scope"]["namespaces"] and ns_b.encode() not in body
            seen = {(d["driver"], d["pool"], d["name"]): d for n in fleet["nodes"] for g in n["groups"]
                    for d in g["devices"]}
            for result in claims[ns_b]["results"]:
                hidden = seen[(result["driver"], result["pool"], result["device"])]
                assert hidden["redacted"] and hidden["pods"] == [] and hidden["state"] == "allocated"
            for result in claims[ns_a]["results"]:
                mine = seen[(result["driver"], result["pool"], result["device"])]
                assert {"namespace": ns_a, "name": claims[ns_a]["pod"]} in mine["pods"]
            status, body = await get(tokens["viewer"], urlencode({"namespace": ns_b}))
            assert status == 403 and orjson.loads(body)["parameter"] == "namespace"
            for query in HOSTILE:
                status, body = await get(tokens["admin"], query)
                error = orjson.loads(body)
                assert status == 400 and error["message"].startswith(f"{error['parameter']}: "), (query, body)
    finally:
        await server.close()
        await cache.stop()
        await client.close()


def _allocation(kube: Kube, ns: str, pod: str) -> dict[str, Any]:
    bound = kube.wait_bound(ns, pod, timeout=60)
    assert bound["spec"].get("nodeName"), bound.get("status")
    for claim in kube.api.list("ResourceClaim", ns):
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        if results:
            return {"pod": pod, "results": results}
    raise AssertionError(f"no allocated claim in {ns}")


def test_fleet_access_follows_real_rbac_and_shows_the_scheduled_pods(kube: Kube) -> None:
    role = f"fleet-viewer-{uuid.uuid4().hex[:6]}"
    with kube.scratch_namespace("fleet-a") as ns_a, kube.scratch_namespace("fleet-b") as ns_b:
        for ns in (ns_a, ns_b):
            status, created = kube.api.request("POST", collection("Pod", ns), gpu_pod("trainer", ns, 1))
            assert status == 201, created
        claims = {ns: _allocation(kube, ns, "trainer") for ns in (ns_a, ns_b)}
        tokens = {"admin": _token(kube, ns_a, "fleet-admin"), "viewer": _token(kube, ns_a, "fleet-viewer"),
                  "none": _token(kube, ns_b, "no-rights")}
        cleanup = _rbac(kube, role, ns_a, "fleet-admin", "fleet-viewer")
        try:
            asyncio.run(_ask(kube, tokens, claims, ns_a, ns_b))
        finally:
            for path in cleanup:
                kube.api.delete(path, grace=None)
