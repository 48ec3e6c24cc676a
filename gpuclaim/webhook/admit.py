"""From a decoded AdmissionReview request to the response: the one place that adapts to the cores.

`Checks` is what the server calls (`mutate`, `validate`); `CoreChecks` (below, `core_checks()`) binds it to the
conversion (issue 4, `webhook.convert`) and validation (issue 5, `webhook.validate`) cores; tests of the server
alone pass small real stand-ins. `admit()` wraps a check
with the server's rules: malformed request fields are denied with their paths, an exception or a time-out in a
check is logged with the uid and answered per `webhook.internalErrorPolicy`, never raised to the HTTP layer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import re
import threading
import time
import types
from collections.abc import Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import orjson

from gpuclaim.dra import versions
from gpuclaim.dra.config import Config
from gpuclaim.dra.fieldpath import ErrorType, FieldError, Path, join_errors
from gpuclaim.serving import offload
from gpuclaim.webhook import review

if TYPE_CHECKING:
    from gpuclaim.webhook.validate.verdict import Notice as FieldNotice

Endpoint = Literal["mutate", "validate"]
Result = Literal["allowed", "denied", "error"]
log = logging.getLogger("gpuclaim.webhook")

#: a request body above this is decoded, converted (without the conversion cache) and encoded in the worker thread
BIG_BODY_BYTES = offload.BIG_BODY_BYTES
# the apiserver's default timeoutSeconds is 10 and the chart sets less: answer before it gives up on us
DEFAULT_TIME_LIMIT = 8.0
_REASON = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
_NO_CLASSES: Mapping[str, Any] = MappingProxyType({})


class CheckUnavailable(Exception):
    """A check could not decide for a reason outside it (the API server is down or slow): answered per
    `webhook.internalErrorPolicy` like an internal error, with this message and without a traceback."""


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning for the user; `reason` is a kebab-case label from a closed set (a metric label)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a check decided. Non-empty `errors` means denied (status 422 Invalid unless `code` says else)."""

    errors: tuple[FieldError, ...] = ()
    code: int = 422
    reason: str = "Invalid"
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[Notice, ...] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    converted: bool = False
    templates_created: int = 0
    #: `patch` already encoded by `review.encode_patch` (a check that reuses a patch encodes it once)
    encoded_patch: str | None = None
    #: the denial's message as it must read (kube-apiserver's own words, e.g. the quota's), instead of `errors` joined
    message: str | None = None

    @property
    def allowed(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True)
class Context:
    """What a check may read: the config and the cluster (both absent-able: the server runs without a cluster)."""

    config: Config
    cluster: Any = None  # kube.ClusterCache when a kubeconfig / in-cluster config is available
    client: Any = None  # kube.KubeClient, for side effects (template creation); None without a cluster
    mixed: Any = None  # kube.mixed.MixedNodes over `cluster`, for the mixed-nodes warning; None without a cluster

    #: the config's model (its pinned version, else the newest), for when no cluster view follows /version
    configured: versions.KubernetesModel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            model = self.config.kubernetes.model().model
        except (versions.VersionError, versions.GateError):  # checked at load; an unpinned gate may not fit 1.37
            model = versions.NEWEST_MODEL
        object.__setattr__(self, "configured", model)

    def kubernetes(self) -> versions.KubernetesModel:
        """The Kubernetes model in use now: the cluster's (followed by the cluster view), else the config's."""
        version = getattr(self.cluster, "version", None)
        if version is not None:
            return version.model
        return self.configured


class Checks(Protocol):
    async def mutate(self, request: review.Request, ctx: Context) -> Outcome: ...

    async def validate(self, request: review.Request, ctx: Context) -> Outcome: ...


@dataclass(frozen=True, slots=True)
class Record:
    """What happened, for metrics and logs (never object contents)."""

    endpoint: Endpoint
    operation: str
    result: Result
    denial_reason: str | None = None
    warning_reasons: tuple[str, ...] = ()
    converted: bool = False
    templates_created: int = 0
    error: str | None = None


@functools.lru_cache(maxsize=256)  # checks use a handful of reasons; the regex ran on every warning
def warning_reason(reason: str) -> str:
    """Keep metric labels bounded: anything that is not a short kebab-case token counts as `other`."""
    return reason if _REASON.match(reason) else "other"


def _denial_reason(errors: Sequence[FieldError]) -> str:
    return str(errors[0].type) if errors else str(ErrorType.INTERNAL)


