"""The fleet port: ``GET /api/v1/fleet`` (JSON), ``GET /fleet`` (the page), ``/fleet/static/*``, ``/healthz``.

Served by the extender process, which holds the watch cache, on a listener of its own (``fleet.listen``,
``--fleet-listen``) with the extender's serving certificate; bounded like the other servers (gpuclaim.serving:
connections, heads, bodies, write deadline). Who sees what: fleet/access.py. The JSON: docs/fleet.md.

Browsers cannot send a bearer header from the address bar: ``POST /fleet/login`` takes a token from a form,
checks it like any request, and keeps it in an HttpOnly, SameSite=Strict cookie scoped to ``/`` (Secure over TLS)
that ``GET /fleet`` and ``/api/v1/fleet`` read when no Authorization header is sent.
"""

from __future__ import annotations

import asyncio
import datetime
import html
import importlib
import logging
import re
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from gpuclaim.dra.api import names
from gpuclaim.dra.config import Config, split_listen
from gpuclaim.fleet import access as fleet_access
from gpuclaim.fleet import model
from gpuclaim.serving import run as serving
from gpuclaim.serving.connections import BOUNDS, BoundedSite

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
INDEX = web.AppKey("gpuclaim.fleet.index", model.FleetIndex)
ACCESS = web.AppKey("gpuclaim.fleet.access", fleet_access.Access)
CONFIG = web.AppKey("gpuclaim.fleet.config", Config)
NAMESPACES: web.AppKey[Callable[[], Iterable[str]]] = web.AppKey("gpuclaim.fleet.namespaces")
COOKIE = "gpuclaim-fleet-token"
PARAMETERS = ("driver", "model", "namespace", "nodeSelector", "since")
MAX_BODY_BYTES = 32 * 1024  # the login form: a token and nothing else
# more nodes than this waiting to be recomputed (a first list, a relist): 503 rather than recompute them all on the
# event loop that answers kube-scheduler; the background task (fleet/serve.py) catches up in steps
MAX_PENDING_NODES = 500
MAX_MODEL_CHARS = 256
MAX_SELECTOR_TERMS = 32
REQUEST_SECONDS = 20.0
CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
_STATIC = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\.(js|css|svg)$")
_CONTENT_TYPES = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}
_IN = re.compile(r"^\s*(?P<key>[^\s=!()]+)\s+in\s+\((?P<values>[^()]*)\)\s*$")


class BadParameter(ValueError):
    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


# ---- query parameters ------------------------------------------------------------------------------------------


def parse_query(query_string: str, *, max_bytes: int = 4096) -> tuple[model.Filters, int | None]:
    """The filters and ``since`` of a query string; BadParameter names the parameter at fault."""
    if len(query_string) > max_bytes:
        raise BadParameter("query", f"longer than {max_bytes} bytes")
    try:
        pairs = parse_qsl(query_string, keep_blank_values=True, strict_parsing=False, errors="strict",
                          max_num_fields=len(PARAMETERS) + 1)
    except UnicodeDecodeError:
        raise BadParameter("query", "not UTF-8 once percent-decoded") from None
    except ValueError:
        raise BadParameter("query", f"more parameters than the {len(PARAMETERS)} known ones") from None
    seen: dict[str, str] = {}
    for key, value in pairs:
        if key not in PARAMETERS:
            shown = key if key and len(key) <= 64 and key.isprintable() else repr(key[:64])
            raise BadParameter(shown, f"unknown parameter (known: {', '.join(PARAMETERS)})")
        if key in seen:
            raise BadParameter(key, "given more than once")
        seen[key] = value
    for key, value in seen.items():
        if not value.isprintable():
            raise BadParameter(key, "contains control characters")
    driver = seen.get("driver") or None
    if driver is not None and names.check_driver_name(driver):
        raise BadParameter("driver", "; ".join(names.check_driver_name(driver)))
    model_text = seen.get("model") or None
    if model_text is not None and len(model_text) > MAX_MODEL_CHARS:
        raise BadParameter("model", f"longer than {MAX_MODEL_CHARS} characters")
    namespace = seen.get("namespace") or None
    if namespace is not None and names.check_dns1123_label(namespace):
        raise BadParameter("namespace", "must be a namespace name (a lowercase RFC 1123 label)")
    selector_text = seen.get("nodeSelector") or None
    selector = parse_node_selector(selector_text) if selector_text is not None else None
    since = None
    if "since" in seen:
        text = seen["since"]
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise BadParameter("since", "must be a revision: a non-negative integer of at most 18 digits")
        since = int(text)
    return model.Filters(driver=driver, model=model_text, namespace=namespace, node_selector=selector,
                         node_selector_text=selector_text), since


