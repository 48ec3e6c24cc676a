"""The certs reconciler's view of a cluster: the real `certs.kubeapi.KubeCertsApi` over HTTPS against the
Kubernetes API double, so 404 / 409 AlreadyExists / 409 Conflict come from the double's apiserver
semantics and through the same error mapping production uses.

`Cluster` records the writes that succeeded and can play a concurrent writer: a name in `conflict_once`
is changed in the store (a real write, new resourceVersion) just before gpuclaim's next update of it,
so that update carries a stale resourceVersion and the double answers 409 Conflict.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuclaim.certs import api
from gpuclaim.certs.kubeapi import KubeCertsApi
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.double.apiserver.resources import BY_KIND
from gpuclaim.kube.client import KubeClient

NAMESPACE = "gpuclaim"
_ADMISSION = "admissionregistration.k8s.io/v1"
_SECRET = BY_KIND[("v1", "Secret")]


def webhook_configuration(kind: api.WebhookKind, name: str, webhooks: int = 1,
                          labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "gpuclaim"} if labels is None else labels
    return {
        "apiVersion": _ADMISSION, "kind": kind, "metadata": {"name": name, "labels": labels},
        "webhooks": [{"name": f"w{i}.gpuclaim.io",
                      "clientConfig": {"service": {"namespace": NAMESPACE, "name": "gpuclaim-webhook", "path": "/x"}},
                      "admissionReviewVersions": ["v1"], "sideEffects": "None"} for i in range(webhooks)],
    }  # fmt: skip


class Cluster:
    """A `certs.api.CertsApi`: KubeCertsApi against the double, plus the test's handles on the store."""

    def __init__(self, double: RunningDouble, client: KubeClient) -> None:
        self.double = double
        self.real = KubeCertsApi(client)
        self.writes: list[str] = []
        self.conflict_once: set[str] = set()
        if not self._exists(BY_KIND[("v1", "Namespace")], "", NAMESPACE):
            double.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    # ---- what the test reads and writes directly ------------------------------------------------------------
    def _exists(self, rt: Any, namespace: str, name: str) -> bool:
        return self.double.store.list(rt, None, lambda o: o["metadata"]["name"] == name
                                      and o["metadata"].get("namespace", "") == namespace)[0] != []

    def add_webhook(self, kind: api.WebhookKind, name: str, webhooks: int = 1,
                    labels: dict[str, str] | None = None) -> None:
        self.double.store.restore(webhook_configuration(kind, name, webhooks, labels))

    def secret(self, name: str) -> dict[str, Any] | None:
        if not self._exists(_SECRET, NAMESPACE, name):
            return None
        return copy.deepcopy(self.double.store.get(_SECRET, NAMESPACE, name))

    def webhook(self, kind: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.double.store.get(BY_KIND[(_ADMISSION, kind)], "", name))

    async def put(self, obj: dict[str, Any]) -> None:
        """Write an edited object back as another client would (any resourceVersion: last writer wins)."""
        rt = BY_KIND[(obj["apiVersion"], obj["kind"])]
        body = copy.deepcopy(obj)
        body["metadata"].pop("resourceVersion", None)
        await self.double.store.update(rt, body["metadata"].get("namespace", ""), body["metadata"]["name"], body)

    async def _concurrent_write(self, obj: dict[str, Any]) -> None:
        edited = copy.deepcopy(obj)
        notes = edited["metadata"].setdefault("annotations", {})
        notes["example.com/touched"] = str(int(notes.get("example.com/touched", "0")) + 1)
        await self.put(edited)

    # ---- certs.api.CertsApi ----------------------------------------------------------------------------------
    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.real.get_secret(namespace, name)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        out = await self.real.create_secret(namespace, body)
        self.writes.append(f"create Secret/{body['metadata']['name']}")
        return out

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if name in self.conflict_once:
            self.conflict_once.discard(name)
            current = self.secret(name)
            assert current is not None
            await self._concurrent_write(current)
        out = await self.real.replace_secret(namespace, name, body)
        self.writes.append(f"update Secret/{name}")
        return out

    async def list_webhook_configurations(self, kind: api.WebhookKind, label_selector: str) -> list[dict[str, Any]]:
        return await self.real.list_webhook_configurations(kind, label_selector)

    async def replace_webhook_configuration(self, kind: api.WebhookKind, name: str, body: dict[str, Any]) -> dict:
        if name in self.conflict_once:
            self.conflict_once.discard(name)
            await self._concurrent_write(self.webhook(kind, name))
        out = await self.real.replace_webhook_configuration(kind, name, body)
        self.writes.append(f"update {kind}/{name}")
        return out
