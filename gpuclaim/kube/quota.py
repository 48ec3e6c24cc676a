"""The quota controller (config ``quota``, docs/migration.md): keep a DRA-native quota beside each legacy GPU quota.

For every ResourceQuota with a ``requests.<resource>`` entry the conversion maps (dra/mapping.py), the elected
webhook replica keeps a ResourceQuota ``gpuclaim-<name>`` in the same namespace with the entry the converted pods'
claims are charged to (``<class>.deviceclass.resource.k8s.io/devices``, dra/quota.py). It never edits the admins'
quotas; it creates, updates (PUT with the resourceVersion read) and deletes (uid precondition) only its own, which
carry gpuclaim's labels and an ownerReference to the quota they keep. One reconcile per ``interval``: the quotas
are listed fresh (few, small objects); the DeviceClasses come from the cluster view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from gpuclaim.dra import quota as rules
from gpuclaim.dra import versions
from gpuclaim.dra.config import ConversionConfig
from gpuclaim.dra.mapping import MappingTable
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.kube.leader import LeaderElector, lead

Obj = dict[str, Any]
log = logging.getLogger(__name__)
ACTIONS = ("create", "update", "delete")


class QuotaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.writes = Counter("gpuclaim_quota_mirror_writes_total",
                              "Writes of the ResourceQuotas that keep legacy GPU quotas after conversion, by action",
                              ["action"], registry=registry)
        self.errors = Counter("gpuclaim_quota_errors_total", "API calls of a quota reconcile that failed",
                              registry=registry)
        self.mirrors = Gauge("gpuclaim_quota_mirrors", "Legacy GPU quotas kept by a DRA-native quota at the last "
                             "reconcile", registry=registry)
        self.unkept = Gauge("gpuclaim_quota_unkept_entries", "Legacy GPU quota entries that could not be kept at the "
                            "last reconcile (scoped quota, not a whole number)", registry=registry)
        self.leader = Gauge("gpuclaim_quota_leader", "1 while this replica holds the quota controller's lease",
                            registry=registry)
        for action in ACTIONS:
            self.writes.labels(action)


@dataclass
class ReconcileResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unkept: list[str] = field(default_factory=list)  # "namespace/name: why"


class QuotaController:
    def __init__(self, client: KubeClient, *, conversion: ConversionConfig, classes: Callable[[], Mapping[str, Any]],
                 registry: CollectorRegistry, page_size: int = 500,
                 model: Callable[[], versions.KubernetesModel] | None = None) -> None:
        self.client = client
        self.conversion = conversion
        self.classes = classes
        self.page_size = page_size
        self.metrics = QuotaMetrics(registry)
        self.follow = model  # the cluster view's model (kube/version.py), which follows upgrades
        self.model: versions.KubernetesModel | None = None

    async def kubernetes_model(self) -> versions.KubernetesModel:
        """The cluster view's model when given; else the cluster's, from ``/version`` once, the newest when that
        cannot be read (the entry name is the same on every supported version, so a guess costs nothing here)."""
        if self.follow is not None:
            return self.follow()
        if self.model is None:
            try:
                info = await self.client.get("/version")
                resolved = versions.resolve(str(info.get("gitVersion") or ""))
                for warning in resolved.warnings:
                    log.warning("quota: %s", warning)
                self.model = resolved.model
            except (ApiError, ApiUnavailable, versions.VersionError) as exc:
                log.warning("quota: cannot read the cluster's version (%s); using the %s model", exc,
                            versions.NEWEST_MODEL.name)
                return versions.NEWEST_MODEL
        return self.model

    async def list_quotas(self) -> list[Obj]:
        out: list[Obj] = []
        params = {"limit": str(self.page_size)}
        while True:
            page = await self.client.list(resource_path("v1", "resourcequotas"), params=params)
            out.extend(q for q in page.get("items") or () if isinstance(q, dict))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return out
            params = {"limit": str(self.page_size), "continue": token}

    async def reconcile(self, *, may_write: Callable[[], bool] = lambda: True) -> ReconcileResult:
        """One pass: every legacy GPU quota kept by its mirror, every mirror without a legacy quota to keep gone."""
        result = ReconcileResult()
        model = await self.kubernetes_model()
        table = MappingTable(self.conversion, self.classes())
        quotas = await self.list_quotas()
        mirrors = {_where(q): q for q in quotas if rules.is_mirror(q)}
        wanted: set[str] = set()
        for legacy in quotas:
            if rules.is_mirror(legacy):
                continue
            mirror = rules.mirror_of(legacy, table, model)
            result.unkept.extend(f"{_where(legacy)}: {p}" for p in mirror.problems)
            if not mirror.hard:
                continue
            desired = rules.mirror_object(legacy, mirror)
            where = _where(desired)
            wanted.add(where)
            if not may_write():
                return result
            await self._apply(desired, mirrors.get(where), result)
        for where, current in sorted(mirrors.items()):
            if where not in wanted and may_write():
                await self._delete(current, result)
        self.metrics.mirrors.set(len(wanted))
        self.metrics.unkept.set(len(result.unkept))
        for line in result.unkept:
            log.warning("quota: not kept after conversion: %s", line)
        return result

    async def _apply(self, desired: Obj, current: Obj | None, result: ReconcileResult) -> None:
        meta = desired["metadata"]
        where = _where(desired)
        try:
            if current is None:
                await self.client.create(resource_path("v1", "resourcequotas", namespace=meta["namespace"]), desired)
                self.metrics.writes.labels("create").inc()
                result.created.append(where)
                log.info("quota: created %s keeping %s", where, meta["annotations"][rules.MIRROR_OF_ANNOTATION])
            elif rules.differs(current, desired):
                body = {**desired, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
                await self.client.update(resource_path("v1", "resourcequotas", namespace=meta["namespace"],
                                                       name=meta["name"]), body)
                self.metrics.writes.labels("update").inc()
                result.updated.append(where)
                log.info("quota: updated %s to %s", where, desired["spec"]["hard"])
        except ApiError as exc:
            if exc.code != 409:  # 409: created or changed meanwhile; the next pass sees it
                log.warning("quota: cannot write %s: %s", where, exc)
                self.metrics.errors.inc()
        except ApiUnavailable as exc:
            log.warning("quota: cannot write %s: %s", where, exc)
            self.metrics.errors.inc()

    async def _delete(self, current: Obj, result: ReconcileResult) -> None:
        meta = current["metadata"]
        where = _where(current)
        path = resource_path("v1", "resourcequotas", namespace=meta["namespace"], name=meta["name"])
        try:
            await self.client.delete(path, preconditions={"uid": str(meta.get("uid", ""))})
        except ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("quota: cannot delete %s: %s", where, exc)
                self.metrics.errors.inc()
            return
        except ApiUnavailable as exc:
            log.warning("quota: cannot delete %s: %s", where, exc)
            self.metrics.errors.inc()
            return
        self.metrics.writes.labels("delete").inc()
        result.deleted.append(where)
        log.info("quota: deleted %s: no legacy GPU quota left to keep", where)


def _where(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


async def run(controller: QuotaController, elector: LeaderElector, *, interval: float,
              synced: Callable[[], Any] | None = None) -> None:
    """Hold the election and, while leading, reconcile every ``interval`` seconds; until cancelled, then release
    the lease (kube/leader.py ``lead``, as the garbage collector does)."""

    async def reconcile() -> None:
        try:
            await controller.reconcile(may_write=lambda: elector.is_leader)
        except (ApiError, ApiUnavailable) as exc:
            log.warning("quota: cannot list the ResourceQuotas: %s", exc)
            controller.metrics.errors.inc()
        except Exception:  # one bad pass must not end the controller for the life of the process
            log.exception("quota: reconcile failed")
            controller.metrics.errors.inc()

    await lead(elector, reconcile, interval=interval, name="gpuclaim-quota", leading=controller.metrics.leader.set,
               synced=synced)
