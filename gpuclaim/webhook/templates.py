"""Admission-time creation of what a converted pod references: its ResourceClaimTemplate or shared claim.

Called by the webhook server after :func:`webhook.convert.convert_pod`, before it answers. Per object:
- known to the cluster view with the same spec → nothing to do (the common case: no API call);
- known with a different spec → :class:`CreationError` ``object-differs`` (a refusal: the pod would
  get devices of a shape it did not ask for);
- otherwise created in the pod's namespace; 409 AlreadyExists with an identical spec is success, with a
  different spec it is ``object-differs``;
- never on dryRun (the webhook is `sideEffects: NoneOnDryRun`): nothing is created, the pod's patch
  is still returned;
- the API server refusing the object (4xx other than 409: invalid, namespace missing or terminating, quota
  full, forbidden) → ``api-refused``, a refusal carrying the API server's code and message: the pod is denied
  (issue 22, item 2: answered like an outage, ``internalErrorPolicy.mutate: allow`` admitted it unconverted);
- the API server down, slow or failing (5xx, a 409 conflict) → ``api-unavailable`` / ``api-rejected``: the
  server decides deny or allow (`webhook.internalErrorPolicy.mutate`).

With garbage collection on (``touch_after``), an object of gpuclaim's that the view knows and that was last used
(created, or touched) more than ``touch_after`` seconds ago gets its ``gpuclaim.io/last-used`` annotation
refreshed (a merge patch) before it is handed to the pod: the collector on another replica then either sees the
new last-used time, or its precondition-guarded DELETE fails on the new resourceVersion; if the DELETE came
first, the patch gets 404 and the object is created again. Never on dryRun. A failed touch only logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuclaim.kube import garbage
from gpuclaim.kube import templates as kube_templates
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.webhook.convert import Conversion

Obj = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"
_PLURALS = {"ResourceClaimTemplate": "resourceclaimtemplates", "ResourceClaim": "resourceclaims"}
log = logging.getLogger(__name__)


class ClusterView(Protocol):
    """What creation needs of the cluster cache (``kube.ClusterCache`` has both)."""

    def template(self, namespace: str, name: str) -> Obj | None: ...

    def claim(self, namespace: str, name: str) -> Obj | None: ...


class CreationError(Exception):
    """``reference``: object-differs | api-refused (refusals) | api-unavailable | api-rejected (infrastructure).
    ``status``: the API server's (code, reason) of an api-refused."""

    def __init__(self, reference: str, message: str, *, status: tuple[int, str] | None = None) -> None:
        super().__init__(message)
        self.reference = reference
        self.message = message
        self.status = status

    @property
    def is_refusal(self) -> bool:
        return self.reference in ("object-differs", "api-refused")


@dataclass(frozen=True, slots=True)
class Created:
    created: list[str]  # "Kind namespace/name" of the objects this call created or found on 409
    known: list[str]  # already in the cluster view
    dry_run: bool


def _claim_as_template(claim: Mapping[str, Any]) -> Obj:
    # kube.templates normalises template specs; a claim's spec is a template's spec.spec
    return {"spec": {"spec": claim.get("spec") or {}}}


def _diff(existing: Mapping[str, Any], wanted: Mapping[str, Any], kind: str) -> list[str]:
    if kind == "ResourceClaim":
        existing, wanted = _claim_as_template(existing), _claim_as_template(wanted)
        return [d.replace("spec.spec", "spec", 1) for d in kube_templates.differences(
            kube_templates.normalized_spec(dict(existing)), kube_templates.normalized_spec(dict(wanted)))]
    # our own labels on the claims made from the template are part of the spec, compare them too
    return kube_templates.differences(kube_templates.normalized_spec(dict(existing)),
                                      kube_templates.normalized_spec(dict(wanted)))


def _differs(where: str, diffs: list[str]) -> CreationError:
    return CreationError("object-differs", f"{where} already exists with a different spec: " + "; ".join(diffs))


