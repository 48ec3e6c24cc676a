"""`python -m e2e.apiserver --controllers --webhook-service ...` as a process: the chain and the controller wired in."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from e2e_fleet import claim_pod, gpu_request, template

from gpuclaim.kube import KubeClient, config

REPO = Path(__file__).resolve().parents[2]


async def test_double_process_runs_the_resourceclaim_controller(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim.double.apiserver", "--workdir", str(tmp_path), "--controllers",
        "--webhook-service", "gpuclaim-system/gc-gpuclaim-webhook=127.0.0.1:1", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        kubeconfig = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        client = KubeClient(config.from_kubeconfig(kubeconfig), timeout=5)
        try:
            await client.create("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
                                template("one", gpu_request()))
            await client.create("/api/v1/namespaces/default/pods", claim_pod("p", {"gpu": "one"}))
            for _ in range(100):
                pod = await client.get("/api/v1/namespaces/default/pods/p")
                if (pod.get("status") or {}).get("resourceClaimStatuses"):
                    break
                await asyncio.sleep(0.05)
            (status,) = pod["status"]["resourceClaimStatuses"]
            claim = await client.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/"
                                     f"{status['resourceClaimName']}")
            assert claim["metadata"]["ownerReferences"][0]["name"] == "p"
        finally:
            await client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err.decode()


async def test_bad_webhook_service_flag_is_a_usage_error(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim.double.apiserver", "--workdir", str(tmp_path), "--webhook-service", "nonsense",
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2 and "--webhook-service: expected NS/NAME:PORT=HOST:PORT" in err.decode()
