"""The builtin certs Job's script, run for real: the rendered shell script drives the real
`gpuclaim certs` (this venv's console script) against the Kubernetes API double, holding the
webhook configurations the chart renders. Checks that the flags the chart passes are accepted,
the Secret and caBundle land where the Deployments and the apiserver look for them, and that the
script waits out the first-install race in which the Job starts before Helm has created the
webhook configurations."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import NAMESPACE, render_values
from cryptography import x509

from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.kube.client import KubeClient, resource_path

ADMISSION = "admissionregistration.k8s.io/v1"
PLURALS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}


@pytest.fixture
async def kclient(client: KubeClient) -> KubeClient:
    await client.create(resource_path("v1", "namespaces"),
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    return client


async def run_job_script(double: RunningDouble, script: str) -> tuple[int, str]:
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(double.kubeconfig),
        "HOME": str(double.kubeconfig.parent),
    }
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def job_script(rendered: Any) -> str:
    (container,) = rendered.one("Job")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    return str(script)


async def create(kclient: KubeClient, obj: dict[str, Any]) -> None:
    await kclient.create(resource_path(ADMISSION, PLURALS[obj["kind"]]), obj)


async def test_the_job_issues_the_secret_the_servers_mount_and_injects_the_ca_into_both_configurations(
    double: RunningDouble, kclient: KubeClient
) -> None:
    rendered = render_values({})
    for kind in PLURALS:
        await create(kclient, rendered.one(kind))
    code, out = await run_job_script(double, job_script(rendered))
    assert code == 0, out

    secret = await kclient.get(resource_path("v1", "secrets", namespace=NAMESPACE, name="gc-gpuclaim-tls"))
    assert secret["type"] == "kubernetes.io/tls"
    # Every key a pod mounts (items of the Secret volumes) exists.
    for dep in rendered.of_kind("Deployment"):
        for volume in dep["spec"]["template"]["spec"]["volumes"]:
            if "secret" in volume:
                assert volume["secret"]["secretName"] == "gc-gpuclaim-tls"
                assert {i["key"] for i in volume["secret"]["items"]} <= set(secret["data"])
    ca_pem = base64.b64decode(secret["data"]["ca.crt"])
    for kind, plural in PLURALS.items():
        stored = await kclient.get(resource_path(ADMISSION, plural, name="gc-gpuclaim-webhook"))
        for hook in stored["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca_pem, kind

    # One certificate for both servers: the webhook Service names and the extender's (the
    # scheduler verifies tlsConfig.serverName against it).
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    sans = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName))
    assert f"gc-gpuclaim-webhook.{NAMESPACE}.svc" in sans
    assert f"gc-gpuclaim-extender.{NAMESPACE}.svc" in sans


async def test_the_job_waits_until_helm_has_created_both_webhook_configurations(
    double: RunningDouble, kclient: KubeClient
) -> None:
    rendered = render_values({})
    await create(kclient, rendered.one("MutatingWebhookConfiguration"))
    job = asyncio.create_task(run_job_script(double, job_script(rendered)))
    # wait (on the API, not the clock: start-up time varies with load) until the first run has
    # injected the one configuration it saw; the script then sleeps before looking again
    mutating = resource_path(ADMISSION, PLURALS["MutatingWebhookConfiguration"], name="gc-gpuclaim-webhook")
    for _ in range(600):
        hooks = (await kclient.get(mutating))["webhooks"]
        if all(h["clientConfig"].get("caBundle") for h in hooks) or job.done():
            break
        await asyncio.sleep(0.05)
    assert not job.done()
    await create(kclient, rendered.one("ValidatingWebhookConfiguration"))
    code, out = await job
    assert code == 0, out
    assert "saw 1 of 2 webhook configurations" in out
    stored = await kclient.get(resource_path(ADMISSION, PLURALS["ValidatingWebhookConfiguration"],
                                             name="gc-gpuclaim-webhook"))
    assert all(h["clientConfig"].get("caBundle") for h in stored["webhooks"])


async def test_without_the_validating_webhook_one_configuration_is_enough(
    double: RunningDouble, kclient: KubeClient
) -> None:
    rendered = render_values({"webhook": {"validating": {"enabled": False}}, "extender": {"enabled": False}})
    await create(kclient, rendered.one("MutatingWebhookConfiguration"))
    code, out = await run_job_script(double, job_script(rendered))
    assert code == 0, out
    assert "retrying" not in out
