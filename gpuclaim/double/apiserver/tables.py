"""`meta.k8s.io/v1` Tables: what `kubectl get` prints, with kube-apiserver 1.37's columns for each served kind.

The columns and cells follow k8s.io/kubernetes `pkg/printers/internalversion/printers.go` at v1.37.2. As there,
every column is sent (priority 1 ones are what `-o wide` adds; kubectl hides them otherwise), and each row carries
the object's metadata (`includeObject=Metadata`, the default), the whole object, or nothing. A kind without a
printer here (Event) gets Name and Age, what kube-apiserver gives a kind it has no printer for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from gpuclaim.double.apiserver import errors
from gpuclaim.double.apiserver.resources import ResourceType

Obj = dict[str, Any]
Cells = Callable[[Obj, float], list[Any]]

def _column(name: str, description: str, *, type_: str = "string", format_: str = "", priority: int = 0
            ) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": format_, "description": description, "priority": priority}


_NAME = _column("Name", "Name must be unique within a namespace.", format_="name")
_AGE = _column("Age", "CreationTimestamp is a timestamp representing the server time when this object was created.")


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: Obj, now: float) -> str:
    stamp = _get(obj, "metadata", "creationTimestamp")
    try:
        return human_duration(now - datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return "<unknown>"


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _pod(obj: Obj, now: float) -> list[Any]:
    """printPod for pods without a kubelet: no init containers run, so the ready count and the reason come from
    the container statuses when there are any."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    total = len(spec.get("containers") or []) + sum(
        1 for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always")
    reason = status.get("reason") or status.get("phase") or ""
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in status.get("conditions") or []):
        reason = "SchedulingGated"
    ready = restarts = 0
    for container in reversed(status.get("containerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        state = container.get("state") or {}
        if _get(state, "waiting", "reason"):
            reason = state["waiting"]["reason"]
        elif container.get("ready") and "running" in state:
            ready += 1
    if _get(obj, "metadata", "deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_cell = f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}" \
        if gates else "<none>"
    return [_get(obj, "metadata", "name"), f"{ready}/{total}", reason, str(restarts), _age(obj, now),
            (ips[0].get("ip") if ips else None) or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gates_cell]


def _node(obj: Obj, now: float) -> list[Any]:
    ready = [c.get("status") for c in _get(obj, "status", "conditions") or [] if c.get("type") == "Ready"]
    status = ["Ready" if ready[-1] == "True" else "NotReady"] if ready else ["Unknown"]
    if _get(obj, "spec", "unschedulable"):
        status.append("SchedulingDisabled")
    labels = _get(obj, "metadata", "labels") or {}
    roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in labels
                    if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    info = _get(obj, "status", "nodeInfo") or {}
    addresses = _get(obj, "status", "addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")

    kernel = info.get("kernelVersion") or "<unknown>"
    if info.get("architecture"):
        kernel += f" ({info['architecture']})"
    return [_get(obj, "metadata", "name"), ",".join(status), ",".join(roles) or "<none>", _age(obj, now),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", kernel, info.get("containerRuntimeVersion") or "<unknown>"]


def _claim_state(obj: Obj) -> str:
    deleted = bool(_get(obj, "metadata", "deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if _get(obj, "status", "allocation") is None:
        states += [] if deleted else ["pending"]
    else:
        states += ["allocated", "reserved"] if _get(obj, "status", "reservedFor") else ["allocated"]
    return ",".join(states)


_NODE_INFO = "NodeSystemInfo is a set of ids/uuids to uniquely identify the node."
TABLES: dict[str, tuple[list[dict[str, Any]], Cells]] = {
    "Pod": ([_NAME, _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
             _column("Status", "The aggregate status of the containers in this pod."),
             _column("Restarts", "The number of times the containers in this pod have been restarted and when the "
                                 "last container in this pod has restarted."), _AGE,
             _column("IP", "podIP address allocated to the pod.", priority=1),
             _column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
             _column("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods.",
                     priority=1),
             _column("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.",
                     priority=1)], _pod),
    "Node": ([_NAME, _column("Status", "The status of the node"), _column("Roles", "The roles of the node"), _AGE,
              _column("Version", "Kubelet Version reported by the node."),
              _column("Internal-IP", "List of addresses reachable to the node.", priority=1),
              _column("External-IP", "List of addresses reachable to the node.", priority=1),
              _column("OS-Image", _NODE_INFO, priority=1), _column("Kernel-Version", _NODE_INFO, priority=1),
              _column("Container-Runtime", _NODE_INFO, priority=1)], _node),
    "Namespace": ([_NAME, _column("Status", "The status of the namespace"), _AGE],
                  lambda o, now: [_get(o, "metadata", "name"), _get(o, "status", "phase") or "", _age(o, now)]),
    "Secret": ([_NAME, _column("Type", "Used to facilitate programmatic handling of secret data."),
                _column("Data", "Data contains the secret data.", type_="string"), _AGE],
               lambda o, now: [_get(o, "metadata", "name"), o.get("type", ""), len(o.get("data") or {}),
                               _age(o, now)]),
    "ConfigMap": ([_NAME, _column("Data", "Data contains the configuration data."), _AGE],
                  lambda o, now: [_get(o, "metadata", "name"),
                                  len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age(o, now)]),
    "Lease": ([_NAME, _column("Holder", "holderIdentity contains the identity of the holder of a current lease."),
               _AGE], lambda o, now: [_get(o, "metadata", "name"), _get(o, "spec", "holderIdentity") or "",
                                      _age(o, now)]),
    "ResourceClaim": ([_NAME, _column("State", "A summary of the current state (allocated, pending, reserved, "
                                               "etc.)."), _AGE],
                      lambda o, now: [_get(o, "metadata", "name"), _claim_state(o), _age(o, now)]),
    "ResourceSlice": ([_NAME, _column("Node", "NodeName identifies the node which provides the resources in this "
                                              "pool."),
                       _column("Driver", "Driver identifies the DRA driver providing the capacity information."),
                       _column("Pool", "Name is used to identify the pool."), _AGE],
                      lambda o, now: [_get(o, "metadata", "name"), _get(o, "spec", "nodeName") or "",
                                      _get(o, "spec", "driver") or "", _get(o, "spec", "pool", "name") or "",
                                      _age(o, now)]),
}
_WEBHOOKS = ([_NAME, _column("Webhooks", "Webhooks indicates the number of webhooks registered in this "
                                         "configuration", type_="integer"), _AGE],
             lambda o, now: [_get(o, "metadata", "name"), len(o.get("webhooks") or []), _age(o, now)])
TABLES["MutatingWebhookConfiguration"] = TABLES["ValidatingWebhookConfiguration"] = _WEBHOOKS
_NAME_AGE = ([_NAME, _AGE], lambda o, now: [_get(o, "metadata", "name"), _age(o, now)])
TABLES["DeviceClass"] = TABLES["ResourceClaimTemplate"] = _NAME_AGE


def _row_object(rt: ResourceType, obj: Obj, include: str, group_version: str) -> Obj | None:
    if include == "Object":
        return {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
    if include in ("Metadata", ""):
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
        return {"kind": "PartialObjectMetadata", "apiVersion": group_version, "metadata": meta}
    return None


def table(rt: ResourceType, items: list[Obj], *, now: float, include_object: str, no_headers: bool,
          group_version: str, list_meta: dict[str, Any] | None) -> dict[str, Any]:
    """A Table of `items`; `list_meta` is the list's metadata (resourceVersion, continue), None for a single get."""
    if include_object not in ("", "Object", "Metadata", "None"):
        raise errors.ApiError(400, f'includeObject: unrecognized value "{include_object}" '
                                   "(None, Metadata or Object)")
    columns, cells = TABLES.get(rt.kind, _NAME_AGE)
    rows = []
    for obj in items:
        try:
            row: dict[str, Any] = {"cells": cells(obj, now)}
        except (AttributeError, TypeError, ValueError):  # only without schema validation (--no-validate)
            row = {"cells": [_get(obj, "metadata", "name"), *["<invalid>"] * (len(columns) - 1)]}
        partial = _row_object(rt, obj, include_object, group_version)
        if partial is not None:
            row["object"] = partial
        rows.append(row)
    out: dict[str, Any] = {"kind": "Table", "apiVersion": group_version, "metadata": list_meta or {},
                           "columnDefinitions": [] if no_headers else columns, "rows": rows}
    return out