def _split_terms(text: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
            if depth > 1:
                raise BadParameter("nodeSelector", "nested parentheses")
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise BadParameter("nodeSelector", "a ')' without its '('")
        elif c == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    if depth:
        raise BadParameter("nodeSelector", "a '(' without its ')'")
    terms.append(text[start:])
    return terms


def parse_node_selector(text: str) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """``k=v[,k=v]``, ``k==v`` and ``k in (a,b)``, as label selectors write them; every requirement must hold."""
    out = []
    terms = _split_terms(text)
    if len(terms) > MAX_SELECTOR_TERMS:
        raise BadParameter("nodeSelector", f"more than {MAX_SELECTOR_TERMS} requirements")
    for term in terms:
        match = _IN.match(term)
        if match is not None:
            key, op = match["key"], "in"
            if not match["values"].strip():
                # as Kubernetes' label selector parser: "for 'in', 'notin' operators, values set can't be empty"
                raise BadParameter("nodeSelector", f"{key.strip()[:64]!r}: 'in' needs at least one value")
            values = [v.strip() for v in match["values"].split(",")]
        else:
            key, sep, value = term.partition("=")
            if not sep:
                raise BadParameter("nodeSelector", f"{term.strip()[:64]!r}: expected key=value or key in (a,b)")
            op, values = "=", [value.removeprefix("=").strip()]
            key = key.strip()
        problems = names.check_label_key(key)
        if problems:
            raise BadParameter("nodeSelector", f"{key[:64]!r}: not a label key: {'; '.join(problems)}")
        for v in values:
            problems = names.check_label_value(v)
            if problems:
                raise BadParameter("nodeSelector", f"{key}: {v[:64]!r}: not a label value: {'; '.join(problems)}")
        out.append((key, op, frozenset(values)))
    return tuple(out)


# ---- responses -------------------------------------------------------------------------------------------------


def _error(status: int, message: str, *, parameter: str | None = None, **headers: str) -> web.Response:
    body: dict[str, Any] = {"apiVersion": model.API_VERSION, "kind": "Error", "code": status, "message": message}
    if parameter is not None:
        body["parameter"] = parameter
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)


