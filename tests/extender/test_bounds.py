"""What one request, or the verdicts of normal use, may cost the extender (issue 22, item 1), through HTTP:

- the verdicts cached per node and pod shape hold no encoded answer (each orjson.dumps result kept a ~4 KB buffer:
  64 shapes over 5,000 nodes took the extender from 289 to 1,685 MB);
- more candidates than ``extender.maxNodes`` are refused before anything is done per node, the field and the key
  named;
- a big body is decoded on the event loop in slices, one body at a time, and the loop keeps answering meanwhile;
  past ``extender.maxNodes`` names the decoding stops;
- a bad Pod with readable names still gets equal scores for every name (issue 23, item 7).
"""

from __future__ import annotations

import asyncio
import gc
import io
import time
import tracemalloc
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import Config, load_config
from gpuclaim.extender import app as extender_app
from gpuclaim.extender import predict
from gpuclaim.extender.offline import OfflineView

from . import fleet

NODES = 200
SHAPES = 8


def _shape(i: int) -> dict[str, Any]:
    """Distinct claim specs: one to four GPUs, each with its own (always true) selector."""
    return {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1 + i % 4,
                                                     "selectors": [{"cel": {"expression": (
                                                         f"device.attributes['gpu.nvidia.com'].productName != "
                                                         f"'shape-{i}'")}}]}}]}  # fmt: skip


def _view(config: Config, nodes: int = NODES) -> OfflineView:
    objects = [fleet.pairs_node(f"n{i:04d}") for i in range(nodes)]
    objects += [*fleet.gpu_classes(), *(fleet.template(f"t{i}", _shape(i)) for i in range(SHAPES + 1))]
    return OfflineView(objects, config=config.extender)


async def _client(aiohttp_client: Any, config: Config, view: OfflineView) -> Any:
    return await aiohttp_client(extender_app.create_app(config, view=view, registry=CollectorRegistry()))


def _args(pod: Any, names: list[str]) -> bytes:
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


async def test_the_cached_verdicts_of_many_pod_shapes_cost_hundreds_of_bytes_each(aiohttp_client: Any) -> None:
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config))
    names = [f"n{i:04d}" for i in range(NODES)]
    # the node states, the compiled class selector and the app's first-request costs are not what is measured
    assert (await client.post("/prioritize", data=_args(fleet.pod("t0"), names))).status == 200
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1, SHAPES + 1):
            resp = await client.post("/prioritize", data=_args(fleet.pod(f"t{i}"), names))
            scores = [e["Score"] for e in await resp.json()]
            assert len(scores) == NODES and min(scores) > 0
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 4.4 KB per verdict with an encoded entry in each; ~200 bytes without, plus each shape's parsed claim
    per_verdict = kept / (NODES * SHAPES)
    assert per_verdict < 1200, f"{per_verdict:.0f} bytes kept per cached verdict"


async def test_the_cached_verdicts_cost_the_cycle_collector_nothing(aiohttp_client: Any) -> None:
    # kept as objects, 64 shapes over 5,000 nodes were 320,000 objects each full collection walked (pauses of
    # 100-400 ms while the caches grew)
    config = load_config({})
    view = _view(config, nodes=4)
    client = await _client(aiohttp_client, config, view)
    names = [f"n{i:04d}" for i in range(4)]
    for i in range(3):
        assert (await client.post("/prioritize", data=_args(fleet.pod(f"t{i}"), names))).status == 200
    for _ in range(3):  # a tuple is untracked once what it holds is: at worst one level of nesting per pass
        gc.collect()
    cached = [packed for name in names for packed in view.node_state(name).verdicts.values()]  # type: ignore[union-attr]
    assert len(cached) == 12 and not any(gc.is_tracked(packed) for packed in cached)


def test_a_shape_in_steady_use_stays_cached_when_a_burst_of_new_shapes_arrives() -> None:
    # each node keeps 64 shapes; it forgot them all at once when full, so a burst of new shapes made every
    # shape in use cold again on every node (ordinary calls re-simulated during the bench's 64-shape phase)
    config = load_config({})
    templates = [fleet.template(f"s{i}", _shape(i)) for i in range(66)]
    view = OfflineView([fleet.pairs_node("n"), *fleet.gpu_classes(), *templates], config=config.extender)

    def ask(i: int) -> bytes:
        request = predict.resolve(fleet.pod(f"s{i}"), view, config.extender)
        predict.predict(request, ["n"], view, config.extender)
        return request.key

    steady = ask(0)
    for i in range(1, 64):
        ask(i)
        ask(0)
    burst = [ask(i) for i in (64, 65)]
    cached = view.node_state("n").verdicts  # type: ignore[union-attr]
    assert len(cached) == 64 and steady in cached and all(key in cached for key in burst)


