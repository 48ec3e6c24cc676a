"""A small synchronous client for the real kube-apiserver: what kubectl does, with the status code kept.

    api = Api(server, ca_file, token)
    status, body = api.request("POST", "/api/v1/namespaces", obj)
    obj = api.create(path, obj)          # raises ApiError unless 2xx
    api.apply_all(objects)               # create each object at its REST path (409 -> kept as it is)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import requests

Obj = dict[str, Any]

#: kind -> (group/version path prefix, plural, namespaced)
_RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
    "Event": ("/api/v1", "events", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                                       False),
    "ValidatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("/apis/admissionregistration.k8s.io/v1",
                                         "validatingadmissionpolicybindings", False),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    "DeviceTaintRule": ("/apis/resource.k8s.io/v1", "devicetaintrules", False),  # served from 1.37
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "ReplicaSet": ("/apis/apps/v1", "replicasets", True),
}


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Obj) -> None:
        super().__init__(f"{method} {path}: {status} {body.get('reason', '')}: {body.get('message', body)}")
        self.status = status
        self.body = body


def collection(kind: str, namespace: str | None = None) -> str:
    """The REST collection path of `kind` (in `namespace` when namespaced and given)."""
    prefix, plural, namespaced = _RESOURCES[kind]
    if namespaced and namespace:
        return f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{prefix}/{plural}"


def path_of(obj: Obj) -> str:
    """The object's own path."""
    meta = obj["metadata"]
    return f"{collection(obj['kind'], meta.get('namespace'))}/{meta['name']}"


class Api:
    def __init__(self, server: str, ca_file: str, token: str, *, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.session = requests.Session()
        # not the environment's proxies or REQUESTS_CA_BUNDLE (which would override `verify`): loopback, our CA
        self.session.trust_env = False
        self.session.verify = ca_file
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    def close(self) -> None:
        self.session.close()

    def request(self, method: str, path: str, body: Obj | None = None, *, params: dict[str, str] | None = None,
                content_type: str = "application/json") -> tuple[int, Obj]:
        reply = self.session.request(method, self.server + path, json=body, params=params, timeout=self.timeout,
                                     headers={"Content-Type": content_type} if body is not None else None)
        try:
            parsed = reply.json()
        except ValueError:
            parsed = {"kind": "Status", "reason": "NotJSON", "message": reply.text[:500]}
        return reply.status_code, parsed if isinstance(parsed, dict) else {"message": str(parsed)}

    def call(self, method: str, path: str, body: Obj | None = None, **kw: Any) -> Obj:
        status, out = self.request(method, path, body, **kw)
        if not 200 <= status < 300:
            raise ApiError(method, path, status, out)
        return out

    def get(self, path: str) -> Obj:
        return self.call("GET", path)

    def list(self, kind: str, namespace: str | None = None, **params: str) -> list[Obj]:
        return list(self.call("GET", collection(kind, namespace), params=params or None)["items"])

    def create(self, obj: Obj, **params: str) -> Obj:
        return self.call("POST", collection(obj["kind"], obj["metadata"].get("namespace")), obj,
                         params=params or None)

    def delete(self, obj_or_path: Obj | str, *, grace: int | None = 0) -> int:
        """DELETE (grace 0 by default: with no kubelet a bound pod would stay Terminating); the status code."""
        path = obj_or_path if isinstance(obj_or_path, str) else path_of(obj_or_path)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace,
                "propagationPolicy": "Background"} if grace is not None else None
        status, out = self.request("DELETE", path, body)
        if status not in (200, 202, 404):
            raise ApiError("DELETE", path, status, out)
        return status

    def apply_all(self, objects: Iterable[Obj]) -> None:
        """Create each object; one that already exists is kept (a restarted `up` on the same etcd)."""
        for obj in objects:
            status, out = self.request("POST", collection(obj["kind"], obj["metadata"].get("namespace")), obj)
            if status not in (200, 201, 409):
                raise ApiError("POST", path_of(obj), status, out)

    def patch_status(self, obj: Obj, status: Obj) -> Obj:
        return self.call("PATCH", path_of(obj) + "/status", {"status": status},
                         content_type="application/merge-patch+json")


def wait_for(what: str, check: Callable[[], Any], *, timeout: float, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; TimeoutError naming `what` (and the last error)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except (requests.RequestException, ApiError, OSError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s" + (f" (last error: {last})" if last else ""))
        time.sleep(interval)
