"""Webhook configurations for the e2e tests: the chart's own, rendered with real Helm, pointed at a test server."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "gpuclaim"
NAMESPACE = "gpuclaim-system"
SERVICE = "gc-gpuclaim-webhook"
SERVICE_KEY = f"{NAMESPACE}/{SERVICE}:443"
SERVICE_HOST = f"{SERVICE}.{NAMESPACE}.svc"


@functools.cache
def _rendered(failure_policy: str) -> tuple[dict[str, Any], ...]:
    values = {"webhook": {"mutating": {"failurePolicy": failure_policy},
                          "validating": {"failurePolicy": failure_policy}}}
    out = helm.Chart.load(str(CHART)).render(values, name="gc", namespace=NAMESPACE, is_install=True, revision=1)
    docs = [d for path, text in out.items() if path.endswith((".yaml", ".yml")) for d in yaml.safe_load_all(text) if d]
    return tuple(d for d in docs if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))


def chart_configurations(*, ca_bundle: str, failure_policy: str = "Fail") -> list[dict[str, Any]]:
    """The chart's Mutating- and ValidatingWebhookConfiguration with the caBundle injected (as `gpuclaim certs`)."""
    configs = copy.deepcopy(list(_rendered(failure_policy)))
    for config in configs:
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = ca_bundle
    return configs


def pod(name: str, *, limits: dict[str, str] | None = None, namespace: str = "default",
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if limits:
        container["resources"] = {"limits": limits}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container], **spec}}
