"""``validate_manifest``: what ``gpuclaim lint`` checks in one object of a manifest file.

The DRA kinds and Pods as the webhook checks them on CREATE; the pod templates of workloads (Deployment,
Job, CronJob, ...) get the Pod checks at their own path (``spec.template.spec...``); other kinds pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuclaim.dra import versions
from gpuclaim.dra.config import Config
from gpuclaim.dra.fieldpath import Path

from .claims import namespace_of
from .core import validate_object
from .inventory import Inventory
from .pods import check_pod_spec
from .verdict import Findings, Verdict

__all__ = ["WORKLOAD_TEMPLATES", "validate_manifest"]

WORKLOAD_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}


def validate_manifest(obj: object, *, inventory: Inventory, config: Config,
                      kubernetes: versions.KubernetesModel = versions.NEWEST_MODEL) -> Verdict:
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    steps = WORKLOAD_TEMPLATES.get(kind) if isinstance(kind, str) else None
    if steps is None:
        return validate_object(obj, operation="CREATE", inventory=inventory, config=config, lint=True,
                               kubernetes=kubernetes)
    assert isinstance(obj, Mapping)
    findings = Findings()
    template: object = obj
    for step in steps:
        template = template.get(step) if isinstance(template, Mapping) else None
    if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
        meta = template.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        check_pod_spec(
            template["spec"], path=Path.root(*steps, "spec"),
            annotations=annotations if isinstance(annotations, Mapping) else {},
            namespace=namespace_of(obj, None), inventory=inventory, config=config, findings=findings,
        )
    return findings.verdict()
