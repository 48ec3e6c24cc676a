"""The cluster view: one list+watch per kind, indexes kept current per event, readiness and metrics.

    cache = ClusterCache(client, registry=registry)
    await cache.start()                 # background watches
    await cache.wait_synced(30)         # every initial list done
    cache.devices_for_node("node-a"); cache.is_allocated(device_id); cache.claims_for_pod(pod)
    cache.stale_kinds(max_age=120)      # kinds whose last event/list is older: turn not-ready
    await cache.stop()

Objects handed out are the cache's own: treat them as read-only.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from gpuclaim.dra.allocator import SharedUsage
from gpuclaim.dra.api import DeviceID, ResourceSlice
from gpuclaim.kube.backoff import Backoff
from gpuclaim.kube.claims import ClaimIndex
from gpuclaim.kube.client import KubeClient
from gpuclaim.kube.inventory import Inventory, PoolView
from gpuclaim.kube.metrics import CacheMetrics
from gpuclaim.kube.owned import OwnedCount
from gpuclaim.kube.reflector import Obj, Reflector, WatchSpec
from gpuclaim.kube.sharing import Interner
from gpuclaim.kube.version import ClusterVersion
from gpuclaim.tasks import stop_all

MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=gpuclaim"
Subscriber = Callable[[str, str, Obj], None]  # (kind, event type, object)
log = logging.getLogger(__name__)


def compact_metadata(obj: Obj, *, annotations: Collection[str] = ()) -> Obj:
    """Keep name, uid, resourceVersion, labels and the named annotations only.

    5,000 nodes with full status would cost hundreds of MB; consumers read labels (and the
    extender one topology annotation)."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels") if k in meta}
    wanted = {k: v for k, v in (meta.get("annotations") or {}).items() if k in annotations}
    if wanted:
        kept["annotations"] = wanted
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}


def compact_node(obj: Obj, *, annotations: Collection[str] = ()) -> Obj:
    """:func:`compact_metadata`, plus the extended resources of ``status.allocatable`` (a device plugin's
    ``nvidia.com/gpu: 8``), which tell a mixed node (kube/mixed.py); a few entries per GPU node, none elsewhere."""
    out = compact_metadata(obj, annotations=annotations)
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    extended = {k: v for k, v in allocatable.items() if isinstance(k, str) and "/" in k} \
        if isinstance(allocatable, Mapping) else {}
    if extended:
        out["status"] = {"allocatable": extended}
    return out


def default_specs(template_selector: str | None = None) -> tuple[WatchSpec, ...]:
    """What the cluster view watches. Templates: all of them by default, not only gpuclaim's, because the
    validating webhook checks that a pod's `resourceClaimTemplateName` exists and that its
    `resources.claims[].request` names a request the template has; templates are few and small.
    `template_selector=MANAGED_BY_SELECTOR` narrows the watch to gpuclaim's own."""
    resource = "resource.k8s.io/v1"
    return (
        WatchSpec("ResourceSlice", resource, "resourceslices"),
        WatchSpec("ResourceClaim", resource, "resourceclaims", namespaced=True),
        WatchSpec("DeviceClass", resource, "deviceclasses"),
        WatchSpec("ResourceClaimTemplate", resource, "resourceclaimtemplates", namespaced=True,
                  label_selector=template_selector or ""),
        WatchSpec("Namespace", "v1", "namespaces", compact=compact_metadata),
        WatchSpec("Node", "v1", "nodes", compact=compact_node),
    )


def taint_rule_spec() -> WatchSpec:
    """DeviceTaintRules, which kube-scheduler applies to devices before it allocates (dra/taints.py): v1 from 1.37,
    v1beta2 (1.36) and v1alpha3 (1.35) where their gate is turned on. Optional: a cluster that serves none of them
    (1.35/1.36 at default gates) has no rules, and start-up does not wait for them."""
    return WatchSpec("DeviceTaintRule", "resource.k8s.io/v1", "devicetaintrules", optional=True,
                     fallbacks=("resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"))


