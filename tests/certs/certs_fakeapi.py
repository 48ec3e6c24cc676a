"""An in-memory `certs.api.CertsApi` with the API server's write semantics: create of an existing
name is a 409, an update must carry the current resourceVersion or it is a 409, every write bumps
resourceVersion, reads return copies. Label selectors support the `k=v,k2=v2` form we use."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from gpuclaim.certs import api


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class FakeApi:
    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.webhooks: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self.writes: list[str] = []
        #: names whose next update fails with 409 once (simulates a concurrent writer)
        self.conflict_once: set[str] = set()

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        return obj

    def add_webhook(self, kind: api.WebhookKind, name: str, webhooks: int = 1, labels: dict | None = None) -> None:
        labels = {"app.kubernetes.io/name": "gpuclaim"} if labels is None else labels
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "labels": labels},
            "webhooks": [
                {
                    "name": f"w{i}.gpuclaim.io",
                    "clientConfig": {"service": {"namespace": "gpuclaim", "name": "gpuclaim-webhook", "path": "/x"}},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                }
                for i in range(webhooks)
            ],
        }
        self.webhooks[(kind, name)] = self._stamp(body)

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return copy.deepcopy(self.secrets[(namespace, name)])
        except KeyError:
            raise api.NotFound(f'secrets "{name}" not found') from None

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (namespace, name) in self.secrets:
            raise api.Conflict(f'secrets "{name}" already exists')
        self.secrets[(namespace, name)] = self._stamp(body)
        self.writes.append(f"create Secret/{name}")
        return copy.deepcopy(self.secrets[(namespace, name)])

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._check_update(self.secrets.get((namespace, name)), body, name)
        self.secrets[(namespace, name)] = self._stamp(body)
        self.writes.append(f"update Secret/{name}")
        return copy.deepcopy(self.secrets[(namespace, name)])

    async def list_webhook_configurations(self, kind: api.WebhookKind, label_selector: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (k, _), obj in sorted(self.webhooks.items())
            if k == kind and _matches(obj["metadata"].get("labels") or {}, label_selector)
        ]

    async def replace_webhook_configuration(self, kind: api.WebhookKind, name: str, body: dict[str, Any]) -> dict:
        self._check_update(self.webhooks.get((kind, name)), body, name)
        self.webhooks[(kind, name)] = self._stamp(body)
        self.writes.append(f"update {kind}/{name}")
        return copy.deepcopy(self.webhooks[(kind, name)])

    def _check_update(self, current: dict[str, Any] | None, body: dict[str, Any], name: str) -> None:
        if current is None:
            raise api.NotFound(f'"{name}" not found')
        if name in self.conflict_once:
            self.conflict_once.discard(name)
            current["metadata"]["resourceVersion"] = str(next(self._rv))  # a concurrent writer got in first
        if body.get("metadata", {}).get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise api.Conflict(f'Operation cannot be fulfilled on "{name}": the object has been modified')
