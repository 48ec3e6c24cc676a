"""The demo's story against a running `Stack`: submit the workloads through the double's admission chain, let
the resourceclaim controller make the pods' claims, schedule each admitted pod with the scheduler double (DRA
feasibility from `dra/`, the extender's scores over HTTPS), and collect what happened into the report dict.

The scores' reasons come from the extender's own prediction code (`gpuclaim score`'s rows) run on a snapshot of
the double; before each pod is scheduled the demo checks that the live extender answers exactly those scores,
i.e. that its watch-fed cache has converged to the double's state (`converged` in the report).
"""

from __future__ import annotations

import asyncio
import copy
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jsonpatch
import orjson

from gpuclaim.certs.context import client_context
from gpuclaim.commands.score import rows as score_rows
from gpuclaim.demo import workloads as wl
from gpuclaim.demo.stack import Stack
from gpuclaim.double.controllers import ResourceClaimController
from gpuclaim.double.scheduler import HTTPExtender, Scheduler
from gpuclaim.dra.config import load_config
from gpuclaim.extender.offline import OfflineView
from gpuclaim.kube import KubeClient
from gpuclaim.kube import config as kube_config

Obj = dict[str, Any]
_WARNING = re.compile(r'^\d{3} \S+ "(.*)"$')
CONVERGE_TIMEOUT = 5.0
_LOCALITY = re.compile(r"\blocality (\d+(?:\.\d+)?)")


@dataclass
class Submitted:
    workload: wl.Workload
    status: int
    body: Obj
    warnings: list[str] = field(default_factory=list)

    @property
    def created(self) -> bool:
        return self.status in (200, 201)


def parse_warning(header: str) -> str:
    match = _WARNING.match(header)
    return match.group(1).replace('\\"', '"').replace("\\\\", "\\") if match else header


class Api:
    """kubectl's part: plain HTTPS requests to the double, keeping the `Warning` headers a client would print."""

    def __init__(self, stack: Stack) -> None:
        self.url = stack.api_url
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(ca_pem=stack.api_ca)))

    async def close(self) -> None:
        await self.session.close()

    async def create(self, path: str, obj: Obj, *, dry_run: bool = False) -> tuple[int, Obj, list[str]]:
        return await self.request("POST", path, obj, dry_run=dry_run)

    async def get(self, path: str) -> Obj:
        return (await self.request("GET", path))[1]

    async def delete(self, path: str) -> tuple[int, Obj, list[str]]:
        return await self.request("DELETE", path)

    async def request(self, method: str, path: str, obj: Obj | None = None, *,
                      dry_run: bool = False) -> tuple[int, Obj, list[str]]:
        params = {"dryRun": "All"} if dry_run else {}
        async with self.session.request(method, self.url + path, json=obj, params=params,
                                        headers={"Authorization": "Bearer double-token"}) as reply:
            raw = await reply.read()
            warnings = [parse_warning(w) for w in reply.headers.getall("Warning", [])]
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:  # not a Status: keep what the server said, for the report
            body = {"kind": "Status", "reason": "NotJSON", "message": raw.decode(errors="replace")[:500]}
        return reply.status, body if isinstance(body, dict) else {"message": str(body)}, warnings


def summarize_patch(submitted: Obj, stored: Obj) -> list[str]:
    """What the mutating webhook changed, as one line per JSONPatch operation on the spec and annotations."""
    before = {"metadata": {"annotations": submitted["metadata"].get("annotations") or {}}, "spec": submitted["spec"]}
    after = {"metadata": {"annotations": stored["metadata"].get("annotations") or {}},
             "spec": {k: v for k, v in stored["spec"].items() if k in submitted["spec"] or k in (
                 "resourceClaims", "nodeSelector", "affinity", "schedulerName")}}
    for container in after["spec"].get("containers") or ():  # the double's defaults are not the webhook's doing
        for key in ("imagePullPolicy", "terminationMessagePath", "terminationMessagePolicy"):
            container.pop(key, None)
    ops = jsonpatch.make_patch(before, after).patch
    lines = []
    for op in ops:
        value = op.get("value")
        shown = "" if op["op"] == "remove" else f" {_short(value)}"
        lines.append(f"{op['op']} {op['path']}{shown}")
    return lines


def _short(value: Any, limit: int = 110) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_requests(spec: Obj) -> list[str]:
    """A claim (or template) spec's requests in one line each: class, count, alternatives, selectors."""
    out = []
    for request in (spec.get("devices") or {}).get("requests") or ():
        if "exactly" in request:
            out.append(f"{request['name']}: {_exact(request['exactly'])}")
        for index, sub in enumerate(request.get("firstAvailable") or ()):
            out.append(f"{request['name']}/{sub['name']} (alternative {index + 1}): {_exact(sub)}")
    for constraint in (spec.get("devices") or {}).get("constraints") or ():
        out.append(f"constraint: requests {constraint.get('requests') or 'all'} matchAttribute "
                   f"{constraint.get('matchAttribute')}")
    return out


