"""/healthz, /readyz (certs, the cluster view from the API double, shutdown) and /metrics on its own port."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from server_helpers import Server, StandInChecks, make_config, pod_review, reloader_for
from server_helpers import serving as serving_tls

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import Settings, Store, serve
from gpuclaim.kube import config as kube_config
from gpuclaim.serving import run as serving
from gpuclaim.serving.metrics import create_metrics_app
from gpuclaim.webhook import app, keys


async def test_healthz_answers_ok(server: Server) -> None:
    assert await server.get("/healthz") == (200, "ok\n")


async def test_readyz_without_a_cluster_is_ready_and_says_the_cluster_view_is_absent(server: Server) -> None:
    status, text = await server.get("/readyz")
    assert status == 200
    assert "[+] certs: loaded" in text and "[+] cluster: absent" in text


async def test_readyz_turns_503_when_shutdown_begins(server: Server) -> None:
    server.app[serving.LIFECYCLE].stopping = True
    status, text = await server.get("/readyz")
    assert status == 503 and "[-] shutdown: stopping" in text


async def test_readyz_follows_the_cluster_view_from_unsynced_to_synced(
        tls_files: selfsigned.TlsFiles, tmp_path: Path) -> None:
    double = await serve(store=Store(), workdir=tmp_path, settings=Settings(bookmark_interval=0.2))
    application = app.create_app(make_config(), checks=StandInChecks(), reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(double.kubeconfig))
    try:
        async with serving_tls(application, tls_files) as server:
            for _ in range(100):
                status, text = await server.get("/readyz")
                if status == 200:
                    break
                await asyncio.sleep(0.05)
            assert status == 200 and "[+] cluster: synced" in text
            # the cluster view's own metrics share the webhook's registry
            registry = application[keys.REGISTRY]
            assert registry.get_sample_value("gpuclaim_kube_synced") == 1
    finally:
        await double.close()


async def test_readyz_reports_an_unreachable_cluster_as_not_synced(
        tls_files: selfsigned.TlsFiles, tmp_path: Path) -> None:
    from gpuclaim.double.apiserver import write_kubeconfig

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url="https://127.0.0.1:9", ca_pem=tls_files.ca_pem)
    application = app.create_app(make_config(), checks=StandInChecks(), reloader=reloader_for(tls_files),
                                 kube_config=kube_config.from_kubeconfig(kubeconfig))
    async with serving_tls(application, tls_files) as server:
        status, text = await server.get("/readyz")
        assert status == 503
        assert "[-] cluster: not synced: no initial list yet of" in text
        # admission still answers: a cluster outage must not block pods the checks can decide alone
        status, _ = await server.post("/mutate", pod_review())
        assert status == 200


async def test_metrics_are_served_on_the_plain_http_port_with_the_documented_names(server: Server) -> None:
    await server.post("/mutate", pod_review(gpus=1))
    await server.post("/validate", pod_review(name="deny-x"))
    metrics_runner = web.AppRunner(create_metrics_app(server.app[keys.REGISTRY]), handle_signals=False)
    await metrics_runner.setup()
    site = web.TCPSite(metrics_runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{site.port}/metrics") as r:
            text = await r.text()
    finally:
        await metrics_runner.cleanup()
    for line in (
        'gpuclaim_webhook_admission_reviews_total{endpoint="mutate",operation="CREATE",result="allowed"} 1.0',
        'gpuclaim_webhook_admission_reviews_total{endpoint="validate",operation="CREATE",result="denied"} 1.0',
        'gpuclaim_webhook_denials_total{endpoint="validate",reason="FieldValueInvalid"} 1.0',
        'gpuclaim_webhook_conversions_total 1.0',
        'gpuclaim_webhook_templates_created_total 0.0',
        'gpuclaim_webhook_admission_duration_seconds_bucket{endpoint="mutate",le="0.001"}',
        'gpuclaim_build_info{component="webhook"',
    ):
        assert line in text, line
    expiry = server.app[keys.REGISTRY].get_sample_value("gpuclaim_certs_expiry_timestamp_seconds")
    reloader = server.app[keys.RELOADER]
    assert reloader is not None and expiry == pytest.approx(reloader.expiry_timestamp()) and expiry > 1e9
