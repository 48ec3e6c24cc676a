"""One scheduling cycle per pending pod, in kube-scheduler 1.34's order (pkg/scheduler/schedule_one.go).

    scheduler = Scheduler(client, extenders=[{"urlPrefix": "https://127.0.0.1:8444", "prioritizeVerb":
                                              "prioritize", "weight": 5, "enableHTTPS": True, "tlsConfig": {...}}])
    decisions = await scheduler.schedule_pending()
    await scheduler.close()

Per pod: PreEnqueue/PreFilter (its claims exist), Filter on every node (NodeAffinity's nodeSelector and
required node affinity, NodeResourcesFit for extended resources, then DynamicResources = `dra.allocator`, with
the scheduler's own KEP-5004 claim where the version makes one: `extended`), extender filters one after the
other on the survivors, then, with more than one feasible node, extender prioritize; Reserve/PreBind write each
new claim's `status.allocation` and `reservedFor` (after the `resource.kubernetes.io/delete-protection`
finalizer), create the scheduler's own claim and name it in the pod's `status.extendedResourceClaimStatus`, and
the pod is bound by setting `spec.nodeName` (the double serves no `pods/binding` subresource).

Scores: kube-scheduler's in-tree Score plugins (NodeResourcesFit, BalancedAllocation, ImageLocality...) are not
modelled: the in-tree baseline is 0 on every node, and DRA has no Score in 1.34. Each extender adds
`score * weight * (MaxNodeScore / MaxExtenderPriority)` = `score * weight * 10`. The highest total wins;
ties go to the node whose name sorts first (upstream draws at random; a double must be reproducible).
A filter error fails the pod's cycle unless the extender is `ignorable` (then it is skipped); prioritize
errors are always ignored, as upstream does. Every node is considered (upstream samples
`percentageOfNodesToScore` only above 100 nodes).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp

from gpuclaim.double.scheduler import dra, extended
from gpuclaim.double.scheduler.extenders import (
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ExtenderConfig,
    ExtenderError,
    HTTPExtender,
)
from gpuclaim.dra import allocator, taints, versions
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path

Obj = dict[str, Any]
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
_RESOURCE = "/apis/resource.k8s.io/v1"
Outcome = Literal["scheduled", "unschedulable", "waiting", "error"]


@dataclass(frozen=True, slots=True)
class Decision:
    namespace: str
    name: str
    outcome: Outcome
    node: str | None = None
    message: str = ""  # why not scheduled, as kube-scheduler words it ("0/3 nodes are available: ...")
    devices: Mapping[str, list[Obj]] = field(default_factory=dict)  # pod claim name -> allocation results
    scores: Mapping[str, int] = field(default_factory=dict)  # feasible node -> total score
    extender_scores: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # extender -> node -> score
    reasons: Mapping[str, str] = field(default_factory=dict)  # infeasible node -> why
    warnings: tuple[str, ...] = ()  # extender errors that were ignored

    def to_dict(self) -> Obj:
        return {"namespace": self.namespace, "name": self.name, "outcome": self.outcome, "node": self.node,
                "message": self.message, "devices": dict(self.devices), "scores": dict(self.scores),
                "extenderScores": {k: dict(v) for k, v in self.extender_scores.items()},
                "reasons": dict(self.reasons), "warnings": list(self.warnings)}


def fit_error(total: int, reasons: Mapping[str, str]) -> str:
    """FitError.Error(): "0/N nodes are available: <count> <reason>, ...." with the reasons sorted."""
    counts = collections.Counter(reasons.values())
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def _matches_affinity(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return required is None or dra.node_selector(required).matches(labels=labels, name=node["metadata"]["name"])


def _order(pod: Obj) -> tuple[int, str, str, str]:
    meta = pod["metadata"]
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    return (-priority, meta.get("creationTimestamp", ""), meta.get("namespace", ""), meta["name"])


class Scheduler:
    def __init__(self, client: KubeClient, *, extenders: Sequence[Mapping[str, Any]] = (),
                 scheduler_name: str = "default-scheduler") -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.configs = [ExtenderConfig.from_dict(raw, i) for i, raw in enumerate(extenders)]
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _extenders(self) -> list[HTTPExtender]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return [HTTPExtender(c, self._session) for c in self.configs]

    async def snapshot(self) -> tuple[list[Obj], dra.Snapshot]:
        async def items(path: str) -> list[Obj]:
            listed = await self.client.list(path)
            # typed lists carry apiVersion/kind once; the parsers (and extenders) want them on each object
            head = {"apiVersion": listed.get("apiVersion"), "kind": str(listed.get("kind", "")).removesuffix("List")}
            return [{**head, **item} for item in listed["items"]]

        async def rules(model: versions.KubernetesModel) -> list[Obj]:
            if not taints.rules_apply(model):  # its slice tracker does not read them
                return []
            return await items(resource_path(taints.RULE_API_VERSIONS[model.minor], "devicetaintrules"))

        model = await self._model()
        pods, nodes, claims, classes, slices, taint_rules = await asyncio.gather(
            items("/api/v1/pods"), items("/api/v1/nodes"), items(f"{_RESOURCE}/resourceclaims"),
            items(f"{_RESOURCE}/deviceclasses"), items(f"{_RESOURCE}/resourceslices"), rules(model))
        nodes.sort(key=lambda n: n["metadata"]["name"])
        return pods, dra.Snapshot.build(claims=claims, classes=classes, slices=slices, nodes=nodes, model=model,
                                        taint_rules=taint_rules, pods=pods)

    async def _model(self) -> versions.KubernetesModel:
        """The version kube-scheduler runs is the control plane's: its /version (the newest when unreadable)."""
        try:
            body = await self.client.get("/version")
            return versions.resolve(str(body.get("gitVersion"))).model
        except (ApiError, ApiUnavailable, versions.VersionError):
            return versions.NEWEST_MODEL

    def pending(self, pods: list[Obj]) -> list[Obj]:
        return sorted((p for p in pods if not (p.get("spec") or {}).get("nodeName")
                       and (p.get("spec") or {}).get("schedulerName", "default-scheduler") == self.scheduler_name
                       and (p.get("status") or {}).get("phase", "Pending") == "Pending"
                       and not p["metadata"].get("deletionTimestamp")), key=_order)

    async def schedule_pending(self) -> list[Decision]:
        """One cycle for every pending pod, in queue order; devices allocated for one pod count for the next."""
        pods, snapshot = await self.snapshot()
        extenders = self._extenders()
        decisions = []
        for pod in self.pending(pods):
            decision = await self.schedule_one(pod, snapshot, extenders)
            decisions.append(decision)
        return decisions

    async def schedule_one(self, pod: Obj, snapshot: dra.Snapshot, extenders: list[HTTPExtender]) -> Decision:
        decision = await self._decide(pod, snapshot, extenders)
        condition = {"scheduled": ("True", ""), "unschedulable": ("False", "Unschedulable"),
                     "error": ("False", "SchedulerError")}.get(decision.outcome)
        if condition is not None:  # what `kubectl describe pod` shows; PreEnqueue rejections write nothing
            await self._condition(pod, *condition, decision.message)
        return decision

    async def _condition(self, pod: Obj, status: str, reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition: Obj = {"type": "PodScheduled", "status": status, "lastProbeTime": None, "lastTransitionTime": now}
        if reason:
            condition.update(reason=reason, message=message)
        others = [c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") != "PodScheduled"]
        with contextlib.suppress(ApiError):  # the pod may be gone; the decision stands either way
            await self.client.patch(f"/api/v1/namespaces/{meta.get('namespace', '')}/pods/{meta['name']}/status",
                                    {"status": {"conditions": [*others, condition]}})

    async def _decide(self, pod: Obj, snapshot: dra.Snapshot, extenders: list[HTTPExtender]) -> Decision:
        meta = pod["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        try:
            claims = dra.pod_claims(pod, snapshot)
        except dra.PodNotReady as exc:
            return Decision(ns, name, "waiting", message=str(exc))
        reasons: dict[str, str] = {}
        fits: dict[str, dra.NodeFit] = {}
        for node in snapshot.nodes:
            node_name = node["metadata"]["name"]
            if not _matches_affinity(pod, node):
                reasons[node_name] = NODE_AFFINITY_REASON
                continue
            fit = dra.filter_node(node, claims, snapshot)
            if fit.error is not None:
                return Decision(ns, name, "error", message=f"running Filter plugin \"DynamicResources\": {fit.error}")
            if fit.ok:
                fits[node_name] = fit
            else:
                reasons[node_name] = fit.reason or dra.CANNOT_ALLOCATE
        feasible = [n for n in snapshot.nodes if n["metadata"]["name"] in fits]
        warnings: list[str] = []
        for extender in extenders:
            if not feasible or not extender.config.filter_verb or not extender.interested(pod):
                continue
            try:
                result = await extender.filter(pod, feasible)
            except ExtenderError as exc:
                if extender.config.ignorable:
                    warnings.append(f"extender {extender.config.name} filter ignored: {exc}")
                    continue
                return Decision(ns, name, "error", message=str(exc), reasons=reasons, warnings=tuple(warnings))
            kept = set(result.nodes)
            for node in feasible:
                node_name = node["metadata"]["name"]
                if node_name not in kept:
                    reasons[node_name] = result.failed.get(node_name, f"rejected by extender {extender.config.name}")
            feasible = [n for n in feasible if n["metadata"]["name"] in kept]
        if not feasible:
            return Decision(ns, name, "unschedulable", message=fit_error(len(snapshot.nodes), reasons),
                            reasons=reasons, warnings=tuple(warnings))
        scores, per_extender = await self._prioritize(pod, feasible, extenders, warnings)
        # nodes are sorted by name and max() keeps the first of equals: ties go to the name sorting first
        best = max(feasible, key=lambda n: scores[n["metadata"]["name"]])
        node_name = best["metadata"]["name"]
        try:
            devices = await self._bind(pod, node_name, claims, fits[node_name], snapshot)
        except ApiError as exc:
            return Decision(ns, name, "error", node=node_name, message=f"binding: {exc}", scores=scores,
                            extender_scores=per_extender, reasons=reasons, warnings=tuple(warnings))
        return Decision(ns, name, "scheduled", node=node_name, devices=devices, scores=scores,
                        extender_scores=per_extender, reasons=reasons, warnings=tuple(warnings))

    async def _prioritize(self, pod: Obj, feasible: list[Obj], extenders: list[HTTPExtender],
                          warnings: list[str]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        scores = {n["metadata"]["name"]: 0 for n in feasible}  # the in-tree baseline (module docstring)
        per_extender: dict[str, dict[str, int]] = {}
        if len(feasible) == 1:
            return scores, per_extender  # upstream skips scoring when only one node fits
        chosen = [e for e in extenders if e.config.prioritize_verb and e.interested(pod)]
        results = await asyncio.gather(*(e.prioritize(pod, feasible) for e in chosen), return_exceptions=True)
        for extender, result in zip(chosen, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, ExtenderError):
                    raise result
                warnings.append(f"extender {extender.config.name} prioritize ignored: {result}")
                continue
            scaled = {host: s * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY) for host, s in result.items()
                      if host in scores}
            per_extender[extender.config.name] = scaled
            for host, value in scaled.items():
                scores[host] += value
        return scores, per_extender

    async def _bind(self, pod: Obj, node: str, claims: dra.PodClaims, fit: dra.NodeFit,
                    snapshot: dra.Snapshot) -> dict[str, list[Obj]]:
        """Reserve + PreBind (claim allocation and reservedFor), then Bind."""
        meta = pod["metadata"]
        ns = meta.get("namespace", "")
        consumer = {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}
        devices: dict[str, list[Obj]] = {}
        for pod_claim, claim in claims.all.items():
            path = f"{_RESOURCE}/namespaces/{ns}/resourceclaims/{claim['metadata']['name']}"
            allocation = fit.allocations.get(pod_claim)
            if allocation is not None and DELETE_PROTECTION not in (claim["metadata"].get("finalizers") or ()):
                finalizers = [*(claim["metadata"].get("finalizers") or ()), DELETE_PROTECTION]
                claim = await self.client.update(path, {**claim, "metadata": {**claim["metadata"],
                                                                              "finalizers": finalizers}})
            status = dict(claim.get("status") or {})
            if allocation is not None:
                status["allocation"] = allocation.to_dict()
            reserved = list(status.get("reservedFor") or ())
            if not any(r.get("uid") == meta["uid"] for r in reserved):
                status["reservedFor"] = [*reserved, consumer]
            updated = await self.client.update(f"{path}/status", {**claim, "status": status})
            snapshot.claims[(ns, claim["metadata"]["name"])] = updated
            devices[pod_claim] = list(status["allocation"]["devices"]["results"])
            if allocation is not None:  # the next pod of this pass must not get the same devices
                snapshot.record(allocation)
        if fit.extended is not None and fit.extended.allocation is not None:
            devices[extended.CLAIM_KEY] = await self._bind_extended(pod, fit.extended, fit.extended.allocation,
                                                                    consumer, snapshot)
        await self.client.patch(f"/api/v1/namespaces/{ns}/pods/{meta['name']}", {"spec": {"nodeName": node}})
        snapshot.used.setdefault(node, collections.Counter()).update(claims.wanted)
        return devices

    async def _bind_extended(self, pod: Obj, claim: dra.ExtendedClaim, allocation: allocator.ClaimAllocation,
                             consumer: Obj, snapshot: dra.Snapshot) -> list[Obj]:
        """KEP-5004's PreBind: create the scheduler's own claim, allocate and reserve it, and name it in the pod's
        ``status.extendedResourceClaimStatus``."""
        meta = pod["metadata"]
        ns = meta.get("namespace", "")
        body = extended.claim_object(pod, claim.spec)
        body["metadata"]["finalizers"] = [DELETE_PROTECTION]
        created = await self.client.create(f"{_RESOURCE}/namespaces/{ns}/resourceclaims", body)
        name = created["metadata"]["name"]
        written = allocation.to_dict()
        status = {"allocation": written, "reservedFor": [consumer]}
        updated = await self.client.update(f"{_RESOURCE}/namespaces/{ns}/resourceclaims/{name}/status",
                                           {**created, "status": status})
        snapshot.claims[(ns, name)] = updated
        snapshot.record(allocation)
        await self.client.patch(f"/api/v1/namespaces/{ns}/pods/{meta['name']}/status",
                                {"status": {"extendedResourceClaimStatus": {
                                    "requestMappings": claim.mappings, "resourceClaimName": name}}})
        return list(written["devices"]["results"])

