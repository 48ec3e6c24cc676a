"""Who may call the extender (issue 22), on the real control plane of each minor under test: e2e.kube installs the
chart's defaults, so the extender requires mutual TLS and the real kube-scheduler calls it with the chart's
`extenders[].tlsConfig` (certFile/keyFile: the client pair `gpuclaim certs --client-name` issued, as the chart's
certs Job runs it). The scheduler is never refused: a converted GPU pod is scheduled with the extender's scores.
A caller without the certificate gets no TLS handshake. The chart's opt-in NetworkPolicies for both TLS ports are
accepted by the real kube-apiserver (server-side dry run), the extender's with its fleet port rule."""

from __future__ import annotations

import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from realkube_cluster import Kube, gpu_pod

from e2e.kube.api import collection
from e2e.kube.install import NAMESPACE, render_chart


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    with kube.scratch_namespace("auth") as name:
        yield name


def _prioritize_calls(kube: Kube) -> float:
    """kube-scheduler's successful /prioritize calls so far, from the extender's own metrics port."""
    port = kube.state["gpuclaimPorts"]["extender-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    match = re.search(r'^gpuclaim_extender_requests_total\{result="ok",verb="prioritize"\} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def _call(kube: Kube, *, client: tuple[Path, Path] | None) -> int:
    tls = kube.run / "tls"
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.check_hostname = False  # the serving certificate names 127.0.0.1 as an IP SAN: checked by the chain
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    body = orjson.dumps({"Pod": gpu_pod("probe", "default"), "NodeNames": kube.state["nodes"][:2]})
    port = kube.state["gpuclaimPorts"]["extender"]
    request = urllib.request.Request(f"https://127.0.0.1:{port}/prioritize", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=5) as reply:
        return int(reply.status)


def test_the_scheduler_is_answered_with_its_client_certificate_and_nobody_else(kube: Kube, ns: str) -> None:
    (entry,) = kube.state["extenders"]
    assert entry["tlsConfig"]["certFile"].endswith("client.crt") and entry["tlsConfig"]["keyFile"]
    before = _prioritize_calls(kube)
    status, created = kube.api.request("POST", collection("Pod", ns), gpu_pod("gpu-mtls", ns))
    assert status == 201 and created["spec"].get("resourceClaims"), created
    pod = kube.wait_bound(ns, "gpu-mtls", timeout=60)
    assert pod["spec"].get("nodeName"), f"not scheduled: {pod.get('status')}"
    deadline = time.monotonic() + 10
    while _prioritize_calls(kube) <= before:  # the scheduler's call is counted as its answer is written
        assert time.monotonic() < deadline, "kube-scheduler scheduled the pod without a successful /prioritize"
        time.sleep(0.2)
    tls = kube.run / "tls"
    assert _call(kube, client=(tls / "client.crt", tls / "client.key")) == 200
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _call(kube, client=None)
    # the serving certificate (same CA, serverAuth only) does not open it either
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _call(kube, client=(tls / "tls.crt", tls / "tls.key"))


def test_the_tls_port_network_policies_are_valid_objects_for_the_real_apiserver(kube: Kube) -> None:
    control_plane = {"ipBlock": {"cidr": "10.0.0.0/24"}}
    rendered = render_chart({
        "webhook": {"networkPolicy": {"enabled": True, "from": [control_plane]}},
        "extender": {"networkPolicy": {"enabled": True, "from": [control_plane]}},
        "scheduler": {"second": {"enabled": True}},
        "metrics": {"networkPolicy": {"enabled": True, "from": [{"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}},
        "fleet": {"networkPolicy": {"enabled": True, "from": [{"podSelector": {
            "matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}}, "namespaceSelector": {}}]}},
    })
    policies = [o for o in rendered if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 2
    for policy in policies:
        stored = kube.api.create(policy, dryRun="All")
        assert stored["spec"]["ingress"] == policy["spec"]["ingress"]
        assert stored["metadata"]["namespace"] == NAMESPACE
    (extender,) = [p for p in policies if p["metadata"]["name"].endswith("-extender")]
    # TLS, metrics, fleet
    assert [rule["ports"][0]["port"] for rule in extender["spec"]["ingress"]] == [8443, 9090, 8444]
    # the Deployments that mount the client certificate (second scheduler) and the client CA (extender), and
    # probe the metrics port, are valid as rendered too
    deployments = [o for o in rendered if o["kind"] == "Deployment"]
    assert len(deployments) == 3
    for deployment in deployments:
        kube.api.create(deployment, dryRun="All")
