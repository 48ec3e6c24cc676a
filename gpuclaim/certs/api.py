"""The narrow slice of kube-apiserver that certificate management needs.

`kube/` provides the implementation (`certs.kubeapi`); the tests run it against the API double, which
answers 409 on create of an existing name and 409 on update with a stale resourceVersion, as kube-apiserver does.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

WebhookKind = Literal["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
WEBHOOK_KINDS: tuple[WebhookKind, ...] = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
DEFAULT_SELECTOR = "app.kubernetes.io/name=gpuclaim"


class ApiError(Exception):
    """An answer from the API server other than success, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class NotFound(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(404, message)


class Conflict(ApiError):
    """409: the name exists (create) or the resourceVersion is stale (update)."""

    def __init__(self, message: str) -> None:
        super().__init__(409, message)


class CertsApi(Protocol):
    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        """The Secret, or raise NotFound."""
        ...

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create; raise Conflict if the name exists."""
        ...

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Update with `metadata.resourceVersion`; raise Conflict if it is stale."""
        ...

    async def list_webhook_configurations(self, kind: WebhookKind, label_selector: str) -> list[dict[str, Any]]:
        ...

    async def replace_webhook_configuration(self, kind: WebhookKind, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Update with `metadata.resourceVersion`; raise Conflict if it is stale."""
        ...
