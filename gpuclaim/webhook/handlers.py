"""HTTP glue only: read the body, decode, call `admit`, encode; count and log. No decisions here."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import hdrs, http_exceptions, web
from aiohttp.web_protocol import RequestPayloadError

from gpuclaim.serving import clientauth, connections, expect, offload
from gpuclaim.serving import run as serving
from gpuclaim.webhook import admit, keys, review

log = logging.getLogger("gpuclaim.webhook")
_JSON = "application/json"
_MAX_LOGGED_MESSAGE = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(request: web.Request, endpoint: admit.Endpoint, code: int, message: str, started: float) -> web.Response:
    request.app[keys.METRICS].rejected(endpoint, code, time.perf_counter() - started)
    log.info("admission request rejected", extra={"endpoint": endpoint, "code": code, "reason": message[:300]})
    return web.Response(status=code, body=review.bad_request_body(code, message), content_type=_JSON)


def client_refusal(request: web.Request) -> tuple[int, str] | None:
    """With webhook.clientAuth.caFile: the caller must have shown a certificate the CA signed (the TLS layer
    verified it), and with allowedNames one naming an allowed identity. None when the call may go on. The check is
    gpuclaim.serving.clientauth's, which the extender's middleware runs too; the webhook calls it from its handlers
    so that a refusal is answered as an AdmissionReview endpoint answers (metrics, the Status body)."""
    return clientauth.refusal(request, request.app[keys.STATE].context.config.webhook.client_auth, section="webhook")


def _endpoint(request: web.Request) -> admit.Endpoint:
    return "validate" if request.path == "/validate" else "mutate"


def _too_large(request: web.Request) -> web.Response:
    limit = request.app[keys.STATE].context.config.webhook.max_body_bytes
    return _error(request, _endpoint(request), 413, f"request body larger than the limit of {limit} bytes "
                  "(webhook.maxBodyBytes)", time.perf_counter())


def _refused_early(request: web.Request) -> web.Response | None:
    refused = client_refusal(request)
    return None if refused is None else _error(request, _endpoint(request), *refused, time.perf_counter())


#: the route's `Expect: 100-continue` answer: 413 for a declared length past webhook.maxBodyBytes, 401/403 for a
#: caller clientAuth refuses, before any of the body is invited (issue 22, item 7)
expect_continue = expect.expect_handler(too_large=_too_large, refuse=_refused_early)


async def _review(request: web.Request, endpoint: admit.Endpoint) -> web.Response:
    started = time.perf_counter()
    app = request.app
    refused = client_refusal(request)
    if refused is not None:
        return _error(request, endpoint, refused[0], refused[1], started)
    raw_type = request.headers.get(hdrs.CONTENT_TYPE)
    # the exact header kube-apiserver sends needs no parsing (aiohttp parses it anew for every request)
    if raw_type and raw_type != _JSON and request.content_type != _JSON:
        return _error(request, endpoint, 415, f"Content-Type {request.content_type!r}: expected {_JSON}", started)
    try:
        body = await connections.read_body(request)
    except web.HTTPRequestEntityTooLarge:
        return _too_large(request)
    except (RequestPayloadError, http_exceptions.HttpProcessingError) as exc:
        # a body that cannot be read as sent: garbled gzip/deflate, a broken chunked encoding (issue 14, finding 8)
        return _error(request, endpoint, 400, f"the request body cannot be read: {str(exc)[:200]}", started)
    big = len(body) > admit.BIG_BODY_BYTES
    try:
        # a big body is decoded (and its answer encoded) in the worker thread: tens of ms of parsing on the event
        # loop would stall every other admission and probe (issue 14, finding 4); decoded in steps, since one
        # orjson call would hold the GIL, and so stop the loop, just as long
        decoded, request_errors = ((await offload.off_loop(functools.partial(review.decode, body, stepwise=True)))
                                   if big else review.decode(body))
    except review.BadReview as exc:
        return _error(request, endpoint, 400, f"not an AdmissionReview this webhook can answer: {exc}", started)
    response, record = await admit.admit(endpoint, decoded, request_errors, checks=app[keys.CHECKS],
                                         ctx=app[keys.STATE].context, time_limit=app[keys.TIME_LIMIT])
    payload = (await offload.off_loop(review.encode, response)) if big else review.encode(response)
    elapsed = time.perf_counter() - started
    app[keys.METRICS].observe(record, elapsed)
    if record.result != "allowed" or log.isEnabledFor(logging.DEBUG):
        _log(decoded, response, record, elapsed)
    return web.Response(body=payload, content_type=_JSON)


def _log(decoded: review.Request, response: review.Response, record: admit.Record, elapsed: float) -> None:
    """One line per admission at debug; denials and errors at info. Identifiers only, never the object."""
    fields: dict[str, Any] = {
        # `name` and `msg` are LogRecord's own attributes: extra keys must not reuse them
        "uid": decoded.uid, "endpoint": record.endpoint, "operation": record.operation, "kind": decoded.kind.kind,
        "namespace": decoded.namespace, "object_name": decoded.name, "dry_run": decoded.dry_run,
        "result": record.result, "warnings": len(response.warnings), "duration_ms": round(elapsed * 1000, 3),
    }
    if record.result == "allowed":
        fields.update(patch_ops=len(response.patch or ()), converted=record.converted,
                      templates_created=record.templates_created)
        log.debug("admitted", extra=fields)
    elif record.result == "denied":
        assert response.status is not None
        fields.update(reason=record.denial_reason, denial=response.status.message[:_MAX_LOGGED_MESSAGE])
        log.info("denied", extra=fields)
    else:
        fields.update(error=record.error, allowed=response.allowed)
        log.info("internal error answered per webhook.internalErrorPolicy", extra=fields)


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn a bug in the HTTP glue into a 500 that still carries a Status body, instead of aiohttp's bare 500.
    (In-flight tracking for the grace period is gpuclaim.serving's middleware, outside this one.)"""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("unexpected error answering a request", extra={"path": request.path})
        body = review.bad_request_body(500, f"internal error in the gpuclaim webhook ({type(exc).__name__})")
        return web.Response(status=500, body=body, content_type=_JSON)


