"""`python -m e2e.bench hostile [--quick]`: issue 14's hostile classes against a real webhook process (TLS, the
API double behind it) while ordinary traffic runs; what each class costs everyone else.

Processes: the API double, `gpuclaim webhook --kubeconfig` against it, and the attacker (this module run as
`python -m e2e.bench.hostile attack URL CA IDLE PODS METRICS_URL quick|full`), which sends each hostile class
in turn, then runs issue 22's phases (`_phase_*`: a one-source connection flood on the TLS and metrics ports,
slow readers, partial bodies), then holds idle TLS connections open and sends distinct 1.4 MB pods, and waits
while the webhook's RSS is read. The attacker connects from 127.0.0.2 (its big pods from 127.0.0.3): the
servers share their places per source, and kube-apiserver is not the attacker. This process runs the steady
load from 127.0.0.1: 100 ordinary admissions per second (pods to /mutate and claims to /validate, alternating),
20 /healthz probes per second on the TLS port and 10 on the metrics port (a new connection each, as kubelet's
liveness probe), each timed from the client, and reads the webhook's RSS 5 times a second.

Figures: `healthz_p99_ms` and `metrics_healthz_p99_ms` (target <= 50), `ordinary_p99_ms` (target <= 20),
`internal_errors` (target 0: an HTTP 500, a 500-coded denial, or an "internal error" / "admitted unchanged" /
"without gpuclaim's checks" answer, to ordinary or hostile requests), `rss_mb` (the webhook's RSS after the
idle connections and the big pods; target <= 300), `rss_peak_mb` (its VmHWM; target <= 512, the chart's
limit), per phase the same latencies and the RSS peak, and per class the HTTP status, the answer and the
seconds it took. Every process shares the machine's CPUs: `baseline_*` are the same figures over the first
seconds of steady load, before the attacker starts, so a loaded machine shows in them as well.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from e2e.bench import procs
from e2e.bench.webhook import (
    NAMESPACE,
    _percentile,
    _review,
    _wait_ready,
    claim_review,
    pod_review,
    webhook_on_double,
)
from gpuclaim.certs import client_context
from gpuclaim.double import tls as selfsigned

_INTERNAL = ("internal error", "admitted unchanged", "without gpuclaim's checks")


def _progress(text: str) -> None:
    print(f"bench hostile: {text}", file=sys.stderr, flush=True)


# ---- the hostile objects (issue 14's findings) ------------------------------------------------------------------


def _claim(uid: str, requests: list[dict[str, Any]]) -> bytes:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"h-{uid}", "namespace": NAMESPACE}, "spec": {"devices": {"requests": requests}}}
    return orjson.dumps(_review(uid, claim, "ResourceClaim", "resource.k8s.io", "resourceclaims"))


def _one(expression: str) -> list[dict[str, Any]]:
    return [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                        "selectors": [{"cel": {"expression": expression}}]}}]


def _or_chain(tag: str, size: int = 10_000) -> str:
    parts: list[str] = []
    total = 0
    while total < size - 120:
        part = f"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-{tag}-{len(parts)}'"
        parts.append(part)
        total += len(part) + 4
    return " || ".join(parts)


def _pod(uid: str, containers: list[dict[str, Any]], *, namespace: str = NAMESPACE, **spec: Any) -> bytes:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"h-{uid}", "namespace": namespace},
           "spec": {"containers": containers, **spec}}
    review = _review(uid, pod, "Pod", "", "pods")
    review["request"]["namespace"] = namespace
    return orjson.dumps(review)


def _ctr(limits: dict[str, Any], name: str = "c") -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"limits": limits}}


def big_pod(n: int, size: int = 1_400_000) -> bytes:
    """A distinct ~1.4 MB pod whose bulk is in what conversion reads (the containers' resources)."""
    limits: dict[str, Any] = {f"example.org/r{n}-{i:06d}": "1" for i in range(size // 28)}
    limits["nvidia.com/gpu"] = "1"
    return _pod(f"big-{n}", [_ctr(limits)])


def classes() -> list[tuple[str, str, Callable[[], bytes], dict[str, str]]]:
    """(name, path, body, extra headers)."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "In", "values": ["9" * 400]}]}]}}}
    flood = [{"name": f"r{r}", "firstAvailable": [
        {"name": f"s{s}", "deviceClassName": "gpu.nvidia.com",
         "selectors": [{"cel": {"expression": _or_chain(f"{r}-{s}")}}]} for s in range(8)]} for r in range(13)]
    return [
        ("1_regex_backtracking", "/validate",
         lambda: _claim("regex", _one("'" + "a" * 28 + "!'.matches('^(a+)+$')")), {}),
        ("2_compile_flood", "/validate", lambda: _claim("flood", flood), {}),
        ("3_quadratic_conversion", "/mutate",
         lambda: _pod("mig40k", [_ctr({f"nvidia.com/mig-{i + 1}g.{i + 1}gb": 1 for i in range(40_000)})]), {}),
        ("5_cel_injection", "/mutate", lambda: _pod("inject", [_ctr({"nvidia.com/mig-x'||true||'x'=='x": 1})]), {}),
        ("7_forged_namespace", "/mutate",
         lambda: _pod("forged", [_ctr({"nvidia.com/gpu": 1})], namespace="../../../api/v1/secrets"), {}),
        ("8_nested_parentheses", "/validate", lambda: _claim("parens", _one("(" * 2000 + "true" + ")" * 2000)), {}),
        ("8_not_chain", "/validate", lambda: _claim("nots", _one("!" * 249 + "(device.driver == 'x')")), {}),
        ("8_huge_quantity", "/validate", lambda: _claim("q", _one(
            "'memory' in device.capacity['gpu.nvidia.com'] && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1e400')) >= 0")), {}),
        ("8_400_digit_affinity", "/mutate",
         lambda: _pod("digits", [_ctr({"nvidia.com/gpu": 1})], affinity=affinity), {}),
        ("8_garbled_gzip", "/mutate", lambda: b"\x1f\x8b\x08\x00garbage" * 100, {"Content-Encoding": "gzip"}),
        ("8_gzip_of_garbage", "/validate", lambda: gzip.compress(b"{not json" * 1000), {"Content-Encoding": "gzip"}),
        ("8_5000_bad_containers", "/mutate",
         lambda: _pod("many", [_ctr({"nvidia.com/gpu": "1.5"}, name=f"c{i}") for i in range(5000)]), {}),
        ("9_zero_gpus", "/mutate", lambda: _pod("zero", [_ctr({"nvidia.com/gpu": 0, "cpu": "1"})]), {}),
    ]


def _verdict(status: int, data: bytes) -> dict[str, Any]:
    """What came back, and whether it is an internal error."""
    out: dict[str, Any] = {"http": status}
    text = data.decode(errors="replace")
    try:
        response = orjson.loads(data).get("response") or {}
    except (orjson.JSONDecodeError, AttributeError):
        response = {}
    if response:
        out["allowed"] = response.get("allowed")
        if response.get("status"):
            out["code"] = response["status"].get("code")
            out["message"] = str(response["status"].get("message"))[:200]
            out["message_bytes"] = len(str(response["status"].get("message")))
    elif status != 200:
        out["message"] = text[:200]
    out["internal_error"] = (status >= 500 or out.get("code") == 500
                             or any(m in text for m in _INTERNAL))
    return out


# ---- the attacker process ---------------------------------------------------------------------------------------


# The attacker is one source, kube-apiserver and kubelet (this process's steady load and probes) another: the
# servers share their places per source (issue 22, item 3), and loopback has addresses enough to show it. The
# big pods come from a third, so that the idle connections held meanwhile do not take their places.
ATTACKER_SOURCE = "127.0.0.2"
BIG_PODS_SOURCE = "127.0.0.3"


def _say(doc: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    sys.stdout.flush()


async def _attack(url: str, ca_pem: bytes, idle: int, pods: int, metrics_url: str, quick: bool) -> None:
    say = _say
    ctx = client_context(ca_pem=ca_pem)
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(ssl=ctx, limit=4, local_addr=(ATTACKER_SOURCE, 0))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for name, path, body, headers in classes():
            data = body()
            started = time.perf_counter()
            try:
                async with session.post(url + path, data=data,
                                        headers={"Content-Type": "application/json", **headers}) as response:
                    answer = _verdict(response.status, await response.read())
            except (aiohttp.ClientError, TimeoutError) as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}", "internal_error": True}
            say({"class": name, "seconds": round(time.perf_counter() - started, 3), "bytes": len(data), **answer})
            await asyncio.sleep(0.2)
        say(await forged_shapes(session, url, min(10_000, pods * 40)))
        # issue 22, items 3-5: each phase its own function, announced with a start and an end line
        for phase in (_phase_connection_flood, _phase_slow_readers, _phase_partial_bodies):
            name = phase.__name__.removeprefix("_phase_")
            say({"phase": name, "at": "start"})
            say({"phase": name, "at": "end", **await phase(url, metrics_url, ctx, quick)})
        # finding 4: idle TLS connections (handshake done, then silence), then distinct 1.4 MB pods
        host, _, port = url.removeprefix("https://").rpartition(":")
        held: list[asyncio.StreamWriter] = []
        refused = 0
        for _ in range(idle):
            try:  # past webhook.maxConnections the webhook resets a new connection as it accepts it
                _reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx,
                                                                local_addr=(ATTACKER_SOURCE, 0))
                held.append(writer)
            except OSError:
                refused += 1
        say({"class": "4_idle_connections", "opened": len(held), "refused": refused})
        say({"measure": "idle"})
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started = time.perf_counter()
        statuses: dict[str, int] = {}
        internal = 0
        big_connector = aiohttp.TCPConnector(ssl=ctx, limit=4, local_addr=(BIG_PODS_SOURCE, 0))
        big_session = aiohttp.ClientSession(connector=big_connector, timeout=timeout)
        for n in range(pods):
            try:
                async with big_session.post(url + "/mutate", data=big_pod(n),
                                        headers={"Content-Type": "application/json"}) as response:
                    answer = _verdict(response.status, await response.read())
            except (aiohttp.ClientError, TimeoutError) as exc:  # e.g. a new connection refused at the cap
                answer = {"http": type(exc).__name__, "internal_error": False}
            key = f"{answer['http']}/{answer.get('allowed')}"
            statuses[key] = statuses.get(key, 0) + 1
            internal += answer["internal_error"]
        await big_session.close()
        say({"class": "4_big_pods", "pods": pods, "seconds": round(time.perf_counter() - started, 3),
             "answers": statuses, "internal_error": bool(internal)})
        still_open = sum(1 for w in held if not w.is_closing() and not w.transport.is_closing())
        say({"measure": "final", "idle_still_open": still_open})
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for writer in held:
            writer.close()


async def forged_shapes(session: aiohttp.ClientSession, url: str, count: int) -> dict[str, Any]:
    """Issue 22, item 6: forged /mutate reviews of `count` distinct shapes (a GPU pod pinned to a made-up product
    each) in the steady load's namespace. The bench's webhook runs without client authentication, as a caller the
    chart's default would refuse; what bounds them is `conversion.maxObjectsPerNamespace`: the first ones are
    converted (each makes a template), the rest refused at the cap, none admitted with its legacy limit."""
    answers: dict[str, int] = {}
    unconverted = internal = 0
    started = time.perf_counter()

    async def one(n: int) -> None:
        nonlocal unconverted, internal
        body = _pod(f"forged-shape-{n}", [_ctr({"nvidia.com/gpu": 1})],
                    nodeSelector={"nvidia.com/gpu.product": f"FORGED-{n:06d}"})
        try:
            async with session.post(url + "/mutate", data=body, headers={"Content-Type": "application/json"}
                                    ) as response:
                data = await response.read()
                answer = _verdict(response.status, data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            answer = {"http": type(exc).__name__, "internal_error": True}
            data = b""
        if answer.get("allowed") is True:
            key = "converted" if b'"patch"' in data else "admitted_unconverted"
            unconverted += key == "admitted_unconverted"
        elif b"maxObjectsPerNamespace" in data:
            key = "refused_at_cap"
        else:
            key = f"{answer['http']}/{answer.get('code')}"
        answers[key] = answers.get(key, 0) + 1
        internal += bool(answer["internal_error"])

    for first in range(0, count, 4):
        await asyncio.gather(*(one(n) for n in range(first, min(first + 4, count))))
    return {"class": "22_forged_shapes", "sent": count, "seconds": round(time.perf_counter() - started, 3),
            "answers": answers, "admitted_unconverted": unconverted, "internal_error": bool(internal or unconverted)}


# ---- issue 22's phases: a one-source connection flood, slow readers, partial bodies -------------------------------


def _host_port(url: str) -> tuple[str, int]:
    host, _, port = url.split("://", 1)[1].rpartition(":")
    return host, int(port)


async def _open_many(url: str, count: int, ssl_context: ssl.SSLContext | None) -> tuple[list[asyncio.StreamWriter],
                                                                                         int]:
    """Up to `count` connections from the attacker's source (TLS handshakes done when `ssl_context`), 50 at a
    time; (those open, those refused)."""
    host, port = _host_port(url)

    async def one() -> asyncio.StreamWriter | None:
        try:
            async with asyncio.timeout(10):
                _reader, writer = await asyncio.open_connection(
                    host, port, ssl=ssl_context, server_hostname=host if ssl_context else None,
                    local_addr=(ATTACKER_SOURCE, 0))
                return writer
        except (OSError, TimeoutError):
            return None

    opened: list[asyncio.StreamWriter] = []
    for start in range(0, count, 50):
        opened += [w for w in await asyncio.gather(*(one() for _ in range(start, min(start + 50, count)))) if w]
    await asyncio.sleep(0.5)  # a plain connection reset at accept was connected first: its reset arrives after
    kept = [w for w in opened if not w.transport.is_closing()]
    for writer in opened:
        if writer.transport.is_closing():
            writer.close()
    return kept, count - len(kept)


async def _phase_connection_flood(url: str, metrics_url: str, ctx: ssl.SSLContext, quick: bool) -> dict[str, Any]:
    """One source opens as many connections as it can on the TLS port and on the metrics port and holds them
    (item 3: before, it took all 1,024 places of each and kube-apiserver's and kubelet's were reset)."""
    tries, hold = (600, 4.0) if quick else (1500, 8.0)
    started = time.perf_counter()
    main, main_refused = await _open_many(url, tries, ctx)
    metrics, metrics_refused = await _open_many(metrics_url, tries, None)
    await asyncio.sleep(hold)  # below headerSeconds (10): the server has not closed them yet
    still_open = sum(1 for w in main + metrics if not w.transport.is_closing())
    for writer in main + metrics:
        writer.close()
    return {"tries_per_port": tries, "tls_opened": len(main), "tls_refused": main_refused,
            "metrics_opened": len(metrics), "metrics_refused": metrics_refused, "still_open_after_hold": still_open,
            "seconds": round(time.perf_counter() - started, 2)}


async def _phase_slow_readers(url: str, metrics_url: str, ctx: ssl.SSLContext, quick: bool) -> dict[str, Any]:
    """Connections that ask for many answers at once (20,000 pipelined /readyz, ~4.8 MB of answers: more than
    the kernel's socket buffers take, so the rest waits in the server) and never read one (item 5: an unread
    answer pinned its memory and its handler for good). Blocking sockets in threads, with small receive
    buffers, so that nothing reads for them."""
    import socket

    count = 2 if quick else 6
    host, port = _host_port(url)
    pipelined = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n" * 20_000

    def send() -> Any:
        raw = socket.socket()
        try:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.bind((ATTACKER_SOURCE, 0))
            raw.settimeout(20)
            raw.connect((host, port))
            tls = ctx.wrap_socket(raw, server_hostname=host)
            tls.sendall(pipelined)
            return tls
        except OSError:
            raw.close()
            return None

    started = time.perf_counter()
    gauge = 'gpuclaim_connections_open{site="main"}'
    before = await _server_gauge(metrics_url, gauge)
    sockets = await asyncio.gather(*(asyncio.to_thread(send) for _ in range(count)))
    sent = [t for t in sockets if t is not None]
    during = await _server_gauge(metrics_url, gauge)
    # until the server dropped them (writeSeconds, 10, after their answers filled the buffers), at most 60 s;
    # the server's own count: the client cannot tell a reset from a TLS record still coming without reading
    after = during
    while after > before and time.perf_counter() - started < 60:
        await asyncio.sleep(0.5)
        after = await _server_gauge(metrics_url, gauge)
    for tls in sent:
        tls.close()
    return {"connections": count, "sent": len(sent), "pipelined_requests_each": 20_000,
            "server_open_before": before, "server_open_sent": during, "server_open_at_end": after,
            "seconds_until_dropped": round(time.perf_counter() - started, 2)}


async def _server_gauge(metrics_url: str, series: str) -> float:
    async with (aiohttp.ClientSession() as session, session.get(metrics_url + "/metrics") as response):
        for line in (await response.text()).splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
    return float("nan")


async def _phase_partial_bodies(url: str, metrics_url: str, ctx: ssl.SSLContext, quick: bool) -> dict[str, Any]:
    """Connections that send a 3 MiB-minus-one-byte body but its last byte (item 5: 120 of them took the webhook
    from 284 to 829 MB); the body budget answers 429 past the source's share."""
    count = 40 if quick else 120
    size = 3 * 1024 * 1024 - 1
    host, port = _host_port(url)
    head = (f"POST /mutate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()
    filler = b" " * (size - 1)
    statuses: dict[str, int] = {}

    async def one() -> None:
        key = "reset"
        try:
            async with asyncio.timeout(30):
                reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host,
                                                               local_addr=(ATTACKER_SOURCE, 0))
                try:
                    writer.write(head)
                    sender = asyncio.create_task(_send_quietly(writer, filler))
                    line = await reader.readline()  # 429 at once, or 408 at the body bound
                    key = line.split(b" ")[1].decode() if line.count(b" ") >= 2 else "closed"
                    sender.cancel()
                finally:
                    writer.close()
        except (OSError, TimeoutError):
            pass
        statuses[key] = statuses.get(key, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return {"connections": count, "declared_bytes": size, "answers": statuses,
            "seconds": round(time.perf_counter() - started, 2)}


async def _send_quietly(writer: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        writer.write(data)
        await writer.drain()


# ---- the steady load and the figures ----------------------------------------------------------------------------


Samples = list[tuple[float, float]]  # (when the request started, seconds it took), perf_counter clock


async def _probe_metrics_port(metrics_url: str, stop: asyncio.Event, samples: Samples, errors: list[str]) -> None:
    """kubelet's liveness probe on the metrics port, 10 a second: a new connection each time, as kubelet makes."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=5)) as session:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                async with session.get(metrics_url + "/healthz") as response:
                    await response.read()
                    if response.status != 200:
                        errors.append(f"metrics healthz {response.status}")
                samples.append((started, time.perf_counter() - started))
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors.append(f"metrics healthz {type(exc).__name__}: {exc}")
            await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - started)))


async def _sample_rss(pid: int, stop: asyncio.Event, samples: Samples) -> None:
    """The webhook's RSS (MB) 5 times a second, for each phase's peak."""
    while not stop.is_set():
        samples.append((time.perf_counter(), procs.rss_mb(pid)))
        await asyncio.sleep(0.2)


async def _steady(session: aiohttp.ClientSession, url: str, stop: asyncio.Event, ordinary: Samples,
                  healthz: Samples, errors: list[str]) -> None:
    async def admission(i: int) -> None:
        body = pod_review(f"o-{i}") if i % 2 else claim_review(f"o-{i}")
        started = time.perf_counter()
        try:
            async with session.post(url + ("/mutate" if i % 2 else "/validate"), data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                answer = _verdict(response.status, await response.read())
        except (aiohttp.ClientError, TimeoutError) as exc:  # a failure of the ordinary load, not a lost sample
            errors.append(f"ordinary {i}: {type(exc).__name__}: {exc}")
            return
        ordinary.append((started, time.perf_counter() - started))
        if answer["internal_error"] or answer.get("allowed") is not True:
            errors.append(f"ordinary {i}: {answer}")

    async def probe() -> None:
        started = time.perf_counter()
        try:
            async with session.get(url + "/healthz") as response:
                await response.read()
                if response.status != 200:
                    errors.append(f"healthz {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            errors.append(f"healthz {type(exc).__name__}: {exc}")
            return
        healthz.append((started, time.perf_counter() - started))

    tasks: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    i = 0
    while not stop.is_set():
        i += 1
        due = start + i / 100.0
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        task = asyncio.create_task(admission(i))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        if i % 5 == 0:
            ptask = asyncio.create_task(probe())
            tasks.add(ptask)
            ptask.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks, timeout=30)


async def _bench(quick: bool) -> dict[str, Any]:
    # --quick: every class, fewer idle connections and big pods (the full sizes take minutes on 2 shared cores)
    idle, pods = (300, 30) if quick else (1500, 250)
    with tempfile.TemporaryDirectory(prefix="gpuclaim-bench-hostile-") as tmp_name:
        tmp = Path(tmp_name)
        tls = selfsigned.issue(tmp / "tls", hosts=("127.0.0.1",))
        async with webhook_on_double(tmp, tls) as (webhook, url, metrics_url):
            ctx: ssl.SSLContext = client_context(ca_pem=tls.ca_pem)
            connector = aiohttp.TCPConnector(ssl=ctx, limit=64)
            async with aiohttp.ClientSession(connector=connector) as session:
                await _wait_ready(session, url)
                # warm-up: the template exists, the selectors are compiled (without the Content-Type the
                # webhook answered 415 and warmed nothing: the first steady requests did the work)
                json_type = {"Content-Type": "application/json"}
                for n in range(20):
                    async with session.post(url + "/mutate", data=pod_review(f"w{n}"), headers=json_type) as r:
                        assert r.status == 200, await r.text()
                    async with session.post(url + "/validate", data=claim_review(f"w{n}"), headers=json_type
                                            ) as r:
                        assert r.status == 200, await r.text()

                async def warm(n: int) -> None:
                    async with session.post(url + "/mutate", data=pod_review(f"wc{n}"), headers=json_type) as r:
                        await r.read()

                # and the pool's TLS connections are open (handshakes are not what the figures measure)
                for _ in range(3):
                    await asyncio.gather(*(warm(n) for n in range(48)))
                rss_start = procs.rss_mb(webhook.pid)
                ordinary: Samples = []
                healthz: Samples = []
                errors: list[str] = []
                stop = asyncio.Event()
                marks: dict[str, float] = {"steady_start": time.perf_counter()}
                steady = asyncio.create_task(_steady(session, url, stop, ordinary, healthz, errors))
                metrics_healthz: Samples = []
                rss_samples: Samples = []
                side = [asyncio.create_task(_probe_metrics_port(metrics_url, stop, metrics_healthz, errors)),
                        asyncio.create_task(_sample_rss(webhook.pid, stop, rss_samples))]
                # the baseline: the same steady load with no attacker, on the same machine at the same time
                await asyncio.sleep(3.0 if quick else 10.0)
                results, rss = await _run_attacker(url, tls.ca_path, webhook.pid, marks,
                                                   idle=idle, pods=pods, metrics_url=metrics_url, quick=quick)
                await asyncio.sleep(1.0)
                stop.set()
                await steady
                await asyncio.gather(*side)
                rss_peak = procs.rss_mb(webhook.pid, "VmHWM")
        internal = sum(1 for r in results if r.get("internal_error")) + sum(
            1 for e in errors if "internal_error': True" in e or "healthz 5" in e)
        all_ordinary, all_healthz = [d for _, d in ordinary], [d for _, d in healthz]
        base_ordinary = [d for t, d in ordinary if t < marks["attack_start"]]
        base_healthz = [d for t, d in healthz if t < marks["attack_start"]]
        all_metrics_healthz = [d for _, d in metrics_healthz]
        return {
            "healthz_p99_ms": round(_percentile(all_healthz, 0.99) * 1000, 2),
            "healthz_max_ms": round(max(all_healthz) * 1000, 2),
            "ordinary_p99_ms": round(_percentile(all_ordinary, 0.99) * 1000, 2),
            "ordinary_p50_ms": round(_percentile(all_ordinary, 0.50) * 1000, 2),
            "ordinary_requests": len(all_ordinary), "healthz_probes": len(all_healthz),
            "baseline_healthz_p99_ms": round(_percentile(base_healthz, 0.99) * 1000, 2),
            "baseline_ordinary_p99_ms": round(_percentile(base_ordinary, 0.99) * 1000, 2),
            "baseline_ordinary_p50_ms": round(_percentile(base_ordinary, 0.50) * 1000, 2),
            "metrics_healthz_p99_ms": round(_percentile(all_metrics_healthz, 0.99) * 1000, 2),
            "metrics_healthz_max_ms": round(max(all_metrics_healthz) * 1000, 2),
            "metrics_healthz_probes": len(all_metrics_healthz),
            "phases": _phases(marks, ordinary, healthz, metrics_healthz=metrics_healthz, rss=rss_samples),
            "ordinary_failures": errors[:20], "ordinary_failure_count": len(errors), "internal_errors": internal,
            "rss_mb": round(rss, 1), "rss_start_mb": round(rss_start, 1), "rss_peak_mb": round(rss_peak, 1),
            "classes": results,
            "targets": {"healthz_p99_ms": 50, "metrics_healthz_p99_ms": 50, "ordinary_p99_ms": 20,
                        "internal_errors": 0, "rss_mb": 300, "rss_peak_mb": 512},
            "inputs": {"steady_admissions_per_s": 100, "healthz_per_s": 20, "idle_connections": idle,
                       "big_pods": pods, "big_pod_bytes": len(big_pod(0))},
        }


# the attacker's phases, between the marks `_run_attacker` records as its lines arrive
# (issue 22's phases, `<name>_start` to `<name>_end`, are added as their lines arrive)
_PHASES = (("baseline", "steady_start", "attack_start"), ("hostile_classes", "attack_start", "classes_end"),
           ("opening_idle_connections", "phases_end", "idle_end"), ("big_pods", "big_start", "big_end"))
_ISSUE_22_PHASES = ("connection_flood", "slow_readers", "partial_bodies")


def _phases(marks: dict[str, float], ordinary: Samples, healthz: Samples, *,
            metrics_healthz: Samples | None = None, rss: Samples | None = None) -> dict[str, dict[str, float]]:
    """The steady load's figures while each phase ran (requests started in it), the metrics port's /healthz and
    the webhook's peak RSS among the samples taken in it."""
    out: dict[str, dict[str, float]] = {}
    spans = [*_PHASES[:2], *((name, f"{name}_start", f"{name}_end") for name in _ISSUE_22_PHASES), *_PHASES[2:]]
    for name, begin, end in spans:
        if begin not in marks or end not in marks:
            continue
        t0, t1 = marks[begin], marks[end]
        o = [d for t, d in ordinary if t0 <= t < t1]
        h = [d for t, d in healthz if t0 <= t < t1]
        m = [d for t, d in metrics_healthz or () if t0 <= t < t1]
        r = [v for t, v in rss or () if t0 <= t < t1]
        out[name] = {"seconds": round(t1 - t0, 2), "ordinary_requests": len(o),
                     "ordinary_p99_ms": round(_percentile(o, 0.99) * 1000, 2) if o else float("nan"),
                     "ordinary_max_ms": round(max(o) * 1000, 2) if o else float("nan"),
                     "healthz_p99_ms": round(_percentile(h, 0.99) * 1000, 2) if h else float("nan"),
                     "metrics_healthz_p99_ms": round(_percentile(m, 0.99) * 1000, 2) if m else float("nan"),
                     "rss_peak_mb": round(max(r), 1) if r else float("nan")}
    return out


async def _run_attacker(url: str, ca_path: Path, webhook_pid: int, marks: dict[str, float], *, idle: int,
                        pods: int, metrics_url: str, quick: bool) -> tuple[list[dict[str, Any]], float]:
    results: list[dict[str, Any]] = []
    rss = float("nan")
    marks["attack_start"] = time.perf_counter()
    async with procs.attacker("e2e.bench.hostile", url, str(ca_path), str(idle), str(pods), metrics_url,
                              "quick" if quick else "full") as process:
        assert process.stdout is not None and process.stdin is not None
        while line := await process.stdout.readline():
            doc = orjson.loads(line)
            if "phase" in doc:
                marks[f"{doc['phase']}_{doc['at']}"] = marks["phases_end"] = time.perf_counter()
                if doc["at"] == "end":
                    _progress(f"{doc['phase']}: {doc}")
                    results.append({"class": doc.pop("phase"), **{k: v for k, v in doc.items() if k != "at"}})
                continue
            if doc.get("measure") == "idle":
                marks["idle_end"] = time.perf_counter()
            if doc.get("measure"):
                await asyncio.sleep(1.0)
                now = procs.rss_mb(webhook_pid)
                if doc["measure"] == "final":
                    rss = now
                    results.append({"class": "4_rss_after_idle_and_big_pods", "rss_mb": round(now, 1),
                                    "idle_still_open": doc.get("idle_still_open")})
                else:
                    results.append({"class": "4_rss_after_idle_connections", "rss_mb": round(now, 1)})
                process.stdin.write(b"done\n")
                await process.stdin.drain()
                if doc["measure"] == "idle":
                    marks["big_start"] = time.perf_counter()
                continue
            kind = str(doc.get("class"))
            if kind == "4_big_pods":
                marks["big_end"] = time.perf_counter()
            elif not kind.startswith("4_"):
                marks["classes_end"] = marks["phases_end"] = time.perf_counter()
            _progress(f"{kind}: {doc}")
            results.append(doc)
    return results, rss


def run(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_bench(bool(args.quick)))


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "attack":
        asyncio.run(_attack(sys.argv[2], Path(sys.argv[3]).read_bytes(), int(sys.argv[4]), int(sys.argv[5]),
                            sys.argv[6], sys.argv[7] == "quick"))
