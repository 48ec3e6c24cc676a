"""The HTTP face of discovery and OpenAPI: the GETs kubectl makes before it touches any object."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gpuclaim.double.apiserver import discovery, errors, negotiation, openapi


def _json(data: Any, content_type: str = "application/json", status: int = 200) -> web.Response:
    response = web.Response(body=orjson.dumps(data), status=status)
    response.headers["Content-Type"] = content_type  # aiohttp's content_type= would drop the g/v/as parameters
    response.headers["Vary"] = "Accept"
    return response


def _error(exc: errors.ApiError) -> web.Response:
    return _json(exc.status(), status=exc.code)


async def _version(request: web.Request) -> web.Response:
    return _json(discovery.version_info())


async def _root(request: web.Request) -> web.Response:
    """`/api` or `/apis`: aggregated discovery when the client lists it first, else the legacy document."""
    legacy = request.path.rstrip("/") == "/api"
    try:
        chosen = negotiation.choose(request.headers.get("Accept", ""), discovery.OFFERS)
    except errors.ApiError as exc:
        return _error(exc)
    if chosen is not None:
        return _json(discovery.aggregated(legacy), chosen.content_type)
    if legacy:
        return _json(discovery.api_versions(f"{request.url.host}:{request.url.port}"))
    return _json(discovery.api_group_list())


def _not_served(what: str) -> web.Response:
    return _error(errors.ApiError(404, f"the server could not find the requested resource: the API double does "
                                       f"not serve {what} (docs/dev/doubles.md lists what it serves)"))


async def _group(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    if group not in discovery.named_groups():
        return _not_served(f"the API group {group!r}")
    return _json(discovery.api_group(group))


async def _group_version(request: web.Request) -> web.Response:
    group, version = request.match_info.get("group", ""), request.match_info["version"]
    if not discovery.served(group, version):
        return _not_served(f"{group}/{version}" if group else version)
    return _json(discovery.api_resource_list(group, version))


async def _openapi_index(request: web.Request) -> web.Response:
    return _json(openapi.index())


async def _openapi_document(request: web.Request) -> web.Response:
    body = openapi.document(request.match_info["key"].strip("/"))
    if body is None:
        return _not_served(f"/openapi/v3/{request.match_info['key']}")
    response = web.Response(body=body)
    response.headers["Content-Type"] = "application/json"
    return response


async def _openapi_v2(request: web.Request) -> web.Response:
    # 404 is what kubectl expects from a server without OpenAPI v2: it then computes patches from its built-in
    # types; it asks only when /openapi/v3 did not answer, which the double does
    return _not_served("/openapi/v2 (/openapi/v3 has its paths and schemas)")


def add_routes(app: web.Application) -> None:
    """Register before the object routes: `/api/v1` and `/apis/G/V` would otherwise read as object paths."""
    app.router.add_get("/version", _version)
    app.router.add_get("/api", _root)
    app.router.add_get("/apis", _root)
    app.router.add_get("/api/{version}", _group_version)
    app.router.add_get("/apis/{group}", _group)
    app.router.add_get("/apis/{group}/{version}", _group_version)
    app.router.add_get("/openapi/v3", _openapi_index)
    app.router.add_get("/openapi/v3/{key:.+}", _openapi_document)
    app.router.add_get("/openapi/v2", _openapi_v2)