class ClusterCache:
    def __init__(self, client: KubeClient, *, registry: CollectorRegistry, rng: random.Random | None = None,
                 silence_timeout: float = 90.0, watch_timeout: float = 300.0, backoff_initial: float = 0.5,
                 backoff_cap: float = 30.0, backoff_factor: float = 2.0, backoff_jitter: float = 0.5,
                 specs: tuple[WatchSpec, ...] | None = None,
                 clock: Callable[[], float] = time.monotonic, version: ClusterVersion | None = None) -> None:
        self.client = client
        # the Kubernetes version, read from /version at start and after every list of any kind (kube/version.py)
        self.version = version
        self._listed = asyncio.Event()
        self.clock = clock
        self.specs = specs or default_specs()
        self.metrics = CacheMetrics(registry, [s.kind for s in self.specs])
        self.metrics.watch_ages(self.ages, lambda: self.synced)
        self.inventory = Inventory()
        self.claim_index = ClaimIndex()
        self.owned = OwnedCount()
        self._subscribers: list[Subscriber] = []
        self._tasks: list[asyncio.Task[None]] = []
        rng = rng or random.Random()
        interner = Interner()  # one table for all kinds: claims share strings with slices (pool, device names)
        handlers: dict[str, Callable[[Obj | None, Obj | None], None]] = {
            "ResourceSlice": self.inventory.on_slice, "Node": self.inventory.on_node,
            "ResourceClaim": self._on_claim, "DeviceClass": self.inventory.on_class,
            "ResourceClaimTemplate": self.owned.on_object,
        }
        self.reflectors: dict[str, Reflector] = {}
        for spec in self.specs:
            self.reflectors[spec.kind] = Reflector(
                client, spec, self._sink(spec.kind, handlers.get(spec.kind)),
                backoff=Backoff(initial=backoff_initial, cap=backoff_cap, factor=backoff_factor, jitter=backoff_jitter,
                                rng=random.Random(rng.getrandbits(64))),
                metrics=self.metrics, silence_timeout=silence_timeout, watch_timeout=watch_timeout, clock=clock,
                interner=interner, on_list=self._listed.set)

    def _on_claim(self, old: Obj | None, new: Obj | None) -> None:
        self.claim_index.on_claim(old, new)
        self.owned.on_object(old, new)

    def _sink(self, kind: str, handler: Callable[[Obj | None, Obj | None], None] | None
              ) -> Callable[[str, Obj | None, Obj | None], None]:
        def sink(event_type: str, old: Obj | None, new: Obj | None) -> None:
            if handler is not None:
                handler(old, new)
            obj = new if new is not None else old
            assert obj is not None
            for subscriber in self._subscribers:
                try:
                    subscriber(kind, event_type, obj)
                except Exception:  # one broken subscriber must not stop the watch of everyone else
                    log.exception("cluster cache subscriber failed on %s %s", kind, event_type)

        return sink

    # ---- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.version is not None:
            self._tasks.append(asyncio.create_task(self._follow_version(self.version), name="gpuclaim-version"))
        for kind, reflector in self.reflectors.items():
            self._tasks.append(asyncio.create_task(reflector.run(), name=f"gpuclaim-watch-{kind}"))

    async def _follow_version(self, version: ClusterVersion) -> None:
        """/version now, then once after each burst of lists: a relist is what a restarted (upgraded) control
        plane causes, so that is when the version may have changed."""
        await version.refresh(self.client)
        while True:
            await self._listed.wait()
            self._listed.clear()
            await version.refresh(self.client)

    async def stop(self) -> None:
        await stop_all(self._tasks)
        self._tasks.clear()

    async def wait_synced(self, within: float | None = None) -> None:
        """Raise TimeoutError naming the kinds still unlisted when `within` seconds pass."""
        try:
            async with asyncio.timeout(within):
                await asyncio.gather(*(r.synced.wait() for r in self.reflectors.values()))
        except TimeoutError:
            missing = sorted(k for k, r in self.reflectors.items() if not r.synced.is_set())
            raise TimeoutError(f"cluster cache not synced after {within}s: no initial list of {missing}") from None

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    # ---- readiness -----------------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors.values())

    def ages(self) -> dict[str, float | None]:
        """Seconds since each kind's last event, bookmark or successful list (None: never)."""
        now = self.clock()
        # an optional kind the cluster does not serve has nothing to go stale: 0, whatever its recheck interval
        return {k: 0.0 if r.spec.optional and r.served_version is None and r.synced.is_set()
                else None if r.last_activity is None else now - r.last_activity for k, r in self.reflectors.items()}

    def stale_kinds(self, max_age: float) -> list[str]:
        return sorted(k for k, age in self.ages().items() if age is None or age > max_age)

    def ready(self, max_age: float) -> bool:
        return self.synced and not self.stale_kinds(max_age)

    # ---- queries -------------------------------------------------------------------------------------------
    def objects(self, kind: str) -> Mapping[str, Obj]:
        """Every cached object of `kind`, keyed "namespace/name" or "name"."""
        return self.reflectors[kind].items

    def slices_for_node(self, node: str) -> list[Obj]:
        return self.inventory.slices_for_node(node)

    def parsed_slices_for_node(self, node: str) -> list[ResourceSlice]:
        return self.inventory.parsed_slices_for_node(node)

    def parsed_slices(self) -> Iterator[ResourceSlice]:
        return self.inventory.parsed_slices()

    def devices_for_node(self, node: str) -> Iterator[tuple[DeviceID, Obj, Obj]]:
        return self.inventory.devices_for_node(node)

    def pool(self, driver: str, name: str) -> PoolView | None:
        return self.inventory.pool(driver, name)

    def node_labels(self, node: str) -> Mapping[str, str] | None:
        return self.inventory.node_labels.get(node)

    def is_allocated(self, device: DeviceID) -> bool:
        return self.claim_index.is_allocated(device)

    def is_dedicated(self, device: DeviceID) -> bool:
        return self.claim_index.is_dedicated(device)

    def shared_usage(self, devices: Iterable[DeviceID]) -> SharedUsage:
        return self.claim_index.shared_usage(devices)

    def allocated_devices(self) -> frozenset[DeviceID]:
        return self.claim_index.allocated()

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self.claim_index.claims.get((namespace, name))

    def claims_for_pod(self, pod: Mapping[str, Any]) -> dict[str, Obj | None]:
        return self.claim_index.claims_for_pod(pod)

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        obj = self.reflectors["Namespace"].items.get(name)
        return None if obj is None else obj["metadata"].get("labels") or {}

    def taint_rules(self) -> Mapping[str, Obj]:
        """The DeviceTaintRules the cluster serves (none when DeviceTaintRule is not watched or not served)."""
        reflector = self.reflectors.get("DeviceTaintRule")
        return {} if reflector is None else reflector.items

    def device_class(self, name: str) -> Obj | None:
        return self.reflectors["DeviceClass"].items.get(name)

    def owned_count(self, namespace: str) -> int:
        """The ResourceClaimTemplates and shared ResourceClaims gpuclaim made in `namespace` (`kube.owned`)."""
        return self.owned.count(namespace)

    def template(self, namespace: str, name: str) -> Obj | None:
        """A gpuclaim-managed ResourceClaimTemplate (only those are watched)."""
        return self.reflectors["ResourceClaimTemplate"].items.get(f"{namespace}/{name}")
