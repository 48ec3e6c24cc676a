"""The real `gpuclaim webhook` and `gpuclaim extender` processes in the double's chain and the scheduler double:
legacy pods converted, denials and dry runs as a user sees them, scheduling with the extender's scores, and what
happens when either process dies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e_fleet import P4D, P5_A, P5_B, load_fleet
from e2e_hooks import SERVICE_HOST, SERVICE_KEY, chart_configurations, pod
from e2e_processes import Server, start
from e2e_servers import Cluster
from official_schemas import assert_valid

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.controllers import ResourceClaimController
from gpuclaim.double.scheduler import Scheduler
from gpuclaim.kube import ApiError

PODS = "/api/v1/namespaces/default/pods"
TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@pytest.fixture
def tls(tmp_path: Path) -> selfsigned.TlsFiles:
    return selfsigned.issue(tmp_path / "serving", hosts=("127.0.0.1", "localhost", SERVICE_HOST))


@pytest.fixture
async def webhook(cluster: Cluster, tls: selfsigned.TlsFiles, tmp_path: Path) -> AsyncIterator[Server]:
    load_fleet(cluster.store)
    server = await start("webhook", tls=tls, kubeconfig=cluster.double.kubeconfig, workdir=tmp_path)
    cluster.chain.services[SERVICE_KEY] = f"127.0.0.1:{server.port}"
    ca_bundle = selfsigned_ca_b64(tls)
    for config in chart_configurations(ca_bundle=ca_bundle, failure_policy="Fail"):
        await cluster.client.create(MUTATING if config["kind"].startswith("Mutating") else VALIDATING, config)
    yield server
    await server.stop()


def selfsigned_ca_b64(tls: selfsigned.TlsFiles) -> str:
    import base64

    return base64.b64encode(tls.ca_pem).decode()


def extender_config(server: Server, tls: selfsigned.TlsFiles) -> dict[str, Any]:
    """What the chart's KubeSchedulerConfiguration says (prioritize only, ignorable), pointed at the process."""
    return {"urlPrefix": server.url, "prioritizeVerb": "prioritize", "weight": 5, "nodeCacheCapable": True,
            "ignorable": True, "enableHTTPS": True, "tlsConfig": {"caData": selfsigned_ca_b64(tls)},
            "httpTimeout": "5s"}


async def admitted(cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
    created = await cluster.client.create(PODS, body)
    assert_valid(created)
    return created


async def test_legacy_pods_are_converted_and_scheduled_with_the_extenders_scores(
        cluster: Cluster, webhook: Server, tls: selfsigned.TlsFiles, tmp_path: Path) -> None:
    extender = await start("extender", tls=tls, kubeconfig=cluster.double.kubeconfig, workdir=tmp_path)
    try:
        one = await admitted(cluster, pod("one-gpu", limits={"nvidia.com/gpu": "1"}))
        four = await admitted(cluster, pod("train", limits={"nvidia.com/gpu": "4"}))
        plain = await admitted(cluster, pod("web", limits={"cpu": "1"}))
        for converted in (one, four):
            limits = converted["spec"]["containers"][0]["resources"].get("limits") or {}
            assert "nvidia.com/gpu" not in limits and converted["spec"]["resourceClaims"]
        assert "resourceClaims" not in plain["spec"]
        templates = {t["metadata"]["name"]: t for t in (await cluster.client.list(TEMPLATES))["items"]}
        for converted in (one, four):
            (entry,) = converted["spec"]["resourceClaims"]
            assert entry["resourceClaimTemplateName"] in templates
        await ResourceClaimController(cluster.client).sync_once()
        scheduler = Scheduler(cluster.client, extenders=[extender_config(extender, tls)])
        decisions = {d.name: d for d in await scheduler.schedule_pending()}
        await scheduler.close()
        assert {d.outcome for d in decisions.values()} == {"scheduled"}, [d.to_dict() for d in decisions.values()]
        for name in ("one-gpu", "train"):
            assert decisions[name].extender_scores[extender.url].keys() <= {P4D, P5_A, P5_B}
        assert sum(len(r) for r in decisions["train"].devices.values()) == 4
        assert decisions["web"].devices == {}
    finally:
        await extender.stop()


async def test_denials_and_dry_runs_through_the_real_webhook(cluster: Cluster, webhook: Server) -> None:
    broken = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "broken"},
              "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                  "deviceClassName": "gpu.nvidia.com",
                  "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].memory >= 40"}}]}}]}}}
    with pytest.raises(ApiError) as info:
        await cluster.client.create(CLAIMS, broken)
    assert info.value.message.startswith('admission webhook "dra.validate.gpuclaim.io" denied the request: ')
    assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in info.value.message
    created = await cluster.client.create(PODS, pod("dry", limits={"nvidia.com/gpu": "2"}), dry_run=True)
    assert created["spec"]["resourceClaims"]
    assert (await cluster.client.list(PODS))["items"] == []
    assert (await cluster.client.list(TEMPLATES))["items"] == []  # sideEffects: NoneOnDryRun honoured


async def test_webhook_process_killed_blocks_only_gpu_pods(cluster: Cluster, webhook: Server) -> None:
    await admitted(cluster, pod("before", limits={"nvidia.com/gpu": "1"}))
    webhook.proc.kill()
    await webhook.proc.wait()
    with pytest.raises(ApiError) as info:
        await cluster.client.create(PODS, pod("after", limits={"nvidia.com/gpu": "1"}))
    assert info.value.code == 500 and 'failed calling webhook "pods.mutate.gpuclaim.io"' in info.value.message
    await admitted(cluster, pod("plain", limits={"cpu": "1"}))
    names = sorted(p["metadata"]["name"] for p in (await cluster.client.list(PODS))["items"])
    assert names == ["before", "plain"]
