"""The HTTP face of the double: Kubernetes URL paths, list/watch/get/create/update/patch/delete."""

from __future__ import annotations

import asyncio
import collections
import copy
import secrets
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson
from aiohttp import web

from gpuclaim.double.apiserver import (
    auth,
    discovery,
    discovery_http,
    errors,
    negotiation,
    patches,
    selectors,
    tables,
    webhooks,
)
from gpuclaim.double.apiserver.faults import Fault, Faults
from gpuclaim.double.apiserver.resources import ResourceType, lookup
from gpuclaim.double.apiserver.store import Obj, ObjFilter, Store
from gpuclaim.dra import versions

STORE = web.AppKey("gpuclaim.double.store", Store)
TOKENS = web.AppKey("gpuclaim.double.tokens", auth.Tokens)
FAULTS = web.AppKey("gpuclaim.double.faults", Faults)


@dataclass(slots=True)
class Settings:
    bookmark_interval: float = 60.0  # kube-apiserver sends a bookmark about once a minute
    max_continue_snapshots: int = 32
    # what GET /version answers (discovery.GIT_VERSION: the newest minor, marked as the double's); a test changes
    # it to play an upgraded control plane (gpuclaim reads /version again after a relist)
    git_version: str = discovery.GIT_VERSION


SETTINGS = web.AppKey("gpuclaim.double.settings", Settings)
TABLE_OFFERS = (negotiation.TABLE_V1, negotiation.TABLE_V1BETA1)
SERVED_PATCH_TYPES = ("application/merge-patch+json", "application/json-patch+json",
                      "application/strategic-merge-patch+json")


@dataclass(slots=True)
class Target:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped, or a namespaced kind across all namespaces
    name: str | None
    subresource: str | None


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error_response(exc: errors.ApiError) -> web.Response:
    response = _json(exc.status(), exc.code)
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _not_served(what: str) -> errors.ApiError:
    # kube-apiserver's words first (clients match them), then what the double lacks
    return errors.ApiError(404, f"the server could not find the requested resource: the API double does not serve "
                                f"{what} (docs/dev/doubles.md lists what it serves)")