def _internal(endpoint: Endpoint, request: review.Request, ctx: Context, what: str) -> tuple[review.Response, Record]:
    policy = getattr(ctx.config.webhook.internal_error_policy, endpoint)
    op = request.operation or "unknown"
    if policy == "deny":
        message = (f"gpuclaim could not {'check' if endpoint == 'validate' else 'convert'} this object: {what} "
                   f"(request uid {request.uid}); retry, or ask the cluster admin to look at the gpuclaim logs")
        response = review.Response(request.uid, False, review.Status(500, "InternalError", message))
        return response, Record(endpoint, op, "error", denial_reason=str(ErrorType.INTERNAL), error=what)
    text = (f"gpuclaim: {what}; the pod was admitted unchanged (request uid {request.uid})" if endpoint == "mutate"
            else f"gpuclaim: {what}; the object was admitted without gpuclaim's checks (request uid {request.uid})")
    response = review.Response(request.uid, True, warnings=(text,))
    return response, Record(endpoint, op, "error", warning_reasons=("internal-error",), error=what)


async def _within(coro: Coroutine[Any, Any, Outcome], time_limit: float) -> Outcome:
    """`await coro` under `time_limit`, the timer armed only if the check has to wait.

    A check that never awaits (a cached conversion, a validation) cannot be interrupted by a timer anyway, and
    `asyncio.timeout` costs about 20 us per request (a timer handle, a heap push, its cancellation), as much as
    the cached conversion itself. So the first step runs at once; only a check that waits (template creation,
    an API call) continues under the timer.
    """
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        return cast(Outcome, done.value)
    async with asyncio.timeout(time_limit):
        return await _resume(coro, waiting)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Outcome], waiting: Any) -> Generator[Any, Any, Outcome]:
    """Continue a coroutine already started by hand, as `await` would: pass each future it waits on to the
    task, and the task's answers (a value, or an exception such as the timer's cancellation) back into it."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # CancelledError from the timer, among others: the check gets to clean up
            try:
                waiting = coro.throw(exc)
            except StopIteration as done:
                return cast(Outcome, done.value)
            continue
        try:
            waiting = coro.send(sent)
        except StopIteration as done:
            return cast(Outcome, done.value)


async def admit(endpoint: Endpoint, request: review.Request, request_errors: Sequence[FieldError], *,
                checks: Checks, ctx: Context, time_limit: float = DEFAULT_TIME_LIMIT
                ) -> tuple[review.Response, Record]:
    """Answer one decoded request. Never raises (except cancellation)."""
    op = request.operation if request.operation in review.OPERATIONS else "unknown"
    if request_errors:
        # the review itself is malformed in a way we can answer: deny, naming the fields
        status = review.Status(400, "BadRequest", join_errors(request_errors))
        return (review.Response(request.uid, False, status),
                Record(endpoint, op, "denied", denial_reason=_denial_reason(request_errors)))
    check = checks.mutate if endpoint == "mutate" else checks.validate
    try:
        outcome = await _within(check(request, ctx), time_limit)
    except CheckUnavailable as exc:
        log.warning("admission check could not decide", extra={"uid": request.uid, "endpoint": endpoint,
                                                              "reason": str(exc)})
        return _internal(endpoint, request, ctx, str(exc))
    except TimeoutError:
        log.error("admission check timed out", extra={"uid": request.uid, "endpoint": endpoint,
                                                      "time_limit_s": time_limit})
        return _internal(endpoint, request, ctx, f"the check did not finish within {time_limit:g}s")
    except Exception as exc:
        # the traceback goes to the log (with the uid to find it); the user gets the kind of failure only
        log.exception("admission check failed", extra={"uid": request.uid, "endpoint": endpoint})
        return _internal(endpoint, request, ctx, f"internal error ({type(exc).__name__})")
    warnings = tuple(n.message for n in outcome.warnings)
    reasons = tuple(warning_reason(n.reason) for n in outcome.warnings)
    if not outcome.allowed:
        status = review.Status(outcome.code, outcome.reason, outcome.message or join_errors(outcome.errors))
        response = review.Response(request.uid, False, status, warnings=warnings,
                                   audit_annotations=outcome.audit_annotations)
        return response, Record(endpoint, op, "denied", denial_reason=_denial_reason(outcome.errors),
                                warning_reasons=reasons)
    # the apiserver rejects a patch from a validating webhook: never send one from there
    if endpoint == "mutate":
        response = review.Response(request.uid, True, patch=outcome.patch, warnings=warnings,
                                   audit_annotations=outcome.audit_annotations, encoded_patch=outcome.encoded_patch)
    else:
        response = review.Response(request.uid, True, warnings=warnings, audit_annotations=outcome.audit_annotations)
    return response, Record(endpoint, op, "allowed", warning_reasons=reasons, converted=outcome.converted,
                            templates_created=outcome.templates_created)


# ---- the real cores ------------------------------------------------------------------------------------------


class CoreChecks:
    """Adapts the conversion and validation cores to `Checks`; the only code that knows their signatures.

    Without a cluster (no kubeconfig, not in a pod) DeviceClasses cannot be looked up, so conversion runs as if
    `conversion.requireClassesExist` were off, and templates cannot be created: a pod that would need one is
    admitted unchanged with a warning (it would otherwise reference a template that does not exist).

    The hot path (a pod of a shape seen before, its template in the cluster view at a version already found
    equal) costs a key of the pod's relevant parts, a dict lookup and one cluster-view lookup per template: the
    conversion comes from `webhook.convert.ConversionCache`, its encoded patch and template specs are computed
    once per cache entry.
    """

    def __init__(self, *, own_namespace: str | None = None, cache_size: int = 4096) -> None:
        from gpuclaim.webhook import convert, templates  # the cores cost import time: only for a server that uses them

        self._templates = templates
        self.own_namespace = own_namespace
        self.conversions = convert.ConversionCache(cache_size)
        self._offline_config: tuple[Any, Any] | None = None  # (config, the same with requireClassesExist off)
        # (kind, namespace, name) -> (resourceVersion, spec) already compared equal by webhook.templates
        self._verified: dict[tuple[str, str, str], Any] = {}
        # (kind, namespace, name) -> when its gpuclaim.io/last-used annotation is due for a refresh (gc on)
        self._touch_due: dict[tuple[str, str, str], float] = {}
        self._live: tuple[Any, Any] | None = None  # (the cluster view, its LiveInventory)
        self._reservations: tuple[Any, Any] | None = None  # (the cluster view, its dra.quota.Reservations)
        # namespace -> (kind, name) this process created that the cluster view has not shown yet
        self._pending: dict[str, set[tuple[str, str]]] = {}

    def warm_up(self, config: Config) -> None:
        """Do once, before the server takes connections, what the first requests would otherwise do on the event
        loop: import the cores, read and check the shipped driver schemas, build the CEL environment and compile a
        typical selector. Measured: the first /validate of a fresh process took 128-147 ms (the shipped schemas
        alone), stalling every request behind it; that was the whole of the hostile bench's baseline p99."""
        from gpuclaim.webhook import validate
        from gpuclaim.webhook.convert import convert_pod

        validate.validate_object(_WARM_CLAIM, operation="CREATE", namespace="default",
                                 inventory=validate.OfflineInventory(), config=config,
                                 kubernetes=Context(config=config).kubernetes())
        convert_pod(_WARM_POD, config=self._without_cluster(config.conversion), device_classes=_NO_CLASSES,
                    namespace="default", own_namespace=self.own_namespace)

    def _without_cluster(self, config: Any) -> Any:
        """`conversion` with requireClassesExist off, one object per config (the conversion cache keys on it)."""
        if self._offline_config is None or self._offline_config[0] is not config:
            self._offline_config = (config, dataclasses.replace(config, require_classes_exist=False))
        return self._offline_config[1]

    def _known(self, cache: Any, namespace: str, specs: Sequence[tuple[str, str, bytes]], touch: bool) -> bool:
        """Every object is in the cluster view at a version already found equal to what this pod needs: the
        common case (pods of one shape share a template), answered without comparing the specs again. With
        `touch` (garbage collection on), not when an object's last-used annotation is due for a refresh."""
        verified = self._verified
        if touch:
            now = time.time()
            if any(now >= self._touch_due.get((kind, namespace, name), 0.0) for kind, name, _ in specs):
                return False
        for kind, name, spec in specs:
            cached = cache.template(namespace, name) if kind == "ResourceClaimTemplate" else cache.claim(namespace,
                                                                                                          name)
            if cached is None:
                return False
            version = (cached.get("metadata") or {}).get("resourceVersion")
            if verified.get((kind, namespace, name)) != (version, spec):
                return False
        return True

    def _remember(self, cache: Any, namespace: str, specs: Sequence[tuple[str, str, bytes]],
                  touch_after: float | None, sharing_annotation: str) -> None:
        if len(self._verified) > 10_000:  # bounded: forget everything rather than grow with every namespace
            self._verified.clear()
            self._touch_due.clear()
        for kind, name, spec in specs:
            cached = cache.template(namespace, name) if kind == "ResourceClaimTemplate" else cache.claim(namespace,
                                                                                                          name)
            if cached is not None:
                self._verified[(kind, namespace, name)] = ((cached.get("metadata") or {}).get("resourceVersion"),
                                                           spec)
                if touch_after is not None:
                    self._touch_due[(kind, namespace, name)] = self._templates.touch_due(
                        cached, touch_after, sharing_annotation=sharing_annotation)

    def _view_has(self, cache: Any, kind: str, namespace: str, name: str) -> bool:
        found = cache.template(namespace, name) if kind == "ResourceClaimTemplate" else cache.claim(namespace, name)
        return found is not None

    def _over_cap(self, cache: Any, namespace: str, new: Sequence[tuple[str, str]], limit: int
                  ) -> FieldError | None:
        """A refusal when `new` (the objects this pod needs that the view lacks) would take the namespace past
        `limit` (`conversion.maxObjectsPerNamespace`). Counted: what the view holds, and what this process is
        creating or created that the view has not shown yet (a flood creates faster than the watch reports)."""
        counter = getattr(cache, "owned_count", None)
        if counter is None or not new:
            return None
        pending = self._pending.get(namespace, set())
        pending -= {(k, n) for k, n in pending if self._view_has(cache, k, namespace, n)}
        held = counter(namespace) + len(pending - set(new))
        if held + len(new) <= limit:
            return None
        kinds = " and ".join(sorted({kind for kind, _ in new}))
        return FieldError.forbidden(Path.root("spec", "resourceClaims"), (
            f"gpuclaim would create {kinds} {', '.join(n for _, n in new)} for this pod, but namespace {namespace} "
            f"already holds {held} objects gpuclaim made (ResourceClaimTemplates and shared ResourceClaims named "
            f"gpuclaim-...), and conversion.maxObjectsPerNamespace is {limit}; delete the ones no pod uses (kubectl "
            f"get resourceclaimtemplates -l app.kubernetes.io/managed-by=gpuclaim), or ask the cluster admin to "
            "raise the limit"))

    def _reserve(self, namespace: str, new: Sequence[tuple[str, str]]) -> None:
        """Count `new` as held from now on (until the view shows it, or the create fails): concurrent admissions
        of distinct shapes check the cap before any create returns."""
        if sum(len(p) for p in self._pending.values()) > 10_000:  # bounded: forget rather than grow
            self._pending.clear()
        self._pending.setdefault(namespace, set()).update(new)

    def _release(self, namespace: str, new: Sequence[tuple[str, str]]) -> None:
        pending = self._pending.get(namespace)
        if pending is not None:
            pending.difference_update(new)
            if not pending:
                del self._pending[namespace]

    async def mutate(self, request: review.Request, ctx: Context) -> Outcome:
        templates = self._templates
        if request.operation != "CREATE" or request.kind.kind != "Pod" or request.kind.group or request.sub_resource:
            return Outcome()
        if request.object is None:
            return Outcome(errors=(FieldError.required(Path.root("request", "object"), "a Pod CREATE carries a pod"),))
        conversion_config = ctx.config.conversion
        cache = ctx.cluster
        if cache is None:
            conversion_config = self._without_cluster(conversion_config)
            classes: Mapping[str, Any] = _NO_CLASSES
            labels = None
        elif not getattr(cache, "synced", True):
            # before the first list the view knows no DeviceClass and no namespace label: "class missing" or
            # "namespace not opted out" would be guesses. A pod with nothing to convert passes; one that would
            # be converted is answered per internalErrorPolicy (fail closed: the client retries).
            offline = self.conversions.lookup(request.object, config=self._without_cluster(conversion_config),
                                              device_classes=_NO_CLASSES, namespace_labels=None,
                                              namespace=request.namespace or None, own_namespace=self.own_namespace)
            if offline.conversion.patch or offline.conversion.refusals:
                raise CheckUnavailable("the cluster view has not finished its first list yet (DeviceClasses and "
                                       "namespace labels are unknown); retry in a moment")
            return Outcome(warnings=_Prepared.of(offline.conversion).notices)
        else:
            # parsed once by the cluster view; a new mapping only when a class changed (the conversion
            # cache keys on its identity)
            classes = cache.inventory.parsed_classes()
            labels = cache.namespace_labels(request.namespace) if request.namespace else None
        try:
            if request.size > BIG_BODY_BYTES:
                # pure work on a big pod, off the event loop; such shapes are not cached (see ConversionCache)
                from gpuclaim.webhook.convert import convert_pod
                from gpuclaim.webhook.convert.cache import Entry

                entry = Entry(await offload.off_loop(functools.partial(
                    convert_pod, request.object, config=conversion_config, device_classes=classes,
                    namespace_labels=labels, namespace=request.namespace or None, own_namespace=self.own_namespace)))
                entry.derived["webhook"] = await offload.off_loop(_Prepared.of, entry.conversion)
            else:
                entry = self.conversions.lookup(request.object, config=conversion_config, device_classes=classes,
                                                namespace_labels=labels, namespace=request.namespace or None,
                                                own_namespace=self.own_namespace)
        except (RecursionError, OverflowError, MemoryError) as exc:
            # never admitted unconverted by accident: a clear denial, not the internal-error policy's "allow"
            return Outcome(errors=(_too_big(exc),))
        conversion = entry.conversion
        prepared: _Prepared | None = entry.derived.get("webhook")
        if prepared is None:
            prepared = entry.derived["webhook"] = _Prepared.of(conversion)
        notices = prepared.notices
        if conversion.refusals:
            return Outcome(errors=tuple(conversion.refusals), warnings=notices)
        if not conversion.patch:
            return Outcome(warnings=notices)
        over_quota = self._over_quota(request, ctx, prepared)
        if over_quota is not None:
            return over_quota
        created = 0
        if conversion.objects:
            if ctx.client is None:
                text = ("gpuclaim: this pod asks for GPUs it would convert to a ResourceClaimTemplate, but the webhook "
                        "runs without cluster access and cannot create it; the pod was admitted unchanged")
                return Outcome(warnings=(*notices, Notice("no-cluster", text)))
            gc = ctx.config.gc
            touch_after = gc.idle_seconds / 2 if gc.enabled else None
            if self._known(cache, request.namespace, prepared.specs, touch_after is not None and not request.dry_run):
                self._reserve_quota(request, ctx, prepared)
                return _with_mixed_warning(ctx, prepared, prepared.converted)
            new = [(kind, name) for kind, name, _ in prepared.specs
                   if cache is not None and not self._view_has(cache, kind, request.namespace, name)]
            over = self._over_cap(cache, request.namespace, new, conversion_config.max_objects_per_namespace)
            if over is not None:  # first: a flood of new shapes past the cap compiles nothing
                return Outcome(errors=(over,), warnings=notices)
            invalid = await self._invalid_objects(entry, ctx)
            if invalid:
                return Outcome(errors=invalid, warnings=notices)
            if not request.dry_run:
                self._reserve(request.namespace, new)
            try:  # on dryRun this only compares with the cluster view: sideEffects NoneOnDryRun
                made = await templates.create_objects(ctx.client, ctx.cluster, request.namespace, conversion,
                                                      dry_run=request.dry_run,
                                                      time_limit=min(2.0, ctx.config.cluster.api_timeout_seconds),
                                                      touch_after=touch_after,
                                                      sharing_annotation=conversion_config.sharing.annotation)
            except templates.CreationError as exc:
                self._release(request.namespace, new)
                if not exc.is_refusal:
                    raise CheckUnavailable(exc.message) from None
                if exc.status is None:
                    return Outcome(errors=(FieldError.forbidden(Path.root("spec", "resourceClaims"), exc.message),),
                                   warnings=notices)
                # the API server's own refusal of what the pod needs: its code and message, never the internal-error
                # policy (an "allow" there admitted the GPU pod unconverted, issue 22 item 2)
                text = f"gpuclaim could not create what this pod's GPUs are converted to: {exc.message}"
                return Outcome(errors=(FieldError.forbidden(Path.root("spec", "resourceClaims"), text),),
                               code=exc.status[0], reason=exc.status[1] or "Forbidden", warnings=notices)
            except BaseException:  # the check's timer among others: what was not created holds no place
                self._release(request.namespace, new)
                raise
            created = len(made.created)
            if len(made.known) == len(conversion.objects):
                self._remember(cache, request.namespace, prepared.specs, touch_after,
                               conversion_config.sharing.annotation)
            self._reserve_quota(request, ctx, prepared)
        return _with_mixed_warning(ctx, prepared, Outcome(
            patch=prepared.patch, encoded_patch=prepared.encoded_patch, warnings=notices, converted=True,
            templates_created=created))

    # ---- the quota pre-check (config `quota`, docs/migration.md) ----------------------------------------------

    def _quota_state(self, ctx: Context) -> tuple[list[Any], Any] | None:
        """The namespace-independent part of the pre-check: None when it does not run (off, no cluster, no quota
        watch); else the cluster view's quotas and this view's reservations (subscribed to its quota events)."""
        settings = ctx.config.quota
        cache = ctx.cluster
        if not (settings.enabled and settings.precheck) or cache is None or "ResourceQuota" not in getattr(
                cache, "reflectors", {}):
            return None
        if self._reservations is None or self._reservations[0] is not cache:
            from gpuclaim.dra import quota

            reservations = quota.Reservations(settings.reservation_seconds)

            def follow(kind: str, event_type: str, obj: Any) -> None:
                if kind != "ResourceQuota":
                    return
                if event_type == "DELETED":
                    reservations.forget(obj)
                else:
                    reservations.observe(obj)

            for obj in list(cache.objects("ResourceQuota").values()):
                reservations.observe(obj)
            cache.subscribe(follow)
            self._reservations = (cache, reservations)
        return list(cache.objects("ResourceQuota").values()), self._reservations[1]

    def _over_quota(self, request: review.Request, ctx: Context, prepared: _Prepared) -> Outcome | None:
        """Refuse, in the quota's own words, a pod whose claims the namespace's GPU quota has no room for: what the
        device plugin's pods were told at create. Best effort (the race window is in docs/migration.md); the bound
        is kube-apiserver's charging of the claims."""
        if not prepared.devices:
            return None
        state = self._quota_state(ctx)
        if state is None:
            return None
        from gpuclaim.dra import quota

        quotas, reservations = state
        mirrors = [q for q in quotas if (q.get("metadata") or {}).get("namespace") == request.namespace]
        if not mirrors:
            return None
        message = quota.exceeded(prepared.devices, mirrors,
                                 pending=reservations.pending(request.namespace, time.monotonic()))
        if message is None:
            return None
        return Outcome(errors=(FieldError.forbidden(Path.root("spec"), message),), code=403, reason="Forbidden",
                       message=message, warnings=prepared.notices)

    def _reserve_quota(self, request: review.Request, ctx: Context, prepared: _Prepared) -> None:
        if request.dry_run or not prepared.devices:
            return
        state = self._quota_state(ctx)
        if state is None:
            return
        quotas, reservations = state
        mirrors = [q for q in quotas if (q.get("metadata") or {}).get("namespace") == request.namespace]
        if mirrors:
            reservations.reserve(request.namespace, prepared.devices, mirrors, time.monotonic())

    async def _invalid_objects(self, entry: Any, ctx: Context) -> tuple[FieldError, ...]:
        """Every object the conversion makes, checked with gpuclaim's own resource.k8s.io/v1 validation before it is
        created (issue 22, item 2): what kube-apiserver would refuse becomes the pod's refusal here, naming the
        object's field, instead of a failed create. Once per cached conversion; big selectors are compiled off the
        event loop under `validation.compileDeadlineSeconds`. Past the deadline only the structure is checked: the
        API server judges the selectors, and its refusal is the pod's too (`webhook.templates`)."""
        from gpuclaim.webhook import validate
        from gpuclaim.webhook.validate import budget

        kubernetes = ctx.kubernetes()  # the cluster's version judges: its environment, gated fields and limits
        by_model: dict[Any, tuple[FieldError, ...]] = entry.derived.setdefault("invalid-objects", {})
        known = by_model.get(kubernetes)
        if known is not None:
            return known
        objects = entry.conversion.objects
        big = [e for obj in objects for e in budget.expressions(obj) if e.size > budget.INLINE_BYTES]
        guarded, late = await _compile_off_loop(big, modes=(kubernetes.cel_new,),
                                                deadline=ctx.config.validation.compile_deadline_seconds)
        errors: list[FieldError] = []
        for obj in objects:
            meta = obj["metadata"]
            verdict = validate.validate_object(obj, operation="CREATE", namespace=meta.get("namespace"),
                                               inventory=validate.OfflineInventory(), config=ctx.config,
                                               check_selectors=late is None and not guarded, kubernetes=kubernetes,
                                               admitted=False)  # no apiserver saw it yet
            # a conversion makes one object (a template, or a sharing group's claim): interpreter limits are its
            for error in (*verdict.denials, *(guarded if obj is objects[0] else ())):
                errors.append(FieldError.forbidden(Path.root("spec", "resourceClaims"), (
                    f"gpuclaim converts this pod's GPUs to {obj['kind']} {meta['name']}, and that object is not "
                    f"valid resource.k8s.io/v1 (kube-apiserver would refuse it): {error}")))
        result = tuple(errors)
        if late is None:
            by_model[kubernetes] = result
        return result

    def _inventory(self, ctx: Context) -> Any:
        from gpuclaim.webhook import validate

        if ctx.cluster is None:
            return validate.OfflineInventory()  # everything unknown: the cluster-dependent checks are skipped
        if self._live is None or self._live[0] is not ctx.cluster:
            from gpuclaim.webhook.validate.live import LiveInventory

            # one per cluster view: it subscribes to the cache's events and parses each object once per change
            self._live = (ctx.cluster, LiveInventory(ctx.cluster))
        return self._live[1]

    async def _compile_first(self, request: review.Request, ctx: Context) -> FieldError | FieldNotice | None:
        """Bounded compile work per request (`webhook.validate.budget`): the byte budget over the object's
        selectors, then the big ones compiled in the worker thread under the deadline. None: go on and check
        everything; a FieldError: deny (an expression past the interpreter's limits, which upstream's parser
        refuses too); a FieldNotice: past the budget or the deadline, check what compiles nothing and warn."""
        from gpuclaim.webhook.validate import budget, verdict

        if request.operation not in ("CREATE", "UPDATE") or request.kind.group != "resource.k8s.io":
            return None
        found = list(budget.expressions(request.object))
        settings = ctx.config.validation
        unchecked = budget.over_budget(found, settings.max_selector_bytes)
        if unchecked is not None:
            return unchecked
        big = [e for e in found if e.size > budget.INLINE_BYTES]
        if not big:
            return None
        kubernetes = ctx.kubernetes()
        modes: tuple[Any, ...] = (kubernetes.cel_new, kubernetes.cel_stored) if request.operation == "UPDATE" \
            else (kubernetes.cel_new,)
        guarded, done = await _compile_off_loop(big, modes=modes, deadline=settings.compile_deadline_seconds)
        if guarded:
            return guarded[0]
        if done is not None:
            late = big[min(done, len(big) - 1)]
            return verdict.Notice(late.path, (
                f"{budget.UNCHECKED}: compiling them ({len(big)} of more than {budget.INLINE_BYTES} bytes, "
                f"{sum(e.size for e in big)} bytes) did not finish within {settings.compile_deadline_seconds:g}s "
                f"(validation.compileDeadlineSeconds); {done} were compiled, this one was not"))
        return None

    async def validate(self, request: review.Request, ctx: Context) -> Outcome:
        from gpuclaim.webhook import validate

        if request.object is None and request.operation in ("CREATE", "UPDATE"):
            return Outcome(errors=(FieldError.required(Path.root("request", "object")),))
        first = await self._compile_first(request, ctx)
        if isinstance(first, FieldError):
            return Outcome(errors=(first,))
        inventory = self._inventory(ctx)
        try:
            verdict = validate.validate_object(request.object, operation=request.operation,
                                               old_object=request.old_object, namespace=request.namespace or None,
                                               inventory=inventory, config=ctx.config, check_selectors=first is None,
                                               kubernetes=ctx.kubernetes())
        except (RecursionError, OverflowError, MemoryError) as exc:
            # a hostile object, not a bug of ours: a field error, not an internal error with a traceback
            return Outcome(errors=(_too_big(exc),))
        warnings = [*verdict.warnings, str(first)] if first is not None else verdict.warnings
        notices = tuple(Notice("validation", w) for w in warnings)
        return Outcome(errors=tuple(verdict.denials), warnings=notices)