async def mutate(request: web.Request) -> web.Response:
    return await _review(request, "mutate")


async def validate(request: web.Request) -> web.Response:
    return await _review(request, "validate")


async def healthz(_request: web.Request) -> web.Response:
    """The process is alive and its event loop answers; nothing else (a liveness probe must not flap)."""
    return web.Response(text="ok\n")


def readiness(app: web.Application) -> tuple[bool, dict[str, tuple[bool, str]]]:
    """Ready = the certificate is loaded, the cluster view (when there is one) is synced and fresh, not stopping."""
    state = app[keys.STATE]
    reloader = app[keys.RELOADER]
    checks: dict[str, tuple[bool, str]] = {}
    if reloader is None:
        checks["certs"] = (True, "not managed by this app")
    else:
        checks["certs"] = (True, "loaded") if reloader.loaded else (False, "no certificate loaded")
    cache = state.context.cluster
    if app[keys.KUBE] is None:
        # a documented mode: conversion needs no cluster, so the server serves without one
        checks["cluster"] = (True, "absent (no kubeconfig and not in a cluster): cluster lookups are skipped")
    elif cache is None:
        checks["cluster"] = (False, "starting")
    else:
        max_age = state.context.config.cluster.stale_after_seconds
        if not cache.synced:
            missing = sorted(k for k, r in cache.reflectors.items() if not r.synced.is_set())
            checks["cluster"] = (False, "not synced: no initial list yet of " + ", ".join(missing))
        elif stale := cache.stale_kinds(max_age):
            checks["cluster"] = (False, f"stale: nothing heard for over {max_age:g}s about " + ", ".join(stale))
        else:
            checks["cluster"] = (True, "synced")
    if serving.stopping(app):
        checks["shutdown"] = (False, "stopping: finishing in-flight requests")
    return all(ok for ok, _ in checks.values()), checks


async def readyz(request: web.Request) -> web.Response:
    ready, checks = readiness(request.app)
    lines = "".join(f"[{'+' if ok else '-'}] {name}: {text}\n" for name, (ok, text) in checks.items())
    return web.Response(status=200 if ready else 503, text=("ok\n" if ready else "not ready\n") + lines)
