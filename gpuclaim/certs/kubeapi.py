"""`certs.api.CertsApi` over the project's kube-apiserver client (`kube.KubeClient`).

The only module of `certs/` that imports `kube/`; imported lazily by `gpuclaim certs` so the
servers' TLS code never pulls in the cluster client.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from gpuclaim import kube
from gpuclaim.certs import api

_ADMISSION = "admissionregistration.k8s.io/v1"
_PLURALS: dict[api.WebhookKind, str] = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}
T = TypeVar("T")


async def _call(what: str, op: Awaitable[T]) -> T:
    """Map the client's errors onto the three outcomes the reconciler tells apart."""
    try:
        return await op
    except kube.ApiError as exc:
        if exc.code == 404:
            raise api.NotFound(f"{what}: {exc.message}") from None
        if exc.code == 409:
            raise api.Conflict(f"{what}: {exc.message}") from None
        raise api.ApiError(exc.code, f"{what}: {exc.reason} {exc.message}".strip()) from None
    except kube.ApiUnavailable as exc:
        raise api.ApiError(0, str(exc)) from None


class KubeCertsApi:
    def __init__(self, client: kube.KubeClient) -> None:
        self.client = client

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        path = kube.resource_path("v1", "secrets", namespace=namespace, name=name)
        return await _call(f"get Secret {namespace}/{name}", self.client.get(path))

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        path = kube.resource_path("v1", "secrets", namespace=namespace)
        return await _call(f"create Secret {namespace}/{body['metadata']['name']}", self.client.create(path, body))

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        path = kube.resource_path("v1", "secrets", namespace=namespace, name=name)
        return await _call(f"update Secret {namespace}/{name}", self.client.update(path, body))

    async def list_webhook_configurations(self, kind: api.WebhookKind, label_selector: str) -> list[dict[str, Any]]:
        path = kube.resource_path(_ADMISSION, _PLURALS[kind])
        listed = await _call(f"list {kind}", self.client.list(path, params={"labelSelector": label_selector}))
        items = listed.get("items") or []
        # a List's items carry no kind/apiVersion on the wire; an update body needs them
        return [{**item, "apiVersion": _ADMISSION, "kind": kind} for item in items if isinstance(item, dict)]

    async def replace_webhook_configuration(self, kind: api.WebhookKind, name: str,
                                            body: dict[str, Any]) -> dict[str, Any]:
        path = kube.resource_path(_ADMISSION, _PLURALS[kind], name=name)
        return await _call(f"update {kind}/{name}", self.client.update(path, body))