# what `CoreChecks.warm_up` checks and converts: the shapes of the common requests (a selector reading an attribute
# and a capacity, a pod asking for whole GPUs); never sent to a cluster
_WARM_CLAIM: Mapping[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "warm-up", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 1, "selectors": [{"cel": {"expression": (
            "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")}}]}}]}}}
_WARM_POD: Mapping[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "warm-up", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}

_POOL: concurrent.futures.ThreadPoolExecutor | None = None


async def _compile_off_loop(big: Sequence[Any], *, modes: tuple[Any, ...], deadline: float
                            ) -> tuple[list[FieldError], int | None]:
    """Compile `big` (budget.Expression) in the compile thread into the process-wide selector cache, under
    `deadline`: (the interpreter-limit errors, None) when done; ([], how many were compiled) past it."""
    from gpuclaim.webhook.validate import budget

    if not big:
        return [], None
    stop = threading.Event()
    progress = [0]
    work = asyncio.get_running_loop().run_in_executor(
        _compile_pool(), functools.partial(budget.precompile, list(big), modes=modes, stop=stop, progress=progress))
    try:
        return await asyncio.wait_for(asyncio.shield(work), deadline), None
    except TimeoutError:
        return [], progress[0]
    finally:
        stop.set()  # the worker stops before its next selector