def _exact(request: Obj) -> str:
    mode = request.get("allocationMode", "ExactCount")
    count = "all" if mode == "All" else str(request.get("count", 1))
    text = f"{count} x {request.get('deviceClassName')}"
    selectors = [s["cel"]["expression"] for s in request.get("selectors") or () if "cel" in s]
    if selectors:
        text += " where " + " && ".join(f"({s})" for s in selectors)
    if request.get("adminAccess"):
        text += " [adminAccess]"
    return text


async def snapshot_objects(client: KubeClient) -> dict[str, list[Obj]]:
    paths = {"Pod": "/api/v1/pods", "Node": "/api/v1/nodes",
             "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
             "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
             "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
             "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices"}
    lists = await asyncio.gather(*(client.list(p) for p in paths.values()))
    out = {}
    for kind, listed in zip(paths, lists, strict=True):
        out[kind] = [{**item, "kind": kind, "apiVersion": listed["apiVersion"]} for item in listed["items"]]
    return out


class Scenario:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.config = load_config(None).extender

    async def run(self) -> Obj:
        started = time.monotonic()
        api = Api(self.stack)
        client = KubeClient(kube_config.from_kubeconfig(self.stack.kubeconfig))
        entries = [] if "extender" in self.stack.skipped else self.stack.extender_entries()
        scheduler = Scheduler(client, extenders=entries)
        session = aiohttp.ClientSession()
        try:
            submitted = [await self._submit(api, w) for w in wl.workloads()]
            controller = ResourceClaimController(client)
            await controller.sync_once()
            extenders = [HTTPExtender(c, session) for c in scheduler.configs]
            scheduled = await self._schedule(client, scheduler, extenders, submitted)
            final = await snapshot_objects(client)
            templates = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in final["ResourceClaimTemplate"]}
            claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in final["ResourceClaim"]}
            report_workloads = [self._entry(s, scheduled, templates, claims) for s in submitted]
            return {"workloads": report_workloads, "nodes": node_usage(final),
                    "controllerEvents": [e.reason + ": " + e.message for e in controller.events],
                    "seconds": round(time.monotonic() - started, 2)}
        finally:
            await session.close()
            await scheduler.close()
            await client.close()
            await api.close()

    async def _submit(self, api: Api, workload: wl.Workload) -> Submitted:
        status, body, warnings = await api.create(workload.path, workload.obj)
        return Submitted(workload, status, body, warnings)

    async def _schedule(self, client: KubeClient, scheduler: Scheduler, extenders: list[HTTPExtender],
                        submitted: list[Submitted]) -> dict[str, Obj]:
        """Schedule our admitted pods one at a time, each after the extender has converged to the double."""
        ours = [(s.workload.namespace, s.workload.name) for s in submitted if s.created and s.workload.kind == "Pod"]
        out: dict[str, Obj] = {}
        for namespace, name in ours:
            objects = await snapshot_objects(client)
            pods, snapshot = await scheduler.snapshot()
            pod = next(p for p in pods if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name)
            predicted = predictions(pod, objects, self.config)
            converged = await self._converge(pod, snapshot.nodes, predicted, extenders)
            decision = await scheduler.schedule_one(pod, snapshot, extenders)
            out[name] = {"decision": decision.to_dict(), "predicted": predicted, "converged": converged}
        return out

    async def _converge(self, pod: Obj, nodes: list[Obj], predicted: list[Obj],
                        extenders: list[HTTPExtender]) -> bool | None:
        """True once the live extender scores every node as the prediction on the double's state does."""
        if not extenders:
            return None
        wanted = {r["node"]: r["score"] or 0 for r in predicted}
        deadline = time.monotonic() + CONVERGE_TIMEOUT
        while True:
            try:
                got = await extenders[0].prioritize(pod, nodes)
            except Exception:  # the extender is down: scheduling goes on without it (ignorable)
                return False
            weight = extenders[0].config.weight
            if {host: score // weight for host, score in got.items()} == wanted:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)

    def _entry(self, s: Submitted, scheduled: Mapping[str, Obj], templates: Mapping[tuple[str, str], Obj],
               claims: Mapping[tuple[str, str], Obj]) -> Obj:
        w = s.workload
        entry: Obj = {"key": w.key, "title": w.title, "kind": w.kind, "namespace": w.namespace, "name": w.name,
                      "expected": w.expect, "httpStatus": s.status, "warnings": s.warnings}
        if not s.created:
            entry.update(admission="denied", reason=s.body.get("reason"), message=s.body.get("message"))
            return entry
        if w.kind != "Pod":
            entry.update(admission="created", patch=[])
            return entry
        patch = summarize_patch(w.obj, s.body)
        entry.update(admission="converted" if patch else "untouched", patch=patch)
        entry["claims"] = [self._claim_entry(s.body, rc, templates, claims) for rc in
                           s.body["spec"].get("resourceClaims") or ()]
        info = scheduled.get(w.name)
        if info is not None:
            d = info["decision"]
            entry["scheduling"] = {"outcome": d["outcome"], "node": d["node"], "message": d["message"],
                                   "devices": [f"{r['pool']}/{r['device']}" for rs in d["devices"].values()
                                               for r in rs],
                                   "extenderConverged": info["converged"], "warnings": d["warnings"]}
            by_node = {r["node"]: r for r in info["predicted"]}
            chosen = by_node.get(d["node"] or "")
            if chosen is not None:
                entry["scheduling"]["score"] = chosen["score"]
                entry["scheduling"]["reason"] = chosen["reason"]
            feasible = [by_node[n] for n in d["scores"] if n in by_node]
            entry["scheduling"]["bestFeasibleScore"] = max((r["score"] or 0 for r in feasible), default=None)
            entry["scheduling"]["feasibleNodes"] = len(d["scores"])
            entry["scheduling"]["locality"] = locality(chosen["reason"]) if chosen else None
            entry["scheduling"]["bestFeasibleLocality"] = max(
                (loc for r in feasible if (loc := locality(r["reason"])) is not None), default=None)
            entry["scheduling"]["alternatives"] = sorted(
                ({"node": r["node"], "score": r["score"], "reason": r["reason"]} for r in feasible
                 if r["node"] != d["node"]), key=lambda r: (-(r["score"] or 0), r["node"]))[:3]
        return entry

    @staticmethod
    def _claim_entry(pod: Obj, rc: Obj, templates: Mapping[tuple[str, str], Obj],
                     claims: Mapping[tuple[str, str], Obj]) -> Obj:
        namespace = pod["metadata"]["namespace"]
        if rc.get("resourceClaimTemplateName"):
            template = templates.get((namespace, rc["resourceClaimTemplateName"]))
            return {"name": rc["name"], "template": rc["resourceClaimTemplateName"],
                    "requests": describe_requests(template["spec"]["spec"]) if template else ["(template not found)"]}
        claim = claims.get((namespace, rc.get("resourceClaimName", "")))
        return {"name": rc["name"], "claim": rc.get("resourceClaimName"),
                "requests": describe_requests(claim["spec"]) if claim else ["(claim not found)"]}


def locality(reason: str) -> float | None:
    """The topology locality (0..1) the extender states in its reason; None when not applicable (one device)."""
    match = _LOCALITY.search(reason)
    return float(match.group(1)) if match else None


def predictions(pod: Obj, objects: Mapping[str, list[Obj]], config: Any) -> list[Obj]:
    """`gpuclaim score`'s rows for the pod on the double's current state (the extender's own prediction code), as
    the kube-scheduler of ``objects["Version"]`` (a /version body) would allocate; the newest without one."""
    from gpuclaim.dra import versions

    view_objects = [o for kind in ("ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "Node",
                                   "DeviceTaintRule") for o in objects.get(kind, ())]
    said = objects.get("Version")
    model = versions.resolve(str(said[0].get("gitVersion"))).model if said else versions.NEWEST_MODEL
    view = OfflineView(copy.deepcopy(view_objects), config=config, model=model)
    return score_rows(pod, view, config)


def node_usage(objects: Mapping[str, list[Obj]]) -> list[Obj]:
    """Per node: its devices (whole GPUs and MIG devices) and which claim holds each."""
    held: dict[tuple[str, str], str] = {}
    for claim in objects["ResourceClaim"]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or ():
            if not result.get("adminAccess"):
                held[(result["pool"], result["device"])] = f"{claim['metadata']['namespace']}/" \
                                                           f"{claim['metadata']['name']}"
    out = []
    for node in sorted(objects["Node"], key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        devices = []
        for s in objects["ResourceSlice"]:
            if s["spec"].get("nodeName") != name or s["spec"]["driver"] != "gpu.nvidia.com":
                continue
            for device in s["spec"].get("devices") or ():
                attrs = device.get("attributes") or {}
                devices.append({"name": device["name"], "type": (attrs.get("type") or {}).get("string"),
                                "pcieRoot": (attrs.get("resource.kubernetes.io/pcieRoot") or {}).get("string"),
                                "heldBy": held.get((name, device["name"]))})
        out.append({"node": name, "product": node["metadata"]["labels"].get("nvidia.com/gpu.product"),
                    "devices": devices, "used": sum(1 for d in devices if d["heldBy"]), "total": len(devices)})
    return out
