"""`python -m e2e.bench.extender_steps [--one-piece]`: the event loop's longest step while the extender answers a
cached 15,000-candidate /prioritize (5,000 known nodes, 10,000 unknown names: a call at `extender.maxNodes`).

Measured as the loop thread's CPU time (`time.thread_time()`) between the ticks of a task that yields at every
loop turn, with the cycle collector off, so that neither the machine's load nor a collection counts: what a probe
or an ordinary call arriving meanwhile waits for at most, on a core of its own. `--one-piece` answers with the
encoding before issue 22's change (the whole HostPriorityList in one go) for comparison. Prints one line per run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

import aiohttp
import orjson
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import load_config
from gpuclaim.extender import app as extender_app
from gpuclaim.extender import handlers, wire
from gpuclaim.extender.offline import OfflineView
from gpuclaim.extender.score import NodeVerdict

NODES, UNKNOWN, CALLS = 5000, 10_000, 7


def _fleet() -> list[dict[str, Any]]:
    from gpuclaim.demo import inventory

    nodes = [o for o in inventory.build().objects if o["kind"] in ("Node", "ResourceSlice")]
    node = next(o for o in nodes if o["kind"] == "Node")
    slices = [o for o in nodes if o["kind"] == "ResourceSlice" and o["spec"]["nodeName"] == node["metadata"]["name"]]
    out: list[dict[str, Any]] = []
    for i in range(NODES):
        name = f"n{i:05d}"
        out.append({**node, "metadata": {**node["metadata"], "name": name}})
        out += [{**s, "metadata": {**s["metadata"], "name": f"{name}-{j}"},
                 "spec": {**s["spec"], "nodeName": name, "pool": {**s["spec"]["pool"], "name": name}}}
                for j, s in enumerate(slices)]
    classes = [o for o in inventory.build().objects if o["kind"] == "DeviceClass"]
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one", "namespace": "bench",
                             "labels": {"app.kubernetes.io/managed-by": "gpuclaim"}},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}  # fmt: skip
    return out + classes + [template]


async def _one_piece(verdicts: list[NodeVerdict]) -> bytes:
    return wire.encode_priorities([(v.node, v.score or 0) for v in verdicts])


async def main(one_piece: bool) -> None:
    if one_piece:
        handlers._encode_in_turns = _one_piece  # type: ignore[assignment]
    config = load_config({})
    view = OfflineView(_fleet(), config=config.extender)
    client = TestClient(TestServer(extender_app.create_app(config, view=view, registry=CollectorRegistry())))
    await client.start_server()
    names = [f"n{i:05d}" for i in range(NODES)] + [f"unknown-{i:06d}.cluster.internal" for i in range(UNKNOWN)]
    pod = {"metadata": {"name": "p", "namespace": "bench", "uid": "u"},
           "spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]}}
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
    # no client timeout: the first (cold) call over 5,000 nodes took over aiohttp's 5 minutes at load average 18
    unbounded = aiohttp.ClientTimeout(total=None)
    answer = orjson.loads(await (await client.post("/prioritize", data=body, timeout=unbounded)).read())
    assert len(answer) == len(names) and any(e["Score"] > 0 for e in answer), "the fleet did not score"
    worst: list[float] = []
    for _ in range(CALLS):
        steps: list[float] = []
        done = asyncio.Event()

        async def tick(steps: list[float] = steps, done: asyncio.Event = done) -> None:
            last = time.thread_time()
            while not done.is_set():
                await asyncio.sleep(0)
                now = time.thread_time()
                steps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        gc.disable()
        try:
            await (await client.post("/prioritize", data=body, timeout=unbounded)).read()
        finally:
            gc.enable()
            done.set()
            await ticker
        worst.append(max(steps) * 1000)
    await client.close()
    print(f"{'one piece' if one_piece else 'in turns'}: longest loop step per call, thread CPU ms: "
          + " ".join(f"{w:.1f}" for w in sorted(worst)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.extender_steps", description=__doc__)
    parser.add_argument("--one-piece", action="store_true", help="encode the answer in one go, as before")
    asyncio.run(main(parser.parse_args().one_piece))