def _compile_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One worker thread for every big compile of the process: a flood of hostile selectors takes at most that
    thread (the event loop keeps the GIL every switch interval, 5 ms), never the loop itself."""
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuclaim-cel-compile")
    return _POOL


def _with_mixed_warning(ctx: Context, prepared: _Prepared, outcome: Outcome) -> Outcome:
    """The converted pod's answer, with a warning when nodes of its DeviceClasses are mixed (dra/mixed.py)."""
    if ctx.mixed is None or not prepared.devices:
        return outcome
    found = {node: overlaps for node, overlaps in ctx.mixed.nodes().items()
             if any(o.device_class in prepared.devices for o in overlaps)}
    if not found:
        return outcome
    names = sorted(found)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    what = sorted({f"{o.resource} / driver {o.driver}" for overlaps in found.values() for o in overlaps})
    effect = ("the scheduler extender's filter keeps this pod off them (mixedNodes: avoid)" if ctx.mixed.avoid
              else "this pod may get a GPU a device-plugin pod already uses there (mixedNodes: allow)")
    text = (f"gpuclaim: {len(names)} node{'s are' if len(names) > 1 else ' is'} mixed ({shown}): the device plugin "
            f"and DRA both hand out the same GPUs ({', '.join(what)}); {effect}")
    return dataclasses.replace(outcome, warnings=(*outcome.warnings, Notice("mixed-nodes", text)))


