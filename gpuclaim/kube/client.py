"""HTTP access to kube-apiserver over one aiohttp session: JSON requests and watch streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
import orjson

from gpuclaim.kube.config import ApiConfig

Obj = dict[str, Any]
PatchType = Literal["merge", "json"]
_PATCH_CONTENT_TYPES = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}


class ApiError(Exception):
    """The server answered with an error Status (code, reason, message as Kubernetes sent them)."""

    def __init__(self, code: int, reason: str, message: str, *, retry_after: float | None = None,
                 status: Obj | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.status = status or {}

    @classmethod
    def from_status(cls, code: int, body: Any, retry_after: float | None = None) -> ApiError:
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls(int(body.get("code") or code), str(body.get("reason") or ""), str(body.get("message") or ""),
                       retry_after=retry_after, status=body)
        return cls(code, "", str(body)[:500], retry_after=retry_after)


class ApiUnavailable(Exception):
    """No answer: connection refused, TLS failure or timeout. The message says which and after how long."""


def segment(value: str) -> str:
    """One URL path segment: percent-escaped (a `/`, `?` or `#` cannot add a segment or a query), and never `.`
    or `..`, which URL normalisation would resolve into another path (issue 14, finding 7: the namespace of a
    forged review went into the API URL unescaped)."""
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} is not a valid path segment for the Kubernetes API")
    return quote(value, safe="")


def resource_path(api_version: str, plural: str, *, namespace: str | None = None, name: str | None = None,
                  subresource: str | None = None) -> str:
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    path = f"{base}/namespaces/{segment(namespace)}/{plural}" if namespace else f"{base}/{plural}"
    if name:
        path += f"/{segment(name)}"
        if subresource:
            path += f"/{segment(subresource)}"
    return path


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["Retry-After"])
    except (KeyError, ValueError):
        return None


class KubeClient:
    """One session per process; TLS verified against the cluster CA; `timeout` bounds each request."""

    def __init__(self, config: ApiConfig, *, timeout: float = 10.0) -> None:
        self.config = config
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            ssl_context = self.config.ssl_context()
            connector = aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else False)
            self._session = aiohttp.ClientSession(base_url=None, connector=connector,
                                                  json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = self.config.token()
        if token:
            headers["Authorization"] = token
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      time_limit: float | None = None) -> Obj:
        limit = self.timeout if time_limit is None else time_limit
        data = None if body is None else orjson.dumps(body)
        try:
            async with asyncio.timeout(limit):
                async with self._get_session().request(
                    method, self.config.server + path, params=params, data=data,
                    headers=self._headers(content_type if data is not None else None),
                ) as response:
                    raw = await response.read()
                    try:
                        payload = orjson.loads(raw) if raw else {}
                    except orjson.JSONDecodeError:
                        payload = raw.decode(errors="replace")
                    if response.status >= 400:
                        raise ApiError.from_status(response.status, payload, _retry_after(response.headers))
                    if not isinstance(payload, dict):
                        raise ApiError(response.status, "BadResponse", f"{method} {path}: not a JSON object")
                    return payload
        except TimeoutError:
            raise ApiUnavailable(f"{method} {path}: no answer from {self.config.server} within {limit:g}s") from None
        except aiohttp.ClientError as exc:
            raise ApiUnavailable(f"{method} {path}: {self.config.server} unreachable: {exc}") from None

    # ---- verbs ---------------------------------------------------------------------------------------------
    async def get(self, path: str, *, time_limit: float | None = None) -> Obj:
        return await self.request("GET", path, time_limit=time_limit)

    async def list(self, path: str, *, params: Mapping[str, str] | None = None, time_limit: float | None = None) -> Obj:
        return await self.request("GET", path, params=params, time_limit=time_limit)

    async def create(self, path: str, obj: Obj, *, dry_run: bool = False, time_limit: float | None = None) -> Obj:
        return await self.request("POST", path, body=obj, params={"dryRun": "All"} if dry_run else None,
                                  time_limit=time_limit)

    async def update(self, path: str, obj: Obj, *, dry_run: bool = False, time_limit: float | None = None) -> Obj:
        return await self.request("PUT", path, body=obj, params={"dryRun": "All"} if dry_run else None,
                                  time_limit=time_limit)

    async def patch(self, path: str, patch: Any, *, patch_type: PatchType = "merge", dry_run: bool = False,
                    time_limit: float | None = None) -> Obj:
        return await self.request("PATCH", path, body=patch, content_type=_PATCH_CONTENT_TYPES[patch_type],
                                  params={"dryRun": "All"} if dry_run else None, time_limit=time_limit)

    async def delete(self, path: str, *, preconditions: Mapping[str, str] | None = None,
                     time_limit: float | None = None) -> Obj:
        """`preconditions` (uid, resourceVersion): the apiserver deletes only that version of that object, else
        409 Conflict."""
        body = None
        if preconditions:
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": dict(preconditions)}
        return await self.request("DELETE", path, body=body, time_limit=time_limit)

    @asynccontextmanager
    async def stream(self, path: str, *, params: Mapping[str, str], silence_timeout: float,
                     connect_limit: float | None = None) -> AsyncIterator[AsyncIterator[Obj]]:
        """A watch: yields decoded events; raises TimeoutError when nothing arrives for `silence_timeout`."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_limit or self.timeout,
                                        sock_read=silence_timeout)
        try:
            async with self._get_session().get(self.config.server + path, params=params, headers=self._headers(),
                                               timeout=timeout) as response:
                if response.status >= 400:
                    raw = await response.read()
                    try:
                        payload: Any = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        payload = raw.decode(errors="replace")
                    raise ApiError.from_status(response.status, payload, _retry_after(response.headers))
                yield _events(response.content)
        except TimeoutError:  # aiohttp's sock_read timeout: the stream went silent
            raise TimeoutError(f"watch {path}: nothing received for {silence_timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise ApiUnavailable(f"watch {path}: {exc}") from None


async def _events(content: aiohttp.StreamReader) -> AsyncIterator[Obj]:
    # chunks, not readline(): one ResourceSlice event with 128 devices can exceed aiohttp's line limit
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1:]
            if line.strip():
                yield orjson.loads(line)
    if buffer.strip():
        yield orjson.loads(buffer)