class ResponseCache:
    """Assembled bodies by (scope, filters), valid for one revision; bounded in bytes. A polling page costs a
    dictionary lookup until the fleet changes."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[model.Scope, model.Filters], tuple[int, bytes]] = OrderedDict()

    def get(self, key: tuple[model.Scope, model.Filters], revision: int) -> bytes | None:
        hit = self._entries.get(key)
        if hit is None or hit[0] != revision:
            return None
        self._entries.move_to_end(key)
        return hit[1]

    def put(self, key: tuple[model.Scope, model.Filters], revision: int, body: bytes) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old[1])
        if len(body) > self.max_bytes:
            return
        self._entries[key] = (revision, body)
        self.bytes += len(body)
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= len(dropped)


CACHE = web.AppKey("gpuclaim.fleet.responses", ResponseCache)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is not None:
        return fleet_access.bearer_token(header)
    cookie = request.cookies.get(COOKIE)
    return fleet_access.bearer_token(f"Bearer {cookie}") if cookie else None


async def _verdict(request: web.Request) -> fleet_access.Verdict | web.Response:
    try:
        return await request.app[ACCESS].verdict(_token(request), request.app[NAMESPACES])
    except fleet_access.ReviewError as exc:
        log.warning("cannot review a fleet viewer's access: %s", exc)
        return _error(503, "cannot ask the apiserver who the viewer is (TokenReview/SubjectAccessReview): retry",
                      **{"Retry-After": "5"})


def _refusal(verdict: fleet_access.Verdict) -> web.Response:
    if verdict.status == 401:
        return _error(401, verdict.message, **{"WWW-Authenticate": 'Bearer realm="gpuclaim-fleet"'})
    return _error(verdict.status, verdict.message)


# a snapshot a viewer's scope or filters make the server rebuild (not the stored fragments) is assembled in a worker
# thread: the event loop keeps answering kube-scheduler meanwhile (the interpreter switches threads every 0.5 ms)
_THREAD_FROM_NODES = 200


class Building(Exception):
    pass


async def _body(request: web.Request, scope: model.Scope, filters: model.Filters) -> tuple[int, bytes]:
    index = request.app[INDEX]
    if index.pending > MAX_PENDING_NODES:
        raise Building(f"the fleet view is being built ({index.pending} nodes to go): retry in a few seconds")
    frozen = index.frozen()
    cache = request.app[CACHE]
    key = (scope, filters)
    body = cache.get(key, frozen.revision)
    if body is None:
        if len(frozen.entries) >= _THREAD_FROM_NODES:
            body = await asyncio.to_thread(frozen.assemble, scope, filters, generated_at=_now())
        else:
            body = frozen.assemble(scope, filters, generated_at=_now())
        cache.put(key, frozen.revision, body)
    return frozen.revision, body


async def fleet_json(request: web.Request) -> web.StreamResponse:
    verdict = await _verdict(request)
    if isinstance(verdict, web.Response):
        return verdict
    if verdict.scope is None:
        return _refusal(verdict)
    try:
        filters, since = parse_query(request.query_string, max_bytes=request.app[CONFIG].fleet.max_query_bytes)
    except BadParameter as exc:
        return _error(400, str(exc), parameter=exc.parameter)
    if filters.namespace is not None and not verdict.scope.sees(filters.namespace):
        return _error(403, f"namespace: you may not list pods in namespace {filters.namespace!r}",
                      parameter="namespace")
    index = request.app[INDEX]
    if index.pending <= MAX_PENDING_NODES:
        index.flush()
    if since is not None and since == index.revision and not index.pending:
        return web.Response(status=304, headers={"ETag": f'"{index.revision}"'})
    try:
        revision, body = await _body(request, verdict.scope, filters)
    except Building as exc:
        return _error(503, str(exc), **{"Retry-After": "2"})
    return web.Response(body=body, content_type="application/json", headers={"ETag": f'"{revision}"'})


def _render(snapshot: dict[str, Any], base_path: str) -> str:
    """gpuclaim.fleet.page.render_page when the page is installed; else a plain summary table."""
    try:
        page = importlib.import_module("gpuclaim.fleet.page")
    except ModuleNotFoundError:
        return _plain_page(snapshot)
    return str(page.render_page(snapshot, base_path=base_path))


def _plain_page(snapshot: dict[str, Any]) -> str:
    e = html.escape
    rows = []
    for node in snapshot["nodes"]:
        s = node["summary"]
        devices = ", ".join(f"{k} {v}" for k, v in s["devices"].items())
        fits = ", ".join(f"{k}: {v}" for k, v in s["tightFits"].items())
        rows.append(f"<tr><th scope=row>{e(node['name'])}</th><td>{e(devices)}</td><td>{e(fits)}</td>"
                    f"<td>{s['stranded']}</td><td>{s['freeMigSlices']}</td></tr>")
    total = snapshot["summary"]
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>gpuclaim fleet</title></head><body>"
            f"<h1>GPU fleet</h1><p>revision {snapshot['revision']}: "
            f"{e(', '.join(f'{k} {v}' for k, v in total['devices'].items()))}</p>"
            "<table><thead><tr><th>node</th><th>devices</th><th>tight fits</th><th>stranded</th>"
            f"<th>free MIG slices</th></tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>")


def _message_page(status: int, title: str, message: str, then: str, headers: dict[str, str]) -> web.Response:
    """A short page for a person in a browser: the message in words, then `then` (HTML)."""
    text = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title></head>"
            f"<body><h1>GPU fleet</h1><p role=alert>{html.escape(message)}</p>{then}</body></html>")
    return web.Response(status=status, text=text, content_type="text/html", headers=headers)


def _login_page(status: int, message: str) -> web.Response:
    form = ("<form method=post action=fleet/login><label>Bearer token (a ServiceAccount token, "
            "<code>kubectl create token ...</code>) <input type=password name=token autocomplete=off required>"
            "</label> <button type=submit>Sign in</button></form>")
    headers = {"WWW-Authenticate": 'Bearer realm="gpuclaim-fleet"'} if status == 401 else {}
    return _message_page(status, "gpuclaim fleet: sign in", message, form, headers)


def _page_error(status: int, message: str, **headers: str) -> web.Response:
    """The page's own refusals: the way back to the whole page (the API answers the same refusals as JSON)."""
    return _message_page(status, "gpuclaim fleet", message, "<p><a href=fleet>The whole page</a></p>", headers)


async def fleet_page(request: web.Request) -> web.StreamResponse:
    verdict = await _verdict(request)
    if isinstance(verdict, web.Response):
        return verdict
    if verdict.scope is None:
        return _login_page(verdict.status, verdict.message)
    try:
        filters, _ = parse_query(request.query_string, max_bytes=request.app[CONFIG].fleet.max_query_bytes)
    except BadParameter as exc:
        return _page_error(400, str(exc))
    if filters.namespace is not None and not verdict.scope.sees(filters.namespace):
        return _page_error(403, f"namespace: you may not list pods in namespace {filters.namespace!r}")
    try:
        _, body = await _body(request, verdict.scope, filters)
    except Building as exc:
        return _page_error(503, f"{exc}; this page tries again in 2 seconds",
                           **{"Retry-After": "2", "Refresh": "2"})
    return web.Response(text=_render(orjson.loads(body), ""), content_type="text/html")


