"""HTTP glue: read the body, call the pure prediction, write the wire answer. Always 200 with JSON.

kube-scheduler treats any non-200 answer as a failed call, so every failure goes into the body: ``Error`` of
an ExtenderFilterResult for /filter. A HostPriorityList has no error field; a failed /prioritize answers the
same score (0) for every candidate it could read (``[]`` when even the names are unreadable, or more than
``extender.maxNodes``), which changes nothing in the ranking, and logs why (kube-scheduler ignores prioritize
failures anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar, cast

from aiohttp import web

from gpuclaim.serving import connections, expect, offload

from . import keys, mixed, predict, wire
from .readiness import Readiness
from .score import NodeVerdict

log = logging.getLogger(__name__)
JSON = "application/json"
# a call yields the loop between two nodes once it has held it this long; calls with more than _LONG candidates
# take turns (kube-scheduler sends 500 names at 5,000 nodes)
_SLICE_SECONDS = 0.002
_LONG = 1000
#: a body above this is decoded in slices (the webhook's threshold for its worker thread); below, one orjson call
#: is shorter than a slice
BIG_BODY_BYTES = offload.BIG_BODY_BYTES
#: big bodies one source may have read at once: with all of 50 clients' 1.45 MB bodies read at once, every loop
#: turn read 50 sockets and woke 50 handlers, and ordinary calls waited 23-36 ms at p99 (issue 22's
#: clients_50x50k); with 2, 6.8-8.1 ms (one body is read while the one before it is decoded)
BIG_READS_PER_SOURCE = 2
_T = TypeVar("_T")


async def _body(request: web.Request) -> bytes:
    """The body within the connection bounds: a body that does not arrive in time is answered 408 with the
    connection closed (gpuclaim.serving.connections), the one answer that is not a 200. A big body (or one of
    unknown length) is read only once its source holds fewer than `BIG_READS_PER_SOURCE` others being read; until
    then it stays in the kernel's buffers, and its read deadline has not started."""
    try:
        size = request.content_length
        if size is not None and size <= BIG_BODY_BYTES:
            return await connections.read_body(request)
        async with request.app[keys.BIG_READS].slot(connections.source_of(request.remote or "")):
            return await connections.read_body(request)
    except web.HTTPRequestEntityTooLarge:
        raise wire.WireError(f"request body over the limit of {request.client_max_size} bytes") from None


def _too_large(request: web.Request) -> web.Response:
    return web.Response(status=413, text=f"request body over the limit of {request.client_max_size} bytes\n")


#: the routes' `Expect: 100-continue` answer: a declared length past the limit is refused before the body is
#: invited (issue 22, item 7); kube-scheduler never sends the header, so no scheduling call gets this 413
expect_continue = expect.expect_handler(too_large=_too_large)


def _answer(body: bytes) -> web.Response:
    return web.Response(body=body, content_type=JSON)


async def _args(request: web.Request) -> wire.ExtenderArgs:
    body = await _body(request)
    max_nodes = request.app[keys.CONFIG].max_nodes
    if len(body) <= BIG_BODY_BYTES:
        return wire.decode_args(body, max_nodes=max_nodes)
    # decoded on the loop a slice at a time, one big body after the other: in one orjson call a 55 MB body stopped
    # the loop for seconds (issue 22), and decoded in a worker thread 50 bodies of 1.5 MB at once made the loop
    # wait for the GIL at every read and write while the worker held it (/healthz p99 79 ms, 27 ms like this)
    async with request.app[keys.LONG_CALLS]:
        return await _in_turns(wire.decode_args_in_steps(body, max_nodes=max_nodes))


async def _in_turns(steps: Generator[None, None, _T]) -> _T:
    """Run a step generator to its end on the loop, yielding the loop once it has run for `_SLICE_SECONDS`."""
    since = time.perf_counter()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(_T, done.value)
        if time.perf_counter() - since > _SLICE_SECONDS:
            await asyncio.sleep(0)
            since = time.perf_counter()


async def _verdicts(request: web.Request, args: wire.ExtenderArgs,
                    needed: Callable[[predict.PodRequest], bool] | None = None,
                    ) -> tuple[predict.PodRequest | None, list[NodeVerdict]]:
    """None when the pod has nothing to predict (no claims, or every claim allocated or invisible); no verdicts
    when ``needed`` says the caller's answer does not depend on them."""
    app = request.app
    metrics, view, config = app[keys.METRICS], app[keys.VIEW], app[keys.CONFIG]
    if not predict.needs_prediction(args.pod):
        metrics.pods.labels("without").inc()
        return None, []
    metrics.pods.labels("with").inc()
    pod_request = predict.resolve(args.pod, view, config, getattr(view, "parsed_claims", None))
    if pod_request.empty or (needed is not None and not needed(pod_request)):
        return pod_request, []
    names = args.node_names
    # predicted in slices with the loop yielded between them: a new pod shape over 5,000 nodes simulates for
    # 200-500 ms. A long list also waits for every other long one: the loop visits ready tasks in turn, and each
    # step of another request (read, handle, answer) would wait for a slice of every long request in flight
    async with app[keys.LONG_CALLS] if len(names) > _LONG else contextlib.nullcontext():
        verdicts: list[NodeVerdict] = []
        since = time.perf_counter()
        for verdict in predict.verdicts(pod_request, names, view, config):
            verdicts.append(verdict)
            if time.perf_counter() - since > _SLICE_SECONDS:
                await asyncio.sleep(0)
                since = time.perf_counter()
    return pod_request, verdicts