async def _create_claim(client: KubeClient, namespace: str, claim: Obj, time_limit: float) -> None:
    name = claim["metadata"]["name"]
    where = f"ResourceClaim {namespace}/{name}"
    collection = resource_path(API_VERSION, "resourceclaims", namespace=namespace)
    try:
        async with asyncio.timeout(time_limit):
            try:
                await client.create(collection, claim, time_limit=time_limit)
                return
            except ApiError as exc:
                if exc.code != 409 or exc.reason != "AlreadyExists":
                    raise
            existing = await client.get(f"{collection}/{name}", time_limit=time_limit)
    except TimeoutError:
        raise CreationError("api-unavailable", f"{where}: the API server did not answer within {time_limit:g}s"
                            ) from None
    except ApiUnavailable as exc:
        raise CreationError("api-unavailable", f"{where}: {exc}") from None
    except ApiError as exc:
        if kube_templates.refused(exc):
            raise CreationError("api-refused", f"{where}: the API server refused it: {exc}",
                                status=(exc.code, exc.reason)) from None
        raise CreationError("api-rejected", f"{where}: the API server refused it: {exc}") from None
    diffs = _diff(existing, claim, "ResourceClaim")
    if diffs:
        raise _differs(where, diffs)


def touch_due(obj: Mapping[str, Any], touch_after: float, *, sharing_annotation: str) -> float:
    """When admission should next refresh the object's last-used annotation (epoch seconds); never for an object
    gpuclaim did not make (the collector never deletes those)."""
    if not garbage.is_ours(str(obj.get("kind") or "ResourceClaimTemplate"), obj, sharing_annotation=sharing_annotation):
        return float("inf")
    used = garbage.last_used(obj)
    return 0.0 if used is None else used + touch_after


async def _touch(client: KubeClient, kind: str, namespace: str, name: str, now: float, time_limit: float) -> bool:
    """Refresh last-used; False when the object is gone (the collector deleted it: create it again)."""
    path = resource_path(API_VERSION, _PLURALS[kind], namespace=namespace, name=name)
    patch = {"metadata": {"annotations": {garbage.LAST_USED_ANNOTATION: garbage.format_time(now)}}}
    try:
        await client.patch(path, patch, time_limit=time_limit)
    except ApiError as exc:
        if exc.code == 404:
            return False
        log.warning("could not refresh %s on %s %s/%s: %s", garbage.LAST_USED_ANNOTATION, kind, namespace, name, exc)
    except ApiUnavailable as exc:
        log.warning("could not refresh %s on %s %s/%s: %s", garbage.LAST_USED_ANNOTATION, kind, namespace, name, exc)
    return True


async def create_objects(client: KubeClient, view: ClusterView | None, namespace: str, conversion: Conversion, *,
                         dry_run: bool, time_limit: float = 2.0, touch_after: float | None = None,
                         sharing_annotation: str = "", now: Callable[[], float] = time.time) -> Created:
    """Make sure every object ``conversion`` references exists in ``namespace``; raise CreationError if not.
    ``touch_after``: garbage collection is on (see the module doc); None: never touch."""
    created: list[str] = []
    known: list[str] = []
    for obj in conversion.objects:
        kind = obj["kind"]
        name = obj["metadata"]["name"]
        where = f"{kind} {namespace}/{name}"
        body = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        cached = None
        if view is not None:
            cached = view.template(namespace, name) if kind == "ResourceClaimTemplate" else view.claim(namespace, name)
        if cached is not None:
            diffs = _diff(cached, body, kind)
            if diffs:
                raise _differs(where, diffs)
            if (touch_after is None or dry_run
                    or now() < touch_due({**cached, "kind": kind}, touch_after, sharing_annotation=sharing_annotation)
                    or await _touch(client, kind, namespace, name, now(), time_limit)):
                known.append(where)
                continue
            # deleted by the garbage collector since the view saw it: create it again below
        if dry_run:
            continue
        if kind == "ResourceClaimTemplate":
            try:
                await kube_templates.ensure_template(client, namespace, body, time_limit=time_limit)
            except kube_templates.TemplateError as exc:
                reference = "object-differs" if exc.reference == "template-differs" else exc.reference
                raise CreationError(reference, str(exc), status=exc.status) from None
        else:
            await _create_claim(client, namespace, body, time_limit)
        created.append(where)
    return Created(created=created, known=known, dry_run=dry_run)
