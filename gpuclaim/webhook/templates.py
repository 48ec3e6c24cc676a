"""Admission-time creation of what a converted pod references: its ResourceClaimTemplate or shared claim.

Called by the webhook server after :func:`webhook.convert.convert_pod`, before it answers. Per object:
- known to the cluster view with the same spec → nothing to do (the common case: no API call);
- known with a different spec → :class:`CreationError` ``object-differs`` (a refusal: the pod would
  get devices of a shape it did not ask for);
- otherwise created in the pod's namespace; 409 AlreadyExists with an identical spec is success, with a
  different spec it is ``object-differs``;
- never on dryRun (the webhook is `sideEffects: NoneOnDryRun`): nothing is created, the pod's patch
  is still returned;
- the API server down, slow or refusing → ``api-unavailable`` / ``api-rejected``: the server decides
  deny or allow (`webhook.internalErrorPolicy.mutate`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuclaim.kube import templates as kube_templates
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.webhook.convert import Conversion

Obj = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"


class ClusterView(Protocol):
    """What creation needs of the cluster cache (``kube.ClusterCache`` has both)."""

    def template(self, namespace: str, name: str) -> Obj | None: ...

    def claim(self, namespace: str, name: str) -> Obj | None: ...


class CreationError(Exception):
    """``reference``: object-differs (a refusal) | api-unavailable | api-rejected (infrastructure)."""

    def __init__(self, reference: str, message: str) -> None:
        super().__init__(message)
        self.reference = reference
        self.message = message

    @property
    def is_refusal(self) -> bool:
        return self.reference == "object-differs"


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
        raise CreationError("api-rejected", f"{where}: the API server refused it: {exc}") from None
    diffs = _diff(existing, claim, "ResourceClaim")
    if diffs:
        raise _differs(where, diffs)


async def create_objects(client: KubeClient, view: ClusterView | None, namespace: str, conversion: Conversion, *,
                         dry_run: bool, time_limit: float = 2.0) -> Created:
    """Make sure every object ``conversion`` references exists in ``namespace``; raise CreationError if not."""
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
            known.append(where)
            continue
        if dry_run:
            continue
        if kind == "ResourceClaimTemplate":
            try:
                await kube_templates.ensure_template(client, namespace, body, time_limit=time_limit)
            except kube_templates.TemplateError as exc:
                reference = "object-differs" if exc.reference == "template-differs" else exc.reference
                raise CreationError(reference, str(exc)) from None
        else:
            await _create_claim(client, namespace, body, time_limit)
        created.append(where)
    return Created(created=created, known=known, dry_run=dry_run)
