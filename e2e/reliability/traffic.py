"""Admission traffic: pods of known shapes submitted to the double as a controller would (retrying transient
failures until a definitive answer), with a ledger of what each submission ended as.

Definitive answers: 201 (the pod as stored), a denial with a reason (4xx other than 409/429), or 409 AlreadyExists
on a retry (an earlier attempt was created although its answer was lost: the stored pod is read back). Transient:
5xx (a webhook down under `failurePolicy: Fail` is a 500 "failed calling webhook"), 429, transport errors.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gpuclaim.demo.scenario import Api

Obj = dict[str, Any]
LEGACY_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


@dataclass(frozen=True, slots=True)
class Shape:
    key: str
    limits: tuple[tuple[str, Any], ...] = ()
    sharing: str | None = None
    product: str | None = None  # GFD nodeSelector
    expect: str = "converted"  # converted | untouched | denied

    @property
    def gpus(self) -> int:
        return sum(int(v) for k, v in self.limits if k.startswith(LEGACY_PREFIXES))


BASE_SHAPES = (
    Shape("gpu-1", (("nvidia.com/gpu", 1),)),
    Shape("gpu-2", (("nvidia.com/gpu", 2),)),
    Shape("gpu-4", (("nvidia.com/gpu", "4"),)),
    Shape("gpu-8", (("nvidia.com/gpu", 8),)),
    Shape("mig-1g", (("nvidia.com/mig-1g.5gb", 1),)),
    Shape("pinned-a100", (("nvidia.com/gpu", 1),), product="NVIDIA-A100-SXM4-40GB"),
    Shape("shared", (("nvidia.com/gpu", 1),), sharing="load-shared"),
    Shape("cpu", (("cpu", "1"),), expect="untouched"),
    Shape("bad-sharing-group", (("nvidia.com/gpu", 1),), sharing="Not_A_Label", expect="denied"),
)
#: shapes whose templates do not exist yet: submitted while template creation is slowed down
FRESH_SHAPES = tuple(Shape(f"gpu-{n}-fresh", (("nvidia.com/gpu", n),), product=p)
                     for n in (3, 5, 6) for p in ("NVIDIA-H100-80GB-HBM3", "Tesla-T4"))


def pod(name: str, namespace: str, shape: Shape) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": {"shape": shape.key}}
    if shape.sharing:
        meta["annotations"] = {"gpuclaim.io/sharing-group": shape.sharing}
    spec: Obj = {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                 "resources": {"limits": dict(shape.limits)}}]}
    if shape.product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": shape.product}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@dataclass
class Record:
    name: str
    namespace: str
    shape: Shape
    outcome: str = "pending"  # created | denied | lost
    status: int = 0
    message: str = ""
    stored: Obj | None = None
    attempts: int = 0
    transient: collections.Counter[str] = field(default_factory=collections.Counter)
    latency_s: float = 0.0  # the final attempt's


def _transient_kind(status: int, message: str) -> str:
    if "failed calling webhook" in message or "failed to call webhook" in message:
        return "webhook-unavailable"
    return f"http-{status}"


class Traffic:
    def __init__(self, api: Api, namespace: str, *, give_up_after: float = 60.0) -> None:
        self.api = api
        self.namespace = namespace
        self.give_up_after = give_up_after
        self.records: list[Record] = []
        self._seq = 0

    def next_name(self, shape: Shape) -> str:
        self._seq += 1
        return f"{shape.key}-{self._seq:06d}"

    async def submit(self, shape: Shape) -> Record:
        record = Record(self.next_name(shape), self.namespace, shape)
        self.records.append(record)
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        body = pod(record.name, self.namespace, shape)
        deadline = time.monotonic() + self.give_up_after
        delay = 0.05
        while True:
            record.attempts += 1
            started = time.monotonic()
            try:
                status, answer, _warnings = await self.api.create(path, body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, answer = 0, {"message": f"transport: {exc}"}
            record.latency_s = time.monotonic() - started
            message = str(answer.get("message") or "")
            if status == 201:
                record.outcome, record.status, record.stored = "created", status, answer
                return record
            if status == 409 and record.attempts > 1:
                record.outcome, record.status = "created", status
                record.stored = await self.api.get(f"{path}/{record.name}")
                return record
            if 400 <= status < 500 and status not in (409, 429):
                record.outcome, record.status, record.message = "denied", status, message
                return record
            record.transient[_transient_kind(status, message) if status else "transport"] += 1
            if time.monotonic() > deadline:
                record.outcome, record.status, record.message = "lost", status, message
                return record
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def stream(self, shapes: Callable[[int], Shape], *, rate: float, stop: asyncio.Event,
                     limit: int | None = None, concurrency: int = 8) -> None:
        """Submit at `rate` per second (at most `concurrency` in flight) until `stop` is set or `limit` reached."""
        slots = asyncio.Semaphore(concurrency)
        tasks: set[asyncio.Task[Record]] = set()
        interval = 1.0 / rate
        next_at = time.monotonic()
        sent = 0
        while not stop.is_set() and (limit is None or sent < limit):
            await slots.acquire()
            task = asyncio.create_task(self.submit(shapes(sent)))
            task.add_done_callback(lambda _t: slots.release())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if tasks:
            await asyncio.gather(*tasks)