def _too_big(exc: BaseException) -> FieldError:
    texts: dict[type[BaseException], str] = {RecursionError: "is nested too deeply",
                                             OverflowError: "holds a number too large", MemoryError: "is too large"}
    what = texts.get(type(exc), "cannot be processed")
    return FieldError.forbidden(Path.root("spec"), f"the object {what} for gpuclaim to check ({type(exc).__name__})")


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What the webhook derives from one (cached) conversion, once: its notices, the patch as a tuple and
    encoded for the wire, and each object's (kind, name, canonical spec) for the cluster-view comparison."""

    notices: tuple[Notice, ...]
    patch: tuple[Mapping[str, Any], ...]
    encoded_patch: str | None
    specs: tuple[tuple[str, str, bytes], ...]
    converted: Outcome  # the answer when every object is already in the cluster view (the steady state)
    #: DeviceClass -> devices the pod's claims (one per template) are charged by kube-apiserver's quota
    devices: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, conversion: Any) -> _Prepared:
        patch = tuple(conversion.patch)
        specs = tuple((obj.get("kind", ""), obj["metadata"]["name"],
                       orjson.dumps(obj.get("spec"), option=orjson.OPT_SORT_KEYS)) for obj in conversion.objects)
        notices = tuple(Notice("conversion", w) for w in conversion.warnings)
        encoded = review.encode_patch(patch) if patch else None
        from gpuclaim.dra import quota

        return cls(notices=notices, patch=patch, encoded_patch=encoded, specs=specs,
                   converted=Outcome(patch=patch, encoded_patch=encoded, warnings=notices, converted=True),
                   devices=quota.templates_devices(conversion.templates))


def core_checks(*, own_namespace: str | None = None) -> Checks:
    return CoreChecks(own_namespace=own_namespace)