async def _encode_in_turns(verdicts: list[NodeVerdict]) -> bytes:
    """The HostPriorityList, encoded _LONG entries at a time with the loop yielded between them: in one go, 15,000
    candidates (extender.maxNodes) held the loop 7-9 ms after the sliced prediction, so a flood of such calls
    delayed every probe and ordinary call by that much each (issue 22, measured on the loaded 2-core machine)."""
    if len(verdicts) <= _LONG:
        return wire.encode_priorities([(v.node, v.score or 0) for v in verdicts])
    pieces: list[bytes] = []
    for start in range(0, len(verdicts), _LONG):
        pieces.append(wire.encode_priorities([(v.node, v.score or 0) for v in verdicts[start:start + _LONG]]))
        await asyncio.sleep(0)
    return wire.join_arrays(pieces)


async def prioritize(request: web.Request) -> web.Response:
    metrics = request.app[keys.METRICS]
    start = time.perf_counter()
    result = "ok"
    names: tuple[str, ...] = ()
    try:
        args = await _args(request)
        names = args.node_names
        _, verdicts = await _verdicts(request, args)
        if not verdicts:
            body = wire.encode_equal_priorities(names)
        else:
            metrics.observe_scores(v.score for v in verdicts)
            body = await _encode_in_turns(verdicts)
    except (wire.WireError, predict.PodError) as exc:
        result = "error"
        log.warning("prioritize: %s", exc)
        if isinstance(exc, wire.WireError):
            names = exc.node_names
        body = wire.encode_equal_priorities(names) if names else wire.encode_error_priorities()
    except web.HTTPException:
        raise  # the body read deadline (408)
    except Exception:
        result = "error"
        log.exception("prioritize failed")
        body = wire.encode_equal_priorities(names) if names else wire.encode_error_priorities()
    metrics.requests.labels("prioritize", result).inc()
    metrics.nodes.labels("prioritize").observe(len(names))
    metrics.duration.labels("prioritize").observe(time.perf_counter() - start)
    return _answer(body)


def _filter_needs_verdicts(pod_request: predict.PodRequest) -> bool:
    return bool(pod_request.required or pod_request.pinned)


async def filter_nodes(request: web.Request) -> web.Response:
    """Fails nodes for pods with the hard topology annotation, and nodes an allocated claim of the pod cannot be
    used on (as the in-tree Filter does); every other node passes."""
    metrics = request.app[keys.METRICS]
    start = time.perf_counter()
    result = "ok"
    args: wire.ExtenderArgs | None = None
    try:
        args = await _args(request)
        args, avoided = mixed.avoid(args, request.app[keys.MIXED])
        # only a hard topology annotation or an allocated claim can fail a node: for any other pod (every
        # converted one) every node passes, so nothing is predicted here and prioritize, the call that needs the
        # verdicts, is the only one per scheduling cycle that computes them (2026-11-27: with both computing
        # them, the extender took 3.1 ms of CPU per pod in the scheduler bench, 0.6 without its calls)
        pod_request, verdicts = await _verdicts(request, args, needed=_filter_needs_verdicts)
        if pod_request is not None and not pod_request.required and pod_request.pinned:
            # as kube-scheduler's own Filter: nodes an allocated claim of the pod cannot be used on fail
            passed = [v.node for v in verdicts if not v.pinned]
            failed = {v.node: f"gpuclaim: {v.reason}" for v in verdicts if v.pinned}
            metrics.filtered.inc(len(failed))
            body = wire.encode_filter_result(args=args, passed=passed, failed=failed)
        elif pod_request is None or not pod_request.required or not verdicts:
            body = wire.encode_filter_result(args=args, passed=args.node_names)
        else:
            passed, failed = [], {}
            wanted = ", ".join(pod_request.required)
            for v in verdicts:
                if v.satisfies(pod_request.required):
                    passed.append(v.node)
                elif v.score is None:
                    failed[v.node] = f"gpuclaim: {v.reason}"
                else:
                    failed[v.node] = f"gpuclaim: predicted devices are not inside one {wanted} domain ({v.reason})"
            metrics.filtered.inc(len(failed))
            body = wire.encode_filter_result(args=args, passed=passed, failed=failed)
        body = mixed.add_failed(body, avoided)
    except (wire.WireError, predict.PodError) as exc:
        result = "error"
        body = wire.encode_filter_result(args=None, error=f"gpuclaim extender: {exc}")
    except web.HTTPException:
        raise  # the body read deadline (408)
    except Exception as exc:
        result = "error"
        log.exception("filter failed")
        body = wire.encode_filter_result(args=None, error=f"gpuclaim extender: internal error: {exc}")
    metrics.requests.labels("filter", result).inc()
    metrics.nodes.labels("filter").observe(len(args.node_names) if args else 0)
    metrics.duration.labels("filter").observe(time.perf_counter() - start)
    return _answer(body)


async def healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    return _readiness_answer(request.app[keys.READINESS])


def readyz_of(readiness: Readiness) -> Callable[[web.Request], Awaitable[web.Response]]:
    """/readyz over `readiness` for another app (the metrics site's, which kubelet probes under mutual TLS)."""

    async def readyz_elsewhere(_request: web.Request) -> web.Response:
        return _readiness_answer(readiness)

    return readyz_elsewhere


def _readiness_answer(readiness: Readiness) -> web.Response:
    ok, lines = readiness.status()
    return web.Response(status=200 if ok else 503, text="\n".join(lines) + "\n")
