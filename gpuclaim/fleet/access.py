"""Who may see what of the fleet: the cluster's own RBAC, asked through TokenReview and SubjectAccessReview.

- No bearer token: 401 (``WWW-Authenticate: Bearer``). A token the apiserver does not authenticate: 401.
- ``list pods`` at cluster scope and ``list resourceclaims.resource.k8s.io`` at cluster scope: the whole fleet.
- Otherwise the namespaces where the user may ``list pods`` (one SubjectAccessReview each, namespaces holding
  devices first, at most ``fleet.maxNamespaceReviews``): the fleet with every other namespace's claims and pods
  redacted. None: 403.

Verdicts are kept ``fleet.verdictTtlSeconds`` (at most ``fleet.maxVerdicts`` of them), keyed by the sha256 of the
token: the token itself is never stored, logged or echoed. Requests with one token at once share one review.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuclaim.fleet.model import Scope

log = logging.getLogger(__name__)
_PARALLEL_REVIEWS = 8
MAX_TOKEN_BYTES = 16 * 1024  # ServiceAccount tokens are about 1 KiB; OIDC ones a few


class ReviewError(Exception):
    """The apiserver could not be asked (down, timed out, refused gpuclaim's own request)."""


class Reviewer(Protocol):
    async def token_review(self, token: str) -> Mapping[str, Any] | None:
        """The authenticated ``status.user``, or None when the token is not valid."""

    async def access_review(self, user: Mapping[str, Any], attributes: Mapping[str, str]) -> bool:
        """Whether ``user`` may do ``attributes`` (SubjectAccessReview ``resourceAttributes``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int  # 200, 401 or 403
    scope: Scope | None
    user: str = ""
    message: str = ""


def bearer_token(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``; None when absent or not a bearer credential."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_BYTES or any(c.isspace() for c in token):
        return None
    return token


class Access:
    def __init__(self, reviewer: Reviewer, *, ttl: float = 10.0, max_entries: int = 4096,
                 max_namespaces: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self.reviewer = reviewer
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_namespaces = max_namespaces
        self.clock = clock
        self._verdicts: OrderedDict[bytes, tuple[float, Verdict]] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[Verdict]] = {}
        self.reviews = 0  # SubjectAccessReviews and TokenReviews sent (tests and the bench read it)

    def __len__(self) -> int:
        return len(self._verdicts)

    async def verdict(self, token: str | None, namespaces: Callable[[], Iterable[str]]) -> Verdict:
        """``namespaces``: the namespaces to ask about when the cluster-wide right is missing, most useful first."""
        if token is None:
            return Verdict(401, None, message="a bearer token is required (Authorization: Bearer <token>)")
        key = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        hit = self._verdicts.get(key)
        if hit is not None and hit[0] > now:
            self._verdicts.move_to_end(key)
            return hit[1]
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            verdict = await self._review(token, namespaces)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiting requests get it; nobody else must log it as unhandled
            raise
        finally:
            self._pending.pop(key, None)
        future.set_result(verdict)
        self._verdicts[key] = (self.clock() + self.ttl, verdict)
        self._verdicts.move_to_end(key)
        while len(self._verdicts) > self.max_entries:
            self._verdicts.popitem(last=False)
        return verdict

    async def _review(self, token: str, namespaces: Callable[[], Iterable[str]]) -> Verdict:
        self.reviews += 1
        user = await self.reviewer.token_review(token)
        if user is None:
            return Verdict(401, None, message="the token is not valid (TokenReview did not authenticate it)")
        name = str(user.get("username", ""))
        pods, claims = await asyncio.gather(
            self._allowed(user, {"verb": "list", "resource": "pods"}),
            self._allowed(user, {"verb": "list", "group": "resource.k8s.io", "resource": "resourceclaims"}))
        if pods and claims:
            return Verdict(200, Scope(cluster_wide=True), user=name)
        asked: list[str] = []
        for ns in namespaces():
            if len(asked) >= self.max_namespaces:
                break
            if ns not in asked:
                asked.append(ns)
        gate = asyncio.Semaphore(_PARALLEL_REVIEWS)

        async def may_list(ns: str) -> bool:
            async with gate:
                return await self._allowed(user, {"verb": "list", "resource": "pods", "namespace": ns})

        allowed = await asyncio.gather(*(may_list(ns) for ns in asked))
        visible = frozenset(ns for ns, ok in zip(asked, allowed, strict=True) if ok)
        if not visible:
            return Verdict(403, None, user=name, message=f"user {name!r} may not list pods cluster-wide or in any "
                                                         "namespace; a fleet viewer needs list on pods (and on "
                                                         "resourceclaims.resource.k8s.io for the whole fleet)")
        return Verdict(200, Scope(cluster_wide=False, namespaces=visible), user=name)

    async def _allowed(self, user: Mapping[str, Any], attributes: Mapping[str, str]) -> bool:
        self.reviews += 1
        return await self.reviewer.access_review(user, attributes)


class KubeReviewer:
    """TokenReview and SubjectAccessReview through gpuclaim's kube client (``create`` = POST)."""

    def __init__(self, client: Any, *, time_limit: float = 5.0) -> None:
        self.client = client
        self.time_limit = time_limit

    async def token_review(self, token: str) -> Mapping[str, Any] | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        out = await self._post("/apis/authentication.k8s.io/v1/tokenreviews", body)
        status = out.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user")
        return user if isinstance(user, Mapping) else None

    async def access_review(self, user: Mapping[str, Any], attributes: Mapping[str, str]) -> bool:
        spec: dict[str, Any] = {"resourceAttributes": dict(attributes)}
        for field in ("username", "uid", "groups", "extra"):
            if user.get(field):
                spec["user" if field == "username" else field] = user[field]
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        out = await self._post("/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
        return bool((out.get("status") or {}).get("allowed"))

    async def _post(self, path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            out = await self.client.create(path, body, time_limit=self.time_limit)
        except Exception as exc:  # the kube client's ApiError, a timeout, a connection error: all mean "cannot ask"
            # the message of a failed TokenReview never echoes the token (the request body is not in it)
            raise ReviewError(f"{type(exc).__name__}: {str(exc)[:300]}") from None
        if not isinstance(out, Mapping):
            raise ReviewError(f"{path}: the apiserver answered {type(out).__name__}, not an object")
        return out
