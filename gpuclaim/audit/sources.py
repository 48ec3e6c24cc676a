"""Where ``gpuclaim audit`` reads a cluster from: the API (read-only: list and /version; the chart's
``<release>-audit`` ClusterRole grants exactly these) or a dump directory, as ``score --cluster`` reads one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuclaim.kube.dump import DumpError, read_dump

from .report import Objects

#: (kind, apiVersion, plural): everything the report reads
LISTED = (
    ("Namespace", "v1", "namespaces"), ("Node", "v1", "nodes"), ("Pod", "v1", "pods"),
    ("ResourceQuota", "v1", "resourcequotas"), ("Deployment", "apps/v1", "deployments"),
    ("StatefulSet", "apps/v1", "statefulsets"), ("DaemonSet", "apps/v1", "daemonsets"),
    ("Job", "batch/v1", "jobs"), ("CronJob", "batch/v1", "cronjobs"),
    ("DeviceClass", "resource.k8s.io/v1", "deviceclasses"), ("ResourceSlice", "resource.k8s.io/v1", "resourceslices"),
    ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
)


class SourceError(Exception):
    """The cluster cannot be read; the message names what and why (exit 2)."""


def from_directory(directory: Path) -> Objects:
    objects = Objects()
    try:
        for _, located in read_dump(directory):
            if isinstance(located.obj, Mapping):
                objects.add(located.obj)
    except DumpError as exc:
        raise SourceError(str(exc)) from None
    return objects


async def from_api(api: Any, *, api_timeout: float = 30.0, page_size: int = 500,
                   listed: tuple[tuple[str, str, str], ...] = LISTED, namespace: str | None = None,
                   namespaced: frozenset[str] = frozenset(), needs: str = "") -> tuple[Objects, str]:
    """Every object of `listed` (default: what the report reads), listed page by page, and the cluster's gitVersion.

    With `namespace`, the kinds in `namespaced` are listed in that namespace only (a viewer whose rights end at
    their namespace, as `gpuclaim fleet pods -n NS`); `needs` names the rights for the refusal's message."""
    from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path

    client = KubeClient(api, timeout=api_timeout)
    objects = Objects()
    try:
        version = str((await client.get("/version")).get("gitVersion") or "")
        for kind, api_version, plural in listed:
            params = {"limit": str(page_size)}
            where = namespace if namespace is not None and kind in namespaced else None
            while True:
                page = await client.list(resource_path(api_version, plural, namespace=where), params=params)
                for item in page.get("items") or ():
                    if isinstance(item, dict):
                        objects.add({"apiVersion": api_version, "kind": kind, **item})
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
                params = {"limit": str(page_size), "continue": token}
    except ApiError as exc:
        raise SourceError(f"the API refused a read ({exc}); " + (needs or f"the audit needs the {LISTED_TEXT} "
                                                                   "(the chart's audit ClusterRole)")) from None
    except ApiUnavailable as exc:
        raise SourceError(f"the API is not reachable: {exc}") from None
    finally:
        await client.close()
    return objects, version


LISTED_TEXT = "list permission on " + ", ".join(p for _, _, p in LISTED)
