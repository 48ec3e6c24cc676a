"""Workloads: convert the pod template of a Deployment, Job, CronJob, ... exactly as its pods would be.

The patch is the pod's patch under the template path (`/spec/template`, `/spec/jobTemplate/spec/template`),
refusal paths get the same prefix, and the namespace is the workload's. Used by `gpuclaim convert`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuclaim.dra.api import DeviceClass
from gpuclaim.dra.config import Config, ConversionConfig
from gpuclaim.dra.fieldpath import Path

from . import patch
from .pod import Conversion, convert_pod

WORKLOAD_TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("v1", "Pod"): (),
    ("apps/v1", "Deployment"): ("spec", "template"),
    ("apps/v1", "StatefulSet"): ("spec", "template"),
    ("apps/v1", "DaemonSet"): ("spec", "template"),
    ("apps/v1", "ReplicaSet"): ("spec", "template"),
    ("batch/v1", "Job"): ("spec", "template"),
    ("batch/v1", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
    ("v1", "PodTemplate"): ("template",),
    ("v1", "ReplicationController"): ("spec", "template"),
}


@dataclass(frozen=True, slots=True)
class ObjectConversion:
    converted: Any  # the object after the patch (the input itself when nothing changed)
    conversion: Conversion  # patch and refusal paths relative to the object


def _pod_view(obj: Mapping[str, Any], steps: tuple[str, ...]) -> Mapping[str, Any] | None:
    node: Any = obj
    for step in steps:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def convert_object(obj: Mapping[str, Any], *, config: Config | ConversionConfig,
                   device_classes: Mapping[str, DeviceClass], namespace_labels: Mapping[str, str] | None = None,
                   own_namespace: str | None = None) -> ObjectConversion | None:
    """None when the object is not a Pod or a workload with a pod template."""
    steps = WORKLOAD_TEMPLATE_PATHS.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if steps is None:
        return None
    view = _pod_view(obj, steps)
    if view is None:
        return ObjectConversion(obj, Conversion(skipped="no pod template"))
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    result = convert_pod(view, config=config, device_classes=device_classes, namespace_labels=namespace_labels,
                         namespace=namespace if isinstance(namespace, str) else None, own_namespace=own_namespace)
    if not steps:
        return ObjectConversion(patch.apply(obj, result.patch) if result.patch else obj, result)
    prefix = patch.pointer(*steps)
    ops = patch.prefixed(result.patch, prefix)
    refusals = [replace(e, path=Path((*steps, *e.path.steps))) for e in result.refusals]
    moved = replace(result, patch=ops, refusals=refusals)
    return ObjectConversion(patch.apply(obj, ops) if ops else obj, moved)
