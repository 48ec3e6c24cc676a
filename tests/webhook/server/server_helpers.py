"""Helpers for the webhook server tests: stand-in checks, starting the app over TLS, requests.

`StandInChecks` are small real admission checks (not mocks) with each decision type, so the server is tested on
its own; `tests/webhook/server/test_server_cores.py` drives the real cores once they are present.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from aiohttp import web

from gpuclaim.certs import client_context
from gpuclaim.certs.files import CertReloader, reloading_server_context
from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble, Settings, Store, serve
from gpuclaim.dra.config import Config, load_config
from gpuclaim.dra.fieldpath import FieldError
from gpuclaim.dra.fieldpath import Path as FieldPath
from gpuclaim.webhook import admit, keys, review

FIXTURES = Path(__file__).parents[2] / "fixtures" / "admission"
CLASSES = FIXTURES.parent / "deviceclasses" / "ALL-rendered-resource.k8s.io-v1.yaml"


class StandInChecks:
    """Pod CREATE with `nvidia.com/gpu` limits: annotate (a real JSONPatch). Names steer the other outcomes:
    `deny-*` is denied with a field path, `warn-*` gets warnings and audit annotations, `boom-*` raises,
    `slow-<seconds>-*` sleeps. Validate denies objects whose label `tier` is `forbidden`."""

    def __init__(self) -> None:
        self.seen: list[review.Request] = []

    async def _common(self, request: review.Request) -> admit.Outcome | None:
        self.seen.append(request)
        name = str(((request.object or {}).get("metadata") or {}).get("name", ""))
        if name.startswith("boom"):
            raise RuntimeError("a bug in a check")
        if name.startswith("slow-"):
            await asyncio.sleep(float(name.split("-")[1]))
        if name.startswith("deny"):
            path = FieldPath.root("spec", "containers").index(0).child("resources", "limits").key("nvidia.com/gpu")
            return admit.Outcome(errors=(FieldError.invalid(path, "0", "must be a positive integer"),))
        if name.startswith("warn"):
            return admit.Outcome(warnings=(admit.Notice("no-match", "spec.x: no device matches"),
                                           admit.Notice("Not A Reason!", "second\nline")),
                                 audit_annotations={"dra-check": "feasible-on-0-nodes"})
        return None

    async def mutate(self, request: review.Request, ctx: admit.Context) -> admit.Outcome:
        decided = await self._common(request)
        if decided is not None:
            return decided
        pod = request.object or {}
        wants_gpu = any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})
                        for c in (pod.get("spec") or {}).get("containers") or [])
        if request.operation != "CREATE" or not wants_gpu:
            return admit.Outcome()
        op = "add" if "annotations" not in (pod.get("metadata") or {}) else "replace"
        annotations = {**((pod.get("metadata") or {}).get("annotations") or {}), "gpuclaim.io/converted": "true"}
        return admit.Outcome(patch=({"op": op, "path": "/metadata/annotations", "value": annotations},),
                             converted=True)

    async def validate(self, request: review.Request, ctx: admit.Context) -> admit.Outcome:
        decided = await self._common(request)
        if decided is not None:
            return decided
        labels = ((request.object or {}).get("metadata") or {}).get("labels") or {}
        if labels.get("tier") == "forbidden":
            path = FieldPath.root("metadata", "labels").key("tier")
            return admit.Outcome(errors=(FieldError.forbidden(path, "tier forbidden is reserved"),))
        return admit.Outcome()


@dataclass
class Server:
    url: str
    app: web.Application
    session: aiohttp.ClientSession
    checks: Any
    ca_pem: bytes

    async def post(self, path: str, body: Any, *, raw: bool = False, headers: dict[str, str] | None = None
                   ) -> tuple[int, Any]:
        data = body if raw else orjson.dumps(body)
        async with self.session.post(self.url + path, data=data,
                                     headers=headers or {"Content-Type": "application/json"}) as response:
            payload = await response.read()
            try:
                return response.status, orjson.loads(payload)
            except orjson.JSONDecodeError:
                return response.status, payload.decode(errors="replace")

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.url + path) as response:
            return response.status, await response.text()


def client_ssl(tls_files: selfsigned.TlsFiles) -> ssl.SSLContext:
    return client_context(ca_pem=tls_files.ca_pem)  # as kube-apiserver with the caBundle


async def start(app_: web.Application) -> tuple[web.AppRunner, str]:
    reloader = app_[keys.RELOADER]
    runner = web.AppRunner(app_, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=reloader.context if reloader else None)
    await site.start()
    return runner, f"https://127.0.0.1:{site.port}"


@contextlib.asynccontextmanager
async def serving(app_: web.Application, tls_files: selfsigned.TlsFiles, checks: Any = None) -> AsyncIterator[Server]:
    """`app_` served over TLS on loopback, with a client session that trusts only the test CA; both closed on
    leaving. `checks`: the stand-ins, when the test reads what they saw."""
    runner, url = await start(app_)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl(tls_files)))
    try:
        yield Server(url, app_, session, checks, tls_files.ca_pem)
    finally:
        await session.close()
        await runner.cleanup()


async def classes_double(workdir: Path, *namespaces: str) -> RunningDouble:
    """The API double holding `namespaces` and every rendered NVIDIA DeviceClass, as the cores' tests start from."""
    running = await serve(store=Store(), workdir=workdir, settings=Settings(bookmark_interval=0.2))
    for name in namespaces:
        running.store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    for doc in yaml.safe_load_all(CLASSES.read_text()):
        if doc:
            running.store.restore(doc)
    return running


def make_config(**webhook: Any) -> Config:
    return load_config({"webhook": webhook} if webhook else None)


def reloader_for(tls_files: selfsigned.TlsFiles) -> CertReloader:
    return reloading_server_context(cert_file=tls_files.cert_path, key_file=tls_files.key_path, interval=0.2)


def pod_review(*, name: str = "pod0", uid: str = "3b5f1d2e-9c4a-4f7e-8a61-2d0c7b9e5a13", operation: str = "CREATE",
               gpus: int | None = 1, dry_run: bool = False, old: dict[str, Any] | None = None,
               namespace: str = "gpu-test1") -> dict[str, Any]:
    """The captured wire request (tests/fixtures/admission), with the pod's name and GPU limit swapped in."""
    doc = orjson.loads((FIXTURES / "request-pod-create.wire.json").read_bytes())
    request = doc["request"]
    request.update(uid=uid, name=name, operation=operation, dryRun=dry_run, oldObject=old, namespace=namespace)
    pod = request["object"]
    pod["metadata"].update(name=name, namespace=namespace)
    container = pod["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
    del pod["spec"]["resourceClaims"]
    return doc
