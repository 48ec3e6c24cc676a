"""Do the servers' watch-fed caches agree with the double? Each probe makes a fresh change in the double and
measures how long until the server's answers reflect it.

- webhook: a new DeviceClass, then dry-run ResourceClaims using it until the validating webhook stops warning
  that the class does not exist (its inventory comes from its cache);
- extender: a new, unallocated ResourceClaim, then /prioritize for a pod using it until the extender's scores
  equal the extender's own prediction code run on a snapshot of the double (`gpuclaim score`'s rows).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

import aiohttp

from gpuclaim.demo.scenario import Api, predictions, snapshot_objects
from gpuclaim.demo.stack import Stack
from gpuclaim.double.scheduler.extenders import ExtenderConfig, HTTPExtender
from gpuclaim.kube import KubeClient

Obj = dict[str, Any]
_RESOURCE = "/apis/resource.k8s.io/v1"


async def _create(api: Api, path: str, obj: Obj, deadline: float) -> None:
    """Create, retrying while the webhooks are unreachable (`failurePolicy: Fail`)."""
    while True:
        status, body, _ = await api.create(path, obj)
        if status in (201, 409):
            return
        if status < 500 or time.monotonic() > deadline:
            raise RuntimeError(f"probe: creating {path} answered {status}: {body.get('message')}")
        await asyncio.sleep(0.1)


async def webhook(api: Api, namespace: str, generation: int, *, within: float = 20.0) -> float | None:
    """Seconds until the webhook knows a DeviceClass created now; None if not `within` seconds."""
    started = time.monotonic()
    deadline = started + within
    name = f"probe-{generation}.gpuclaim.io"
    await _create(api, f"{_RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}, deadline)
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"probe-{generation}", "namespace": namespace},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": name}}]}}}
    while time.monotonic() < deadline:
        status, _body, warnings = await api.create(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
                                                   claim, dry_run=True)
        if status == 201 and not any(f"DeviceClass {name} does not exist" in w for w in warnings):
            return round(time.monotonic() - started, 3)
        await asyncio.sleep(0.05)
    return None


async def extender(stack: Stack, api: Api, client: KubeClient, namespace: str, generation: int, *,
                   within: float = 20.0) -> float | None:
    """Seconds until the extender scores a pod of a claim created now as the prediction on the double does."""
    started = time.monotonic()
    deadline = started + within
    claim_name = f"extender-probe-{generation}"
    await _create(api, f"{_RESOURCE}/namespaces/{namespace}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                      "count": 2}}]}}}, deadline)
    probe_pod: Obj = {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": claim_name, "namespace": namespace, "uid": f"probe-{generation}"},
                      "spec": {"containers": [{"name": "main", "image": "x",
                                               "resources": {"claims": [{"name": "gpu"}]}}],
                               "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]}}
    config = ExtenderConfig.from_dict(stack.extender_entries()[0])
    async with aiohttp.ClientSession() as session:
        ext = HTTPExtender(config, session)
        while time.monotonic() < deadline:
            objects = await _objects(client)
            wanted = {r["node"]: r["score"] or 0 for r in predictions(probe_pod, objects, _extender_config())}
            try:
                got = await ext.prioritize(probe_pod, objects["Node"])
            except Exception:  # down or restarting: not converged yet
                got = {}
            if got and {h: s // config.weight for h, s in got.items()} == wanted and any(wanted.values()):
                return round(time.monotonic() - started, 3)
            await asyncio.sleep(0.1)
    return None


def _extender_config() -> Any:
    from gpuclaim.dra.config import load_config

    return load_config(None).extender


async def _objects(client: KubeClient) -> dict[str, list[Obj]]:
    return await snapshot_objects(client)


def served_fingerprint(port: int) -> str:
    """SHA-256 of the certificate the server on 127.0.0.1:`port` presents now (no verification: just looking)."""
    import hashlib
    import socket

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock, \
            context.wrap_socket(sock) as tls:
        der = tls.getpeercert(binary_form=True)
    return hashlib.sha256(der or b"").hexdigest()