def _parse_target(group: str, segments: list[str]) -> Target:
    if len(segments) < 2:
        raise errors.ApiError(404, "the server could not find the requested resource")
    version, rest = segments[0], segments[1:]
    gv = f"{group}/{version}" if group else version
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        candidate = lookup(group, version, rest[2])
        if candidate is None:
            raise _not_served(f"{gv} {rest[2]}")
        if candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    rt = lookup(group, version, rest[0])
    if rt is None:
        raise _not_served(f"{gv} {rest[0]}")
    if len(rest) > 3 or (rt.namespaced and namespace is None and len(rest) > 1):
        raise errors.ApiError(404, "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and not (sub == "status" and rt.status_subresource):
        raise _not_served(f"the {sub} subresource of {rt.plural}")
    return Target(rt, namespace, name, sub)


def _verb(request: web.Request, target: Target) -> str:
    if request.method == "GET":
        if target.name is not None:
            return "get"
        return "watch" if request.query.get("watch") in ("true", "1") else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if request.method not in verbs or (request.method == "POST") != (target.name is None):
        raise errors.ApiError(405, "the server does not allow this method on the requested resource")
    return verbs[request.method]


def _filters(request: web.Request) -> ObjFilter:
    try:
        labels = selectors.parse_label_selector(request.query.get("labelSelector", ""))
        fields = selectors.parse_field_selector(request.query.get("fieldSelector", ""))
    except selectors.SelectorError as exc:
        raise errors.ApiError(400, str(exc)) from None
    return lambda obj: labels(obj["metadata"].get("labels") or {}) and fields(obj)


async def _body(request: web.Request) -> Any:
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise errors.ApiError(400, f"the request body is not valid JSON: {exc}") from None


class _Handlers:
    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.snapshots: collections.OrderedDict[str, tuple[list[Obj], int]] = collections.OrderedDict()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        # the admission chain learns the subresource from, and returns webhook warnings through, this context
        context = webhooks.RequestContext()
        token = webhooks.CURRENT.set(context)
        try:
            response = await self._handle(request, context)
        finally:
            webhooks.CURRENT.reset(token)
        if context.warnings and not response.prepared:
            for text in context.warnings:
                response.headers.add("Warning", webhooks.warning_header(text))
        return response

    async def _handle(self, request: web.Request, context: webhooks.RequestContext) -> web.StreamResponse:
        group = request.match_info.get("group", "")
        try:
            target = _parse_target(group, request.match_info["tail"].strip("/").split("/"))
            if target.rt.since_minor and versions.resolve(self.app[SETTINGS].git_version).model.minor \
                    < target.rt.since_minor:
                raise _not_served(f"{target.rt.api_version} {target.rt.plural} (Kubernetes "
                                  f"{self.app[SETTINGS].git_version} does not serve it)")
            context.subresource = target.subresource
            verb = _verb(request, target)
            drop_after = None
            for fault in self.app[FAULTS].take(verb, target.rt.plural):
                if fault.kind == "delay":
                    await asyncio.sleep(fault.delay_seconds)
                elif fault.kind == "drop_watch":
                    drop_after = fault.every
                elif verb == "watch" and fault.code == 410:
                    return await self._watch_error(request, errors.expired())
                else:
                    raise errors.ApiError(fault.code, f"injected fault: {fault.code}", retry_after=fault.retry_after)
            if verb == "watch":
                return await self._watch(request, target, drop_after)
            if verb in ("create", "update", "patch"):
                _field_validation(request)
            return await getattr(self, f"_{verb}")(request, target)
        except errors.ApiError as exc:
            return _error_response(exc)

    # ---- reads ---------------------------------------------------------------------------------------------
    async def _get(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        obj = self.app[STORE].get(target.rt, target.namespace or "", target.name)
        as_table = negotiation.choose(request.headers.get("Accept", ""), TABLE_OFFERS)
        if as_table is not None:
            return self._table(request, target, [obj], None, as_table)
        return _json(obj)

    def _table(self, request: web.Request, target: Target, items: list[Obj], list_meta: dict[str, Any] | None,
               as_table: negotiation.As) -> web.Response:
        body = tables.table(target.rt, items, now=self.app[STORE].clock(), list_meta=list_meta,
                            include_object=request.query.get("includeObject", ""),
                            no_headers=request.query.get("noHeaders") in ("true", "1"),
                            group_version=f"{as_table.group}/{as_table.version}")
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _list(self, request: web.Request, target: Target) -> web.Response:
        as_table = negotiation.choose(request.headers.get("Accept", ""), TABLE_OFFERS)
        token = request.query.get("continue")
        if token:
            if token not in self.snapshots:
                raise errors.ApiError(410, "The provided continue parameter is too old to display a consistent "
                                           "list result. You can start a new list without the continue parameter.")
            items, rv = self.snapshots.pop(token)
        else:
            items, rv = self.app[STORE].list(target.rt, target.namespace, _filters(request))
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(request.query.get("limit", "0") or 0)
        if limit > 0 and len(items) > limit:
            items, rest = items[:limit], items[limit:]
            token = secrets.token_urlsafe(12)
            self.snapshots[token] = (rest, rv)
            while len(self.snapshots) > self.app[SETTINGS].max_continue_snapshots:
                self.snapshots.popitem(last=False)
            meta.update({"continue": token, "remainingItemCount": len(rest)})
        if as_table is not None:
            return self._table(request, target, items, meta, as_table)
        # typed lists carry kind/apiVersion once, on the list, not on each item
        stripped = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
        return _json({"kind": f"{target.rt.kind}List", "apiVersion": target.rt.api_version, "metadata": meta,
                      "items": stripped})

    async def _watch_error(self, request: web.Request, exc: errors.ApiError) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
        await response.write_eof()
        return response

    async def _watch(self, request: web.Request, target: Target, drop_after: int | None) -> web.StreamResponse:
        store = self.app[STORE]
        try:
            watcher = store.watch(target.rt, target.namespace, _filters(request),
                                  request.query.get("resourceVersion", ""))
        except errors.ApiError as exc:
            if exc.code == 410:
                return await self._watch_error(request, exc)
            raise
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds", "1800"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            await response.prepare(request)
            sent = 0
            while (remaining := deadline - loop.time()) > 0:
                wait = min(remaining, self.app[SETTINGS].bookmark_interval)
                try:
                    kind, obj = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and remaining > wait:
                        mark = {"kind": target.rt.kind, "apiVersion": target.rt.api_version,
                                "metadata": {"resourceVersion": str(store.rv)}}
                        await response.write(orjson.dumps({"type": "BOOKMARK", "object": mark}) + b"\n")
                    continue
                if kind == "CLOSE":
                    break
                await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
                sent += 1
                if drop_after is not None and sent >= drop_after:
                    break
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            store.unwatch(watcher)
        return response

    # ---- writes --------------------------------------------------------------------------------------------
    async def _create(self, request: web.Request, target: Target) -> web.Response:
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.ApiError(400, "the request body must be a JSON object")
        obj = await self.app[STORE].create(target.rt, target.namespace or "", body, dry_run=_dry_run(request))
        return _json(obj, 201)

    async def _update(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.ApiError(400, "the request body must be a JSON object")
        obj = await self.app[STORE].update(target.rt, target.namespace or "", target.name, body,
                                           subresource=target.subresource, dry_run=_dry_run(request))
        return _json(obj)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        store = self.app[STORE]
        current = store.get(target.rt, target.namespace or "", target.name)
        patch = await _body(request)
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type == "application/merge-patch+json":
            if not isinstance(patch, dict):
                raise errors.ApiError(400, "a merge patch must be a JSON object")
            patched = patches.merge_patch(copy.deepcopy(current), patch)
        elif content_type == "application/strategic-merge-patch+json":
            if not isinstance(patch, dict):
                raise errors.ApiError(400, "a strategic merge patch must be a JSON object")
            patched = patches.strategic_merge_patch(current, patch)
        elif content_type == "application/json-patch+json":
            try:
                patched = jsonpatch.JsonPatch(patch).apply(copy.deepcopy(current))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as exc:
                raise errors.ApiError(422, f"the JSON patch could not be applied: {exc}") from None
        elif content_type == "application/apply-patch+yaml":
            raise errors.ApiError(415, "the API double does not serve server-side apply (application/apply-patch+yaml)"
                                       ": use client-side apply (kubectl apply without --server-side)")
        else:
            raise errors.ApiError(415, f"the API double does not serve patch type {content_type!r}: it serves "
                                       f"{', '.join(SERVED_PATCH_TYPES)}")
        obj = await store.update(target.rt, target.namespace or "", target.name, patched,
                                 subresource=target.subresource, dry_run=_dry_run(request))
        return _json(obj)

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        options = await _body(request) if request.can_read_body else {}
        if options is None:
            options = {}
        if not isinstance(options, dict) or not isinstance(options.get("preconditions") or {}, dict):
            raise errors.ApiError(400, "the request body must be a DeleteOptions object")
        preconditions = options.get("preconditions") or {}
        for key in ("uid", "resourceVersion"):
            if preconditions.get(key) is not None and not isinstance(preconditions[key], str):
                raise errors.ApiError(400, f"DeleteOptions.preconditions.{key}: must be a string")
        obj = await self.app[STORE].delete(target.rt, target.namespace or "", target.name, dry_run=_dry_run(request),
                                           precondition_rv=preconditions.get("resourceVersion"),
                                           precondition_uid=preconditions.get("uid"))
        return _json(obj)


def _field_validation(request: web.Request) -> None:
    """kubectl sends fieldValidation=Strict by default; the double validates strictly whatever is asked (unknown
    fields are refused, docs/dev/doubles.md), so only the value itself is checked."""
    for value in request.query.getall("fieldValidation", []):
        if value not in ("Strict", "Warn", "Ignore"):
            raise errors.ApiError(400, f'fieldValidation: Unsupported value: "{value}": supported values: '
                                       '"Ignore", "Strict", "Warn"')


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    if any(v != "All" for v in values):
        raise errors.ApiError(400, 'dryRun: Unsupported value: only "All" is supported')
    return bool(values)


async def _faults_handler(request: web.Request) -> web.Response:
    faults = request.app[FAULTS]
    if request.method == "DELETE":
        faults.clear()
    elif request.method == "POST":
        try:
            faults.add(Fault.from_json(await _body(request)))
        except (ValueError, TypeError, AttributeError) as exc:
            return _json(errors.ApiError(400, f"bad fault: {exc}").status(), 400)
    return _json({"rules": [f.to_json() for f in faults.rules], "fired": faults.fired})


async def _drop_watches_handler(request: web.Request) -> web.Response:
    return _json({"closed": request.app[STORE].close_watches()})


async def _version_handler(request: web.Request) -> web.Response:
    # here, not with the rest of discovery: the answer is the settings' (a test plays an upgrade)
    return _json(discovery.version_info(request.app[SETTINGS].git_version))


def _reviewing(answer: Any) -> Any:
    async def handle(request: web.Request) -> web.Response:
        try:
            return _json(answer(request, await _body(request)), 201)
        except errors.ApiError as exc:
            return _error_response(exc)

    return handle


@_reviewing
def _token_request(request: web.Request, body: Any) -> Any:
    return auth.token_request(request.app[STORE], request.app[TOKENS], request.match_info["namespace"],
                              request.match_info["name"], body)


@_reviewing
def _token_review(request: web.Request, body: Any) -> Any:
    return auth.token_review(request.app[TOKENS], body)


@_reviewing
def _access_review(request: web.Request, body: Any) -> Any:
    return auth.access_review(request.app[STORE], body)


async def _compact_handler(request: web.Request) -> web.Response:
    request.app[STORE].compact()
    return _json({"compactedTo": request.app[STORE].rv})


def create_app(store: Store | None = None, *, faults: Faults | None = None,
               settings: Settings | None = None) -> web.Application:
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app[STORE] = store or Store()
    app[FAULTS] = faults or Faults()
    app[SETTINGS] = settings or Settings()
    app[TOKENS] = auth.Tokens()
    app[STORE].new_expressions = lambda: versions.resolve(app[SETTINGS].git_version).model.cel_new
    app[STORE].schema_minor = lambda: f"1.{versions.resolve(app[SETTINGS].git_version).model.minor}"
    handlers = _Handlers(app)
    app.router.add_route("*", "/_double/faults", _faults_handler)
    app.router.add_post("/_double/drop-watches", _drop_watches_handler)
    app.router.add_post("/_double/compact", _compact_handler)
    app.router.add_get("/version", _version_handler)
    discovery_http.add_routes(app)
    app.router.add_post("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", _token_request)
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", _token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", _access_review)
    app.router.add_route("*", "/api/{tail:.*}", handlers.handle)
    app.router.add_route("*", "/apis/{group}/{tail:.*}", handlers.handle)
    return app