async def test_a_long_candidate_list_is_predicted_while_the_loop_keeps_answering(aiohttp_client: Any) -> None:
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=1500))
    names = [f"n{i:04d}" for i in range(1500)]
    # the shape's selector compiled, two node states built: what is left is per node
    assert (await client.post("/prioritize", data=_args(fleet.pod("t1"), names[:2]))).status == 200
    # what predicting the same shape over as many fresh nodes costs in one go on this machine, now (0.8 s on a
    # quiet one): the bound below means the same whatever the machine's load
    other = _view(config, nodes=1500)
    request = predict.resolve(fleet.pod("t1"), other, config.extender)
    predict.predict(request, names[:2], other, config.extender)
    started = time.perf_counter()
    predict.predict(request, names, other, config.extender)
    in_one_go = time.perf_counter() - started
    gaps = await _gaps_during(client.post("/prioritize", data=_args(fleet.pod("t1"), names)))
    # a third of that, or the 0.15 s a probe tolerates where the machine is fast: a loaded machine's preemption
    # alone can stop a loop for tens of ms (one run at load 5-8 saw 219 ms against the old fixed bound)
    assert max(gaps) < max(in_one_go / 3, 0.15), (f"the event loop stood still {max(gaps) * 1000:.0f} ms; "
                                                  f"predicting in one go takes {in_one_go * 1000:.0f} ms")


