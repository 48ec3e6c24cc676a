"""The controllers a DRA cluster needs for pods to run, against the API double: kube-controller-manager's
resourceclaim controller and the part of the garbage collector that removes a pod's generated claims.

    controller = ResourceClaimController(client)
    await controller.start()        # watches pods, claims and templates; reconciles on every change
    ...
    await controller.stop()

Level-triggered: every wake-up (a watch event, a retry falling due, or `resync` seconds) lists pods, claims
and templates and reconciles all of them, which is simple and exact at the double's sizes (hundreds of pods).
`sync_once()` runs one pass directly (tests and the demo use it to step deterministically).

What it does, as upstream (pkg/controller/resourceclaim/controller.go) does it:
- a pod's `spec.resourceClaims[].resourceClaimTemplateName` gets a ResourceClaim created from the template:
  generateName `<pod>-<claim>-` (both parts cut proportionally beyond 57 characters), annotation
  `resource.kubernetes.io/pod-claim-name`, the template's labels and annotations, a controller
  ownerReference to the pod; then `pod.status.resourceClaimStatuses` names it;
- a missing template: a Warning record `FailedResourceClaimCreation` (the double serves no Events, so records
  are kept in `events`) and a retry with capped exponential backoff, forever;
- pods that are gone or done leave `reservedFor`; when the last consumer leaves, the allocation is cleared
  (and the `resource.kubernetes.io/delete-protection` finalizer removed); claims generated for a pod that is
  gone are deleted (the garbage collector's job), for a done pod once no longer reserved.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuclaim.kube.backoff import Backoff
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient
from gpuclaim.tasks import stop_all

Obj = dict[str, Any]
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
_RESOURCE = "/apis/resource.k8s.io/v1"
_DONE = ("Succeeded", "Failed")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerEvent:
    """What kube-controller-manager would record as an Event on the pod."""

    type: str  # Normal | Warning
    reason: str
    namespace: str
    name: str
    message: str


def generate_name(pod: str, claim: str) -> str:
    """Upstream's generateName for a pod's claim (63 characters with the apiserver's 5-character suffix)."""
    name = f"{pod}-{claim}-"
    limit = 57
    if len(name) > limit:
        # upstream cuts both parts in proportion, and drops the trailing hyphen in doing so
        name = pod[: len(pod) * limit // len(name)] + "-" + claim[: len(claim) * limit // len(name)]
    return name


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _owner_pod(claim: Obj) -> Obj | None:
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return dict(ref)
    return None


class ResourceClaimController:
    def __init__(self, client: KubeClient, *, resync: float = 30.0, backoff_initial: float = 0.2,
                 backoff_cap: float = 10.0, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, event_limit: int = 1000) -> None:
        self.client = client
        self.resync = resync
        self.clock = clock
        self.events: collections.deque[ControllerEvent] = collections.deque(maxlen=event_limit)
        self.passes = 0
        self._rng = rng or random.Random()
        self._backoff_initial, self._backoff_cap = backoff_initial, backoff_cap
        self._retry: dict[tuple[str, str, str], tuple[float, Backoff]] = {}  # (ns, pod, claim) -> (due, backoff)
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ---- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        for path in ("/api/v1/pods", f"{_RESOURCE}/resourceclaims", f"{_RESOURCE}/resourceclaimtemplates"):
            self._tasks.append(asyncio.create_task(self._watch(path), name=f"gpuclaim-double-watch {path}"))
        self._tasks.append(asyncio.create_task(self._loop(), name="gpuclaim-double-resourceclaim-controller"))

    async def stop(self) -> None:
        await stop_all(self._tasks)
        self._tasks.clear()

    async def _watch(self, path: str) -> None:
        backoff = self._backoff()
        while True:
            try:
                async with self.client.stream(path, params={"watch": "true", "allowWatchBookmarks": "true"},
                                              silence_timeout=120) as events:
                    async for event in events:
                        backoff.reset()
                        if event.get("type") != "BOOKMARK":
                            self._dirty.set()
            except (ApiError, ApiUnavailable, TimeoutError) as exc:
                log.info("resourceclaim controller: watch %s ended: %s", path, exc)
            # a dropped watch may have hidden changes: reconcile, then watch again
            self._dirty.set()
            await asyncio.sleep(backoff.next())

    async def _loop(self) -> None:
        backoff = self._backoff()
        while True:
            self._dirty.clear()
            try:
                wait = await self.sync_once()
                backoff.reset()
            except (ApiError, ApiUnavailable) as exc:
                log.warning("resourceclaim controller: sync failed, retrying: %s", exc)
                wait = backoff.next()
            # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancel that races the event being set,
            # and stop() would then wait forever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.resync if wait is None else min(wait, self.resync)):
                    await self._dirty.wait()

    def _backoff(self) -> Backoff:
        return Backoff(initial=self._backoff_initial, cap=self._backoff_cap,
                       rng=random.Random(self._rng.getrandbits(64)))

    # ---- one pass ------------------------------------------------------------------------------------------
    async def sync_once(self) -> float | None:
        """Reconcile every pod and claim once; return seconds until a pending retry falls due (None: none)."""
        self.passes += 1
        pods = {_key(p): p for p in (await self.client.list("/api/v1/pods"))["items"]}
        claims = (await self.client.list(f"{_RESOURCE}/resourceclaims"))["items"]
        for pod in pods.values():
            await self._sync_pod(pod, claims)
        uids = {p["metadata"].get("uid") for p in pods.values()}
        by_uid = {p["metadata"].get("uid"): p for p in pods.values()}
        for claim in claims:
            await self._sync_claim(claim, uids, by_uid)
        now = self.clock()
        live = {(ns, name) for ns, name in pods}
        self._retry = {k: v for k, v in self._retry.items() if (k[0], k[1]) in live}
        dues = [due - now for due, _ in self._retry.values()]
        return max(0.0, min(dues)) if dues else None

    async def _sync_pod(self, pod: Obj, claims: list[Obj]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in _DONE:
            return  # upstream: a pod that will not run needs no new claims
        namespace, name = meta.get("namespace", ""), meta["name"]
        current = {s["name"]: s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
        wanted = dict(current)
        for entry in spec.get("resourceClaims") or ():
            template = entry.get("resourceClaimTemplateName")
            if not template or entry["name"] in current:
                continue
            owned = [c for c in claims if c["metadata"].get("namespace") == namespace
                     and (_owner_pod(c) or {}).get("uid") == meta.get("uid")
                     and (c["metadata"].get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == entry["name"]]
            if owned:  # created on an earlier pass whose status write did not land
                wanted[entry["name"]] = {"name": entry["name"], "resourceClaimName": owned[0]["metadata"]["name"]}
                continue
            claim = await self._create_claim(pod, entry["name"], template)
            if claim is not None:
                claims.append(claim)
                wanted[entry["name"]] = {"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]}
        if wanted != current:
            order = [e["name"] for e in spec.get("resourceClaims") or () if e["name"] in wanted]
            await self.client.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                                    {"status": {"resourceClaimStatuses": [wanted[n] for n in order]}})

    async def _create_claim(self, pod: Obj, claim_name: str, template_name: str) -> Obj | None:
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        key = (namespace, name, claim_name)
        due = self._retry.get(key)
        if due is not None and due[0] > self.clock():
            return None
        try:
            template = await self.client.get(f"{_RESOURCE}/namespaces/{namespace}/resourceclaimtemplates/"
                                             f"{template_name}")
        except ApiError as exc:
            if exc.code != 404:
                raise
            backoff = due[1] if due is not None else self._backoff()
            self._retry[key] = (self.clock() + backoff.next(), backoff)
            self.events.append(ControllerEvent(
                "Warning", "FailedResourceClaimCreation", namespace, name,
                f'PodResourceClaim {claim_name}: resource claim template "{template_name}": {exc.message}'))
            return None
        self._retry.pop(key, None)
        tmeta = template.get("spec", {}).get("metadata") or {}
        body: Obj = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(name, claim_name), "namespace": namespace,
                "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_ANNOTATION: claim_name},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": template["spec"]["spec"],
        }
        if tmeta.get("labels"):
            body["metadata"]["labels"] = dict(tmeta["labels"])
        claim = await self.client.create(f"{_RESOURCE}/namespaces/{namespace}/resourceclaims", body)
        self.events.append(ControllerEvent("Normal", "ResourceClaimCreated", namespace, name,
                                           f"created ResourceClaim {claim['metadata']['name']} for {claim_name}"))
        return claim

    async def _sync_claim(self, claim: Obj, uids: set[Any], by_uid: dict[Any, Obj]) -> None:
        meta = claim["metadata"]
        path = f"{_RESOURCE}/namespaces/{meta.get('namespace', '')}/resourceclaims/{meta['name']}"
        owner = _owner_pod(claim)
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []

        def running(ref: Obj) -> bool:
            pod = by_uid.get(ref.get("uid"))
            return pod is not None and (pod.get("status") or {}).get("phase") not in _DONE \
                and not pod["metadata"].get("deletionTimestamp")

        valid = [r for r in reserved if r.get("resource") != "pods" or running(r)]
        if valid != reserved or (not valid and status.get("allocation")
                                 and DELETE_PROTECTION in (meta.get("finalizers") or ())):
            new_status = {k: v for k, v in status.items() if k != "reservedFor"}
            if valid:
                new_status["reservedFor"] = valid
            else:  # the last consumer is gone: deallocate, as upstream does for scheduler-made allocations
                new_status.pop("allocation", None)
                new_status.pop("devices", None)
            updated = await self.client.update(f"{path}/status", {**claim, "status": new_status})
            if not valid and DELETE_PROTECTION in (updated["metadata"].get("finalizers") or ()):
                finalizers = [f for f in updated["metadata"]["finalizers"] if f != DELETE_PROTECTION]
                updated = await self.client.update(path, {**updated, "metadata": {**updated["metadata"],
                                                                                  "finalizers": finalizers}})
            claim, reserved = updated, valid
        if owner is not None and (owner.get("uid") not in uids or (not reserved and not running(owner))):
            with contextlib.suppress(ApiError):  # already gone is fine
                await self.client.delete(path)
