"""The admission webhook chain of the API double, as kube-apiserver 1.34 runs it.

    chain = WebhookAdmission(store, services={"gpuclaim/gpuclaim-webhook:443": "127.0.0.1:8443"})
    store.admission = chain

The chain reads the Mutating/ValidatingWebhookConfigurations stored in the double on every request
(kube-apiserver reads them from an informer: a new configuration applies at once). For each webhook:
rules, scope, namespaceSelector, objectSelector, matchConditions (CEL, cel-python), then an
AdmissionReview v1 POSTed over HTTPS verified against `clientConfig.caBundle`, with `?timeout=Ns`,
`failurePolicy`, `sideEffects` on dryRun. Mutating webhooks run one at a time, configurations sorted by
name, patches applied with `jsonpatch`, `reinvocationPolicy: IfNeeded` honoured; validating webhooks
run concurrently and the first failure in configuration order is returned (kube-apiserver returns the
first to arrive). Denials and failures are the Status kube-apiserver would send; warnings go back to the
client as `Warning: 299 - "..."` headers (see `RequestContext`); audit annotations are kept in `audit`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import contextvars
import copy
import re
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import celpy.adapter
import jsonpatch
import orjson

from gpuclaim.certs.context import client_context
from gpuclaim.double.apiserver import errors
from gpuclaim.double.apiserver import webhook_wire as wire
from gpuclaim.double.apiserver.admission import AdmissionAttributes
from gpuclaim.double.apiserver.resources import BY_KEY
from gpuclaim.double.apiserver.store import Store

Obj = dict[str, Any]
DEFAULT_USER: Obj = {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]}
_MUTATING = "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
_VALIDATING = "admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
_EXEMPT = frozenset({"mutatingwebhookconfigurations", "validatingwebhookconfigurations"})
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
_GENERATED_SUFFIX = re.compile(r"^[bcdfghjklmnpqrstvwxz2456789]{5}$")  # the double's (and apiserver's) alphabet
_CEL_CACHE_SIZE = 256


@dataclass
class RequestContext:
    """What one HTTP request to the double carries through admission: its subresource, its user, and the
    warnings the webhooks returned (the app turns those into `Warning` headers)."""

    subresource: str | None = None
    user: Obj = field(default_factory=lambda: copy.deepcopy(DEFAULT_USER))
    warnings: list[str] = field(default_factory=list)


warning_header = wire.warning_header  # the app writes the chain's warnings with it

CURRENT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("gpuclaim_double_request",
                                                                               default=None)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    uid: str
    operation: str
    resource: str
    namespace: str
    name: str
    annotations: Mapping[str, str]


class WebhookAdmission:
    """The double's Admission implementation (see module docstring). `services` maps
    "namespace/name:port" of a `clientConfig.service` to the loopback "host:port" serving it."""

    def __init__(self, store: Store | None = None, *, services: Mapping[str, str] | None = None,
                 audit_size: int = 1000) -> None:
        self.store = store
        self.services = dict(services or {})
        self.audit: collections.deque[AuditRecord] = collections.deque(maxlen=audit_size)
        self.calls: collections.Counter[str] = collections.Counter()  # webhook name -> HTTP calls made
        self._programs: dict[str, Any] = {}
        self._cel = celpy.Environment()
        self._contexts: dict[bytes, ssl.SSLContext] = {}

    # ---- the Admission Protocol ----------------------------------------------------------------------------
    async def mutate(self, attrs: AdmissionAttributes) -> Obj:
        hooks = self._hooks(_MUTATING, attrs, mutating=True)
        if not hooks:
            return attrs.obj
        obj, hidden = _hide_server_fields(attrs)
        annotations: dict[str, str] = {}
        request = self._request(attrs, obj)
        reinvoke: set[int] = set()
        called: list[int] = []
        for round_no in (0, 1):
            for index, hook in enumerate(hooks):
                if round_no == 1 and index not in reinvoke:
                    continue
                before = obj
                obj = await self._call_mutating(hook, request, obj, annotations, round_no, index)
                called.append(index)
                if round_no == 0 and obj != before:
                    reinvoke |= {i for i in called if i != index and hooks[i].spec.get("reinvocationPolicy")
                                 == "IfNeeded"}
            if not reinvoke:
                break
        self._record(request, annotations)
        return _restore_server_fields(obj, hidden)

    async def validate(self, attrs: AdmissionAttributes) -> None:
        hooks = self._hooks(_VALIDATING, attrs, mutating=False)
        if not hooks:
            return
        request = self._request(attrs, None if attrs.operation == "DELETE" else attrs.obj)
        annotations: dict[str, str] = {}
        outcomes = await asyncio.gather(*(self._call_validating(h, request, annotations) for h in hooks),
                                        return_exceptions=True)
        self._record(request, annotations)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    # ---- selection -----------------------------------------------------------------------------------------
    def _hooks(self, key: str, attrs: AdmissionAttributes, *, mutating: bool) -> list[wire.Hook]:
        if self.store is None or attrs.resource.plural in _EXEMPT:
            return []
        context = CURRENT.get()
        sub = context.subresource if context is not None else None
        configs, _ = self.store.list(BY_KEY[key], None, lambda _o: True)
        out = []
        for config in sorted(configs, key=lambda c: c["metadata"]["name"]):
            for spec in config.get("webhooks") or ():
                if any(wire.rule_matches(rule, attrs.operation, attrs.resource, sub, attrs.namespace)
                       for rule in spec.get("rules") or ()) and self._selected(spec, attrs):
                    out.append(wire.Hook(config["metadata"]["name"], spec, mutating))
        return out

    def _selected(self, spec: Obj, attrs: AdmissionAttributes) -> bool:
        if attrs.resource.plural == "namespaces":
            ns_labels: Mapping[str, str] | None = {**wire.labels_of(attrs.obj),
                                                   "kubernetes.io/metadata.name": attrs.name}
        elif attrs.namespace and self.store is not None:
            try:
                ns_labels = wire.labels_of(self.store.get(BY_KEY["/v1/namespaces"], "", attrs.namespace))
            except errors.ApiError:
                ns_labels = {}
            # kube-apiserver sets this label on every namespace (1.22+); the charts select on it
            ns_labels = {**ns_labels, "kubernetes.io/metadata.name": attrs.namespace}
        else:
            ns_labels = None  # other cluster-scoped objects: the namespaceSelector never skips the webhook
        if ns_labels is not None and not wire.selector_matches(spec.get("namespaceSelector"), ns_labels):
            return False
        selector = spec.get("objectSelector")
        if not selector:
            return True
        new = None if attrs.operation == "DELETE" else attrs.obj
        return ((new is not None and wire.selector_matches(selector, wire.labels_of(new)))
                or (attrs.old is not None and wire.selector_matches(selector, wire.labels_of(attrs.old))))

    def _conditions_hold(self, hook: wire.Hook, request: Obj) -> bool:
        """False: skip the webhook. Any false condition wins over errors; errors follow failurePolicy."""
        failures = []
        activation = {"object": celpy.adapter.json_to_cel(request.get("object")),
                      "oldObject": celpy.adapter.json_to_cel(request.get("oldObject")),
                      "request": celpy.adapter.json_to_cel({k: v for k, v in request.items()
                                                    if k not in ("object", "oldObject")})}
        for condition in hook.spec.get("matchConditions") or ():
            name, expression = condition.get("name", ""), str(condition.get("expression", ""))
            try:
                value = self._program(expression).evaluate(activation)
            except Exception as exc:  # cel-python raises CELEvalError, CELParseError, TypeError...
                failures.append(f"{name}: {exc.args[0] if exc.args else exc}")
                continue
            if not isinstance(value, celpy.celtypes.BoolType):
                failures.append(f"{name}: expression must evaluate to bool, got {type(value).__name__}")
            elif not value:
                return False
        if failures and hook.fail_closed:
            reason = "failed to evaluate matchConditions: " + "; ".join(failures)
            raise wire.internal_error(wire.CallError(hook.name, reason))
        return not failures

    def _program(self, expression: str) -> Any:
        program = self._programs.get(expression)
        if program is None:
            if len(self._programs) >= _CEL_CACHE_SIZE:
                self._programs.pop(next(iter(self._programs)))
            program = self._programs[expression] = self._cel.program(self._cel.compile(expression))
        return program

    # ---- the AdmissionReview -------------------------------------------------------------------------------
    def _request(self, attrs: AdmissionAttributes, obj: Obj | None) -> Obj:
        rt = attrs.resource
        context = CURRENT.get()
        sub = (context.subresource if context is not None else None) or ""
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        options: Obj = {"kind": _OPTIONS_KIND[attrs.operation], "apiVersion": "meta.k8s.io/v1"}
        if attrs.dry_run:
            options["dryRun"] = ["All"]
        request: Obj = {"uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk,
                        "requestResource": gvr, "name": (obj or attrs.old or {}).get("metadata", {}).get("name", ""),
                        "namespace": attrs.namespace, "operation": attrs.operation,
                        "userInfo": context.user if context is not None else copy.deepcopy(DEFAULT_USER),
                        "object": obj, "oldObject": attrs.old, "dryRun": attrs.dry_run, "options": options}
        if sub:
            request.update(subResource=sub, requestSubResource=sub)
        if not request["namespace"]:
            del request["namespace"]
        return request

    async def _call_mutating(self, hook: wire.Hook, request: Obj, obj: Obj, annotations: dict[str, str],
                             round_no: int, index: int) -> Obj:
        request = {**request, "object": obj, "uid": str(uuid.uuid4())}
        response = await self._call(hook, request)
        if response is None:
            return obj
        patched = obj
        if response.get("patch"):
            try:
                ops = orjson.loads(base64.b64decode(response["patch"], validate=True))
                patched = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(obj))
            except (binascii.Error, ValueError, TypeError, jsonpatch.JsonPatchException,
                    jsonpatch.JsonPointerException) as exc:
                raise wire.internal_error(exc) from None
            if not isinstance(patched, dict):
                raise wire.internal_error(ValueError("the patched object is not a JSON object"))
        annotations[f"mutation.webhook.admission.k8s.io/round_{round_no}_index_{index}"] = orjson.dumps(
            {"configuration": hook.config, "webhook": hook.name, "mutated": patched != obj}).decode()
        self._annotate(hook, response, annotations)
        return patched

    async def _call_validating(self, hook: wire.Hook, request: Obj, annotations: dict[str, str]) -> None:
        response = await self._call(hook, {**request, "uid": str(uuid.uuid4())})
        if response is not None:
            self._annotate(hook, response, annotations)

    async def _call(self, hook: wire.Hook, request: Obj) -> Obj | None:
        """The verified response of an allowing webhook; None when the webhook was skipped or ignored."""
        if not self._conditions_hold(hook, request):
            return None
        if request["dryRun"] and hook.spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise errors.ApiError(400, f'admission webhook "{hook.name}" does not support dry run')
        try:
            response = await self._post(hook, request)
        except wire.CallError as exc:
            if hook.fail_closed:
                raise wire.internal_error(exc) from None
            return None
        context = CURRENT.get()
        if context is not None:
            context.warnings.extend(str(w) for w in response.get("warnings") or ())
        if not response.get("allowed"):
            raise wire.denial(hook.name, response.get("status"))
        return response

    async def _post(self, hook: wire.Hook, request: Obj) -> Obj:
        url, connect, server_name, ca_bundle = self._endpoint(hook)
        timeout = int(hook.spec.get("timeoutSeconds", 10))
        sep = "&" if "?" in url else "?"
        shown = f"{url}{sep}timeout={timeout}s"
        body = orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
        self.calls[hook.name] += 1
        try:
            async with (asyncio.timeout(timeout), aiohttp.ClientSession() as session,
                        session.post(f"{connect}{sep}timeout={timeout}s", data=body,
                                     ssl=self._ssl(ca_bundle) if connect.startswith("https") else False,
                                     server_hostname=server_name,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
                        as reply):
                raw = await reply.read()
                status = reply.status
        except TimeoutError:
            raise wire.CallError(hook.name,
                                 f'failed to call webhook: Post "{shown}": context deadline exceeded') from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise wire.CallError(hook.name, f'failed to call webhook: Post "{shown}": {exc}') from None
        if status != 200:
            raise wire.CallError(hook.name, f"failed to call webhook: an error on the server "
                                        f"({raw[:200].decode(errors='replace')!r}) has prevented the request from "
                                        f"succeeding (status {status})")
        return wire.verified_response(hook, request["uid"], raw)

    def _endpoint(self, hook: wire.Hook) -> tuple[str, str, str | None, bytes | None]:
        """(URL as shown in messages, URL connected to, TLS server name, CA bundle PEM)."""
        client = hook.spec.get("clientConfig") or {}
        try:
            ca = base64.b64decode(client["caBundle"], validate=True) if client.get("caBundle") else None
        except (binascii.Error, ValueError):
            raise wire.CallError(hook.name, "clientConfig.caBundle: not valid base64") from None
        if client.get("url"):
            return client["url"], client["url"], None, ca
        service = client.get("service") or {}
        port = int(service.get("port", 443))
        host = f"{service.get('name')}.{service.get('namespace')}.svc"
        path = service.get("path") or ""
        key = f"{service.get('namespace')}/{service.get('name')}:{port}"
        target = self.services.get(key)
        if target is None:
            raise wire.CallError(hook.name, f'failed to call webhook: service "{key}" has no endpoint '
                                        "(add it to the double's webhook service table)")
        return f"https://{host}:{port}{path}", f"https://{target}{path}", host, ca

    def _ssl(self, ca: bytes | None) -> ssl.SSLContext:
        """Trust exactly the caBundle (kube-apiserver falls back to the system roots when it is empty)."""
        key = ca or b""
        context = self._contexts.get(key)
        if context is None:
            if len(self._contexts) >= 16:  # rotations add bundles; a handful is all that is ever live
                self._contexts.clear()
            context = self._contexts[key] = client_context(ca_pem=ca) if ca else ssl.create_default_context()
        return context

    # ---- audit ---------------------------------------------------------------------------------------------
    @staticmethod
    def _annotate(hook: wire.Hook, response: Obj, annotations: dict[str, str]) -> None:
        for key, value in (response.get("auditAnnotations") or {}).items():
            annotations[f"{hook.name}/{key}"] = str(value)

    def _record(self, request: Obj, annotations: dict[str, str]) -> None:
        if annotations:
            self.audit.append(AuditRecord(request["uid"], request["operation"], request["resource"]["resource"],
                                          request.get("namespace", ""), request["name"], dict(annotations)))


def _hide_server_fields(attrs: AdmissionAttributes) -> tuple[Obj, Obj]:
    """On CREATE, mutating webhooks run before the apiserver generates the name and sets uid and
    creationTimestamp (BeforeCreate): send the object as it was before those, put them back afterwards."""
    obj = attrs.obj
    if attrs.operation != "CREATE":
        return obj, {}
    meta = obj.get("metadata") or {}
    hidden = {k: meta[k] for k in ("uid", "creationTimestamp", "generation") if k in meta}
    prefix = meta.get("generateName")
    name = meta.get("name", "")
    if prefix and name.startswith(prefix) and _GENERATED_SUFFIX.match(name[len(prefix):]):
        hidden["name"] = name
    if not hidden:
        return obj, {}
    obj = {**obj, "metadata": {k: v for k, v in meta.items() if k not in hidden}}
    return obj, hidden


def _restore_server_fields(obj: Obj, hidden: Obj) -> Obj:
    if hidden:
        obj = {**obj, "metadata": {**(obj.get("metadata") or {}), **hidden}}
    return obj
