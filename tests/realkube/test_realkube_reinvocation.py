"""Reinvocation on the real admission chain, with a later mutating webhook (a tiny HTTPS server in this test,
registered after gpuclaim's) that labels every pod and, for pods annotated `test/inject-gpu-sidecar`, adds a
sidecar container asking for `nvidia.com/gpu: 1` (as a sidecar injector would).

- label only: kube-apiserver would reinvoke gpuclaim (`reinvocationPolicy: IfNeeded`), but the converted pod no
  longer matches the chart's matchConditions, so gpuclaim is called once and the pod is converted once;
- GPU sidecar added after gpuclaim's first call: gpuclaim is called again and converts the sidecar too, without
  touching what it already converted: no legacy GPU limit is left, each container has its claim, 3 devices are
  allocated (2 + 1)."""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from realkube_cluster import Kube, gpu_pod

from e2e.kube.api import collection
from gpuclaim.certs import selfsigned

REGISTRATION = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/zz-test-annotator"


class _Annotator(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        meta = request["object"]["metadata"]
        patch = [{"op": "add", "path": "/metadata/labels", "value": {"annotated": "yes"}}] if not meta.get(
            "labels") else [{"op": "add", "path": "/metadata/labels/annotated", "value": "yes"}]
        containers = request["object"]["spec"]["containers"]
        if (meta.get("annotations") or {}).get("test/inject-gpu-sidecar") and all(
                c["name"] != "sidecar" for c in containers):
            patch.append({"op": "add", "path": "/spec/containers/-", "value": {
                "name": "sidecar", "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}})
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": request["uid"], "allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def annotator(kube: Kube, tmp_path: Path) -> Iterator[str]:
    now = datetime.now(UTC)
    ca = selfsigned.issue_ca(now=now, name="annotator-ca")
    serving = selfsigned.issue_serving(ca=ca, now=now, names=selfsigned.Names.build([], ["127.0.0.1"]))
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Annotator)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    namespace = kube.namespace("reinvoke")
    kube.api.create({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "zz-test-annotator"},
        "webhooks": [{"name": "annotate.test.gpuclaim.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "failurePolicy": "Fail", "timeoutSeconds": 5, "reinvocationPolicy": "Never",
                      "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/",
                                       "caBundle": base64.b64encode(ca.cert_pem).decode()},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"]}],
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]})
    try:
        yield namespace
    finally:
        kube.api.delete(REGISTRATION, grace=None)
        kube.delete_namespace_pods(namespace)
        server.shutdown()
        server.server_close()


def mutate_reviews(kube: Kube) -> float:
    url = f"http://127.0.0.1:{kube.state['gpuclaimPorts']['webhook-metrics']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(
        r'^gpuclaim_webhook_admission_reviews_total\{[^}]*endpoint="mutate"[^}]*\} (\S+)$', text, re.MULTILINE))


def test_a_later_label_does_not_reinvoke_the_converted_pod(kube: Kube, annotator: str) -> None:
    ns = annotator
    before = mutate_reviews(kube)
    status, body = kube.api.request("POST", collection("Pod", ns), gpu_pod("labelled", ns, 2))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"annotated": "yes"}  # the later webhook ran
    assert mutate_reviews(kube) - before == 1  # matchConditions: the converted pod carries no GPU resource
    claims = body["spec"]["resourceClaims"]
    assert len(claims) == 1 and claims[0]["resourceClaimTemplateName"].startswith("gpuclaim-")
    assert [c["name"] for c in body["spec"]["containers"][0]["resources"]["claims"]] == [claims[0]["name"]]
    assert [t["metadata"]["name"] for t in kube.api.list("ResourceClaimTemplate", ns)] == \
        [claims[0]["resourceClaimTemplateName"]]
    assert kube.wait_bound(ns, "labelled")["spec"].get("nodeName")


def test_a_later_gpu_sidecar_reinvokes_gpuclaim_which_converts_it_too(kube: Kube, annotator: str) -> None:
    ns = annotator
    before = mutate_reviews(kube)
    pod = gpu_pod("sidecar", ns, 2, annotations={"test/inject-gpu-sidecar": "yes"})
    status, body = kube.api.request("POST", collection("Pod", ns), pod)
    assert status == 201, body
    assert mutate_reviews(kube) - before == 2  # called again after the sidecar was added (IfNeeded)
    containers = {c["name"]: c for c in body["spec"]["containers"]}
    assert set(containers) == {"main", "sidecar"}
    for container in containers.values():
        assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), container
        assert container["resources"].get("claims"), container
    referenced = {c["name"] for container in containers.values() for c in container["resources"]["claims"]}
    assert referenced <= {c["name"] for c in body["spec"]["resourceClaims"]}
    bound = kube.wait_bound(ns, "sidecar")
    assert bound["spec"].get("nodeName"), bound["status"]
    names = {s["resourceClaimName"] for s in bound["status"].get("resourceClaimStatuses") or ()}
    devices = [r for c in kube.api.list("ResourceClaim", ns) if c["metadata"]["name"] in names
               for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(devices) == 3  # 2 for main, 1 for the sidecar