async def _gaps_during(call: Any) -> list[float]:
    """The time between the ticks of a 2 ms ticker while `call` runs, the cycle collector off: its pauses in this
    process (the suite's heap) are not what is measured."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    gc.disable()
    try:
        resp = await call
        assert resp.status == 200
        await resp.read()
    finally:
        gc.enable()
        done.set()
        await ticker
    return gaps


async def test_more_candidates_than_max_nodes_are_refused_naming_the_field_and_the_key(aiohttp_client: Any) -> None:
    config = load_config({"extender": {"maxNodes": 10}})
    client = await _client(aiohttp_client, config, _view(config, nodes=4))
    names = [f"ghost-{i}" for i in range(11)]
    out = await (await client.post("/filter", data=_args(fleet.pod("t1"), names))).json()
    assert out["Error"] == ("gpuclaim extender: NodeNames: 11 candidate nodes, more than the 10 one request may name "
                            "(extender.maxNodes)")  # fmt: skip
    resp = await client.post("/prioritize", data=_args(fleet.pod("t1"), names))
    assert resp.status == 200 and await resp.json() == []
    nodes = {"Pod": fleet.pod("t1"), "Nodes": {"items": [{"metadata": {"name": n}} for n in names]}}
    out = await (await client.post("/filter", data=orjson.dumps(nodes))).json()
    assert out["Error"].startswith("gpuclaim extender: Nodes.items: 11 candidate nodes")
    # at the bound: answered
    resp = await client.post("/prioritize", data=_args(fleet.pod("t1"), names[:10]))
    assert [e["Host"] for e in await resp.json()] == names[:10]


async def test_a_big_body_is_decoded_while_the_loop_keeps_answering(aiohttp_client: Any) -> None:
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=2))
    # a Pod of 1.5 million annotations, 43 MB (the limit is 64 MiB), decoded whole (only NodeNames stops early):
    # what one orjson call on the loop would stop it for is measured here, on this machine, so the bound below
    # means the same on a fast one and a slow one
    pod = fleet.pod("t1")
    pod["metadata"]["annotations"] = {f"example.org/a-{i:07d}": "v" for i in range(1_500_000)}
    body = _args(pod, ["n0000", "n0001"])
    blocking = _on_loop_cost(body)
    answered: list[Any] = []

    async def call() -> Any:
        resp = await client.post("/filter", data=io.BytesIO(body))
        answered.append(await resp.json())
        return resp

    gaps = await _gaps_during(call())
    assert answered[0]["NodeNames"] == ["n0000", "n0001"], answered[0]
    print(f"one orjson call: {blocking * 1000:.0f} ms; longest loop gap: {max(gaps) * 1000:.0f} ms")
    assert max(gaps) < blocking / 2, (f"the event loop stood still {max(gaps) * 1000:.0f} ms; decoding on the loop "
                                      f"would have stopped it {blocking * 1000:.0f} ms")


def _on_loop_cost(body: bytes) -> float:
    """The shortest of three `orjson.loads(body)` calls: what the loop would stand still for if it decoded."""
    costs = []
    for _ in range(3):
        started = time.perf_counter()
        orjson.loads(body)
        costs.append(time.perf_counter() - started)
    return min(costs)


async def test_a_bad_pod_still_gets_equal_scores_for_every_name_that_could_be_read(aiohttp_client: Any) -> None:
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=2))
    for body in (b'{"Pod": 5, "NodeNames": ["a", "b"]}', b'{"NodeNames": ["a", "b"]}',
                 b'{"Pod": {"spec": []}, "NodeNames": ["a", "b"]}'):
        resp = await client.post("/prioritize", data=body)
        assert resp.status == 200 and await resp.json() == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": 0}]
    # names that cannot be read: nothing to score
    resp = await client.post("/prioritize", data=b'{"Pod": 5, "NodeNames": ["a", 3]}')
    assert resp.status == 200 and await resp.json() == []


async def test_a_long_answer_encoded_in_turns_is_the_answer_in_one_piece(aiohttp_client: Any) -> None:
    """More than 1,000 verdicts are encoded a thousand at a time with the loop yielded between (15,000 held it 7-9
    ms in one go): the answer is the same, every name once, in the order asked."""
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=300))
    names = [f"n{i:04d}" for i in range(300)] + [f"unknown-{i}" for i in range(2_350)]
    names = names[1::2] + names[::2]  # known and unknown nodes interleaved across the pieces
    resp = await client.post("/prioritize", data=_args(fleet.pod("t1"), names))
    answer = orjson.loads(await resp.read())
    assert [e["Host"] for e in answer] == names
    pieces = {}
    for start in range(0, len(names), 700):  # each below the threshold: encoded in one piece
        part = names[start:start + 700]
        pieces.update((e["Host"], e["Score"]) for e in orjson.loads(
            await (await client.post("/prioritize", data=_args(fleet.pod("t1"), part))).read()))
    assert {e["Host"]: e["Score"] for e in answer} == pieces
    assert any(e["Score"] > 0 for e in answer)


async def test_a_big_body_past_max_nodes_is_refused_without_reading_the_rest(aiohttp_client: Any) -> None:
    """A big body stops being decoded at the (maxNodes + 1)th name: the 50-client flood of 50,000 names each
    (issue 22) costs the loop 15,001 names a body, not 50,000. So a body broken after that many names is refused
    for its length; the same names within the bound, or a small body, are read to the end."""
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=2))
    names = [f"unknown-node-{i:07d}" for i in range(50_000)]
    broken = _args(fleet.pod("t1"), names)[:-3] + b", !]}"
    assert len(broken) > 256 * 1024  # decoded in slices
    out = await (await client.post("/filter", data=io.BytesIO(broken))).json()
    assert out["Error"] == ("gpuclaim extender: NodeNames: 15001 or more candidate nodes, more than the 15000 one "
                            "request may name (extender.maxNodes)")  # fmt: skip
    within = _args(fleet.pod("t1"), names[:15_000])[:-3] + b", !]}"
    assert len(within) > 256 * 1024
    out = await (await client.post("/filter", data=io.BytesIO(within))).json()
    assert out["Error"].startswith("gpuclaim extender: request body is not JSON")
    resp = await client.post("/prioritize", data=io.BytesIO(_args(fleet.pod("t1"), names[:15_000])))
    assert len(await resp.json()) == 15_000
    # the full-NodeList form (nodeCacheCapable: false) is bounded the same way, at Nodes.items
    items = [{"metadata": {"name": name}} for name in names]
    broken = orjson.dumps({"Pod": fleet.pod("t1"), "Nodes": {"items": items}})[:-3] + b", !]}}"
    out = await (await client.post("/filter", data=io.BytesIO(broken))).json()
    assert out["Error"] == ("gpuclaim extender: Nodes.items: 15001 or more candidate nodes, more than the 15000 one "
                            "request may name (extender.maxNodes)")  # fmt: skip


async def test_big_bodies_of_one_source_are_read_two_at_a_time_and_other_sources_go_on(aiohttp_client: Any) -> None:
    """While two big bodies from one source are being received (their clients stall halfway), a third from the same
    source is not read: its client gets no answer. A big body from another source is answered meanwhile, and the
    third is answered once one of the two completes (issue 22: 50 clients' bodies read at once made every loop turn
    read 50 sockets, and ordinary calls waited 23-36 ms at p99)."""
    config = load_config({})
    client = await _client(aiohttp_client, config, _view(config, nodes=2))
    body = _args(fleet.pod("t1"), [f"unknown-node-{i:06d}" for i in range(14_000)])
    assert len(body) > 256 * 1024
    head = (f"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip

    async def connect(source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(client.host, client.port, local_addr=(source, 0), limit=2**24)

    async def answer(reader: asyncio.StreamReader) -> bytes:
        status_line = await reader.readuntil(b"\r\n")
        headers = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))  # fmt: skip
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
        return await reader.readexactly(length)

    stalled = [await connect("127.0.0.1") for _ in range(2)]
    for _, writer in stalled:
        writer.write(head + body[: len(body) // 2])
        await writer.drain()
    await asyncio.sleep(0.2)  # both are being read
    third_reader, third_writer = await connect("127.0.0.1")
    third_writer.write(head + body)
    third = asyncio.create_task(answer(third_reader))
    other_reader, other_writer = await connect("127.0.0.2")
    other_writer.write(head + body)
    assert len(orjson.loads(await asyncio.wait_for(answer(other_reader), 30))) == 14_000
    await asyncio.sleep(0.3)
    assert not third.done(), "a third big body of one source was read while two were"
    first_writer = stalled[0][1]
    first_writer.write(body[len(body) // 2 :])
    assert len(orjson.loads(await asyncio.wait_for(answer(stalled[0][0]), 30))) == 14_000
    assert len(orjson.loads(await asyncio.wait_for(third, 30))) == 14_000
    for writer in (*(w for _, w in stalled), third_writer, other_writer):
        writer.close()