async def login(request: web.Request) -> web.StreamResponse:
    origin = request.headers.get("Origin")
    if origin is not None and origin.partition("://")[2] != request.host:
        return _error(403, "Origin: a sign-in from another site is refused")
    if request.content_type != "application/x-www-form-urlencoded":
        return _error(415, "Content-Type: expected application/x-www-form-urlencoded (the sign-in form)")
    try:
        raw = await asyncio.wait_for(request.content.read(MAX_BODY_BYTES + 1), REQUEST_SECONDS)
    except TimeoutError:
        return _error(408, "body: not received in time")
    if len(raw) > MAX_BODY_BYTES:
        return _error(413, f"body: larger than {MAX_BODY_BYTES} bytes")
    try:
        form = dict(parse_qsl(raw.decode("ascii"), errors="strict", max_num_fields=2))
    except (UnicodeDecodeError, ValueError):
        return _error(400, "token: the form is not an ASCII form with one field", parameter="token")
    token = fleet_access.bearer_token(f"Bearer {form.get('token', '')}")
    if token is None:
        return _login_page(401, "token: missing or not a bearer token")
    try:
        verdict = await request.app[ACCESS].verdict(token, request.app[NAMESPACES])
    except fleet_access.ReviewError:
        return _error(503, "cannot ask the apiserver who the viewer is: retry", **{"Retry-After": "5"})
    if verdict.scope is None:
        return _login_page(verdict.status, verdict.message)
    response = web.Response(status=303, headers={"Location": "../fleet"})
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/", secure=request.secure,
                        max_age=3600)
    return response


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    match = _STATIC.match(name)
    if match is None:
        return _error(404, "no such static file")
    try:
        data = resources.files("gpuclaim.fleet").joinpath("static", name).read_bytes()
    except (FileNotFoundError, IsADirectoryError, ModuleNotFoundError):
        return _error(404, "no such static file")
    return web.Response(body=data, content_type=_CONTENT_TYPES[match.group(1)],
                        headers={"Cache-Control": "max-age=300"})


async def healthz(_request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer; a time limit on every request; no 500 with a stack trace."""
    try:
        async with asyncio.timeout(REQUEST_SECONDS):
            response = await handler(request)
    except web.HTTPException as exc:  # aiohttp's own 404/405/413: raised on, with the same headers
        _secure(exc.headers)
        raise
    except TimeoutError:
        response = _error(503, f"not answered within {REQUEST_SECONDS:.0f} s: retry")
    _secure(response.headers)
    return response


def _secure(headers: Any) -> None:
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    # same-origin, not no-referrer: with no-referrer Chromium posts the sign-in form with "Origin: null", which the
    # login's cross-site check must refuse; other sites still get no Referer
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cache-Control", "no-store")


def create_app(config: Config, *, index: model.FleetIndex, access: fleet_access.Access,
               namespaces: Callable[[], Iterable[str]] | None = None) -> web.Application:
    """The fleet app. ``namespaces``: those worth asking a viewer's rights about, most useful first (default: the
    ones holding devices)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_guard])
    serving.install(app, timeouts=config.fleet.timeouts, max_connections=config.fleet.max_connections,
                    max_connections_per_source=config.fleet.max_connections_per_source,
                    max_buffered_body_bytes=4 * 1024 * 1024)
    app[CONFIG] = config
    app[INDEX] = index
    app[ACCESS] = access
    app[CACHE] = ResponseCache()
    app[NAMESPACES] = namespaces or (lambda: sorted(index.namespaces()))
    app.router.add_get("/api/v1/fleet", fleet_json)
    app.router.add_get("/fleet", fleet_page)
    app.router.add_post("/fleet/login", login)
    app.router.add_get("/fleet/static/{name}", static)
    app.router.add_get("/healthz", healthz)
    return app


def access_from(config: Config, reviewer: fleet_access.Reviewer) -> fleet_access.Access:
    f = config.fleet
    return fleet_access.Access(reviewer, ttl=f.verdict_ttl_seconds, max_entries=f.max_verdicts,
                               max_namespaces=f.max_namespace_reviews)


def serve_ctx(app: web.Application, *, listen: str, ssl_context: ssl.SSLContext | None,
              on_started: Callable[[str], None] | None = None
              ) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context for the extender's app: the fleet listener runs while the extender does."""

    async def ctx(_parent: web.Application) -> AsyncIterator[None]:
        bounds = app[BOUNDS]
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.25,
                               keepalive_timeout=bounds.idle_seconds, lingering_time=min(10.0, bounds.body_seconds))
        await runner.setup()
        try:
            host, port = split_listen(listen)
            site = BoundedSite(runner, host, port, bounds=bounds, ssl_context=ssl_context)
            await site.start()
            log.info("serving the fleet view", extra={"url": site.url()})
            if on_started is not None:
                on_started(site.url())
            yield
        finally:
            await runner.cleanup()

    return ctx
