"""The reliability suite: the demo's stack (real processes, TLS, the chart's registrations but with
`failurePolicy: Fail`, so an outage shows as retries instead of silently unconverted pods), chaos under load,
then a sustained load with the webhook's RSS sampled. Returns one dict of figures (`python -m e2e.reliability`).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.reliability import invariants, load
from e2e.reliability.chaos import Chaos
from e2e.reliability.traffic import BASE_SHAPES, FRESH_SHAPES, Shape, Traffic
from gpuclaim.demo import inventory
from gpuclaim.demo.scenario import Api
from gpuclaim.demo.stack import DEMO_CONFIG, Stack
from gpuclaim.kube import KubeClient
from gpuclaim.kube import config as kube_config

Obj = dict[str, Any]
CHAOS_NAMESPACE = "chaos"
LOAD_NAMESPACE = "load"


@dataclass(frozen=True, slots=True)
class Sizes:
    chaos_rate: float  # admissions per second while the chaos steps run
    load_count: int
    load_rate: float


SHORT = Sizes(chaos_rate=8, load_count=300, load_rate=40)
LONG = Sizes(chaos_rate=15, load_count=6000, load_rate=40)


#: fail closed end to end: the webhook denies (so the client retries) when it cannot decide, e.g. when the API is
#: too slow to create a template; with the default `mutate: allow` such pods are admitted unconverted
FAIL_CLOSED_CONFIG: Obj = {**DEMO_CONFIG, "webhook": {"internalErrorPolicy": {"validate": "deny", "mutate": "deny"}}}


def registrations_fail_closed() -> list[Obj]:
    out = copy.deepcopy(inventory.registrations())
    for configuration in out:
        for hook in configuration["webhooks"]:
            hook["failurePolicy"] = "Fail"
    return out


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
                                                                  "labels": {"kubernetes.io/metadata.name": name}}}


async def run(workdir: Path, *, long: bool = False) -> Obj:
    sizes = LONG if long else SHORT
    started = time.monotonic()
    stack = Stack(workdir, config=FAIL_CLOSED_CONFIG)
    objects = [*inventory.build().objects, _namespace(CHAOS_NAMESPACE), _namespace(LOAD_NAMESPACE)]
    try:
        await asyncio.to_thread(stack.start, objects + registrations_fail_closed())
        if stack.skipped:
            return {"version": "1", "ok": False, "error": f"stack incomplete: {stack.skipped}"}
        start_s = time.monotonic() - started
        api = Api(stack)
        client = KubeClient(kube_config.from_kubeconfig(stack.kubeconfig))
        try:
            chaos_report = await _chaos(stack, api, client, sizes)
            load_report = await load.sustained(Traffic(api, LOAD_NAMESPACE), pid=stack.pids()["webhook"],
                                               count=sizes.load_count, rate=sizes.load_rate)
        finally:
            await client.close()
            await api.close()
    finally:
        await asyncio.to_thread(stack.stop)
    return {
        "version": "1",
        "mode": "long" if long else "short",
        "note": "real gpuclaim webhook/extender processes over TLS against the API double (not a kube-apiserver)",
        "stackStart_s": round(start_s, 2),
        "chaos": chaos_report,
        "load": load_report,
        "seconds": round(time.monotonic() - started, 2),
        "ok": chaos_report["ok"] and load_report["ok"],
    }


async def _chaos(stack: Stack, api: Api, client: KubeClient, sizes: Sizes) -> Obj:
    traffic = Traffic(api, CHAOS_NAMESPACE)
    chaos = Chaos(stack, api, client, traffic, CHAOS_NAMESPACE)
    base = itertools.cycle(BASE_SHAPES)
    fresh = itertools.cycle(FRESH_SHAPES)
    use_fresh = False

    def pick(_index: int) -> Shape:
        return next(fresh) if use_fresh else next(base)

    stop = asyncio.Event()
    stream = asyncio.create_task(traffic.stream(pick, rate=sizes.chaos_rate, stop=stop))
    steps: list[Obj] = []
    try:
        await asyncio.sleep(1.0)  # traffic flowing before the first blow
        steps.append(await chaos.run_step("webhook-restart", chaos.restart_webhook))
        steps.append(await chaos.run_step("extender-kill", chaos.kill_extender))
        steps.append(await chaos.run_step("watches-dropped", chaos.drop_watches))
        steps.append(await chaos.run_step("watch-410-expired", lambda: chaos.faults(
            [{"kind": "status", "code": 410, "verbs": ["watch"], "times": 8}])))
        steps.append(await chaos.run_step("list-watch-500", lambda: chaos.faults(
            [{"kind": "status", "code": 500, "verbs": ["list", "watch"], "times": 8}], hold=2.0)))
        use_fresh = True
        steps.append(await chaos.run_step("slow-template-creates", lambda: chaos.faults(
            [{"kind": "delay", "verbs": ["create"], "resources": ["resourceclaimtemplates"], "delaySeconds": 3.0,
              "times": 4}], drop=False, hold=4.0)))
        use_fresh = False
        steps.append(await chaos.run_step("certificate-rotation", chaos.rotate_certificates))
    finally:
        stop.set()
        await stream
    pods = {p["metadata"]["name"]: p for p in (await client.list(
        f"/api/v1/namespaces/{CHAOS_NAMESPACE}/pods"))["items"]}
    templates = {t["metadata"]["name"]: t for t in (await client.list(
        f"/apis/resource.k8s.io/v1/namespaces/{CHAOS_NAMESPACE}/resourceclaimtemplates"))["items"]}
    verdict = invariants.check(traffic.records, pods, templates)
    transient = sum(sum(r.transient.values()) for r in traffic.records)
    return {"steps": steps, "invariants": verdict, "transientFailuresRetried": transient,
            "ok": verdict["ok"] and all(s["ok"] for s in steps)}
