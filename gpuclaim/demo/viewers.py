"""Who may look at the demo's fleet page: ServiceAccounts, RBAC and their tokens, as on a real cluster.

The API double answers TokenRequest, TokenReview and SubjectAccessReview from the RBAC objects it stores
(gpuclaim/double/apiserver/auth.py), so the fleet port decides exactly as it would against kube-apiserver:

- ``gpuclaim/fleet-admin``: bound cluster-wide to ClusterRole ``gpuclaim-fleet-viewer`` (list pods and
  resourceclaims): the whole fleet;
- ``ml-team/fleet-viewer``: a RoleBinding in ``ml-team`` to the same ClusterRole: that namespace only, every
  other namespace's claims and pods (``research`` holds some from the start) redacted;
- ``ops-debug/no-rights``: authenticated, no binding: 403.

Their tokens go to ``<workdir>/fleet-tokens.json`` (mode 0600), which the demo prints the path of.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuclaim.demo import inventory

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"
CLUSTER_ROLE = "gpuclaim-fleet-viewer"
SCOPED_NAMESPACE = inventory.WORKLOAD_NAMESPACE
#: token name in the file -> (namespace, ServiceAccount)
ACCOUNTS = {"admin": (inventory.SYSTEM_NAMESPACE, "fleet-admin"), "ml-team": (SCOPED_NAMESPACE, "fleet-viewer"),
            "none": (inventory.UNLABELED_NAMESPACE, "no-rights")}
TOKENS_FILE = "fleet-tokens.json"


def objects() -> list[Obj]:
    """The ServiceAccounts, the viewer ClusterRole and the two bindings, in create order."""
    out: list[Obj] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": ns, "name": name}}
                      for ns, name in ACCOUNTS.values()]
    out.append({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": CLUSTER_ROLE},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                          {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                           "verbs": ["get", "list", "watch"]}]})
    admin_ns, admin = ACCOUNTS["admin"]
    out.append({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": f"{CLUSTER_ROLE}-admin"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
                "subjects": [{"kind": "ServiceAccount", "namespace": admin_ns, "name": admin}]})
    scoped_ns, scoped = ACCOUNTS["ml-team"]
    out.append({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"namespace": scoped_ns, "name": CLUSTER_ROLE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
                "subjects": [{"kind": "ServiceAccount", "namespace": scoped_ns, "name": scoped}]})
    return out


def path_of(obj: Obj) -> str:
    group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings", "RoleBinding": "rolebindings"}[obj["kind"]]
    ns = obj["metadata"].get("namespace")
    return f"{group}/namespaces/{ns}/{plural}" if ns else f"{group}/{plural}"


def set_up(post: Callable[[str, Obj], Obj], workdir: Path) -> Path:
    """Create the objects and request a token for each account (``post(path, body) -> answer``); write the file."""
    for obj in objects():
        post(path_of(obj), obj)
    tokens = {}
    for key, (ns, name) in ACCOUNTS.items():
        answer = post(f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": 86400}})
        tokens[key] = answer["status"]["token"]
    target = workdir / TOKENS_FILE
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(tokens, out, indent=2)
    return target
