"""The webhook side of kube-apiserver's admission, without I/O: which webhooks match a request, and how their
responses are verified and turned into the Status a client sees (the words are kube-apiserver's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gpuclaim.double.apiserver import errors
from gpuclaim.double.apiserver.resources import ResourceType

Obj = dict[str, Any]


def warning_header(text: str) -> str:
    """RFC 7234 warn-value as kube-apiserver writes it: code 299, agent "-", quoted and escaped text."""
    cleaned = "".join(c if c.isprintable() else " " for c in text)
    return '299 - "' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'


class CallError(Exception):
    """kube-apiserver's ErrCallingWebhook: the webhook could not be used; failurePolicy decides."""

    def __init__(self, hook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{hook}": {reason}')


@dataclass(frozen=True, slots=True)
class Hook:
    config: str
    spec: Obj
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def fail_closed(self) -> bool:
        return self.spec.get("failurePolicy", "Fail") != "Ignore"


def internal_error(exc: Exception) -> errors.ApiError:
    message = str(exc)
    return errors.ApiError(500, f"Internal error occurred: {message}",
                           details={"causes": [{"message": message}]})


def rule_matches(rule: Obj, op: str, rt: ResourceType, sub: str | None, namespace: str) -> bool:
    def has(values: Any, value: str) -> bool:
        return isinstance(values, list) and ("*" in values or value in values)

    if not (has(rule.get("operations"), op) and has(rule.get("apiGroups"), rt.group)
            and has(rule.get("apiVersions"), rt.version)):
        return False
    scope = rule.get("scope", "*")
    if (scope == "Cluster" and namespace) or (scope == "Namespaced" and not namespace):
        return False
    for entry in rule.get("resources") or ():
        res, _, want_sub = str(entry).partition("/")
        if entry == "*/*" or (entry == "*" and not sub):
            return True
        if (res in ("*", rt.plural)) and (want_sub == (sub or "") or (want_sub == "*" and sub)):
            return True
    return False


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty or missing one selects everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or ():
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        present = key in labels
        if ((op == "In" and (not present or labels[key] not in values))
                or (op == "NotIn" and present and labels[key] in values)
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present)):
            return False
    return True


def labels_of(obj: Obj | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def verified_response(hook: Hook, uid: str, raw: bytes) -> Obj:
    """kube-apiserver's VerifyAdmissionResponse, with its messages."""
    def invalid(reason: str) -> CallError:
        return CallError(hook.name, f"received invalid webhook response: {reason}")

    try:
        review = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"the response is not JSON: {exc}") from None
    if not isinstance(review, dict) or not isinstance(review.get("response"), dict):
        raise invalid("webhook response was absent")
    if (review.get("apiVersion"), review.get("kind")) != ("admission.k8s.io/v1", "AdmissionReview"):
        raise invalid("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
                      f"{review.get('apiVersion')}, Kind={review.get('kind')}")
    response: Obj = review["response"]
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    patch, patch_type = response.get("patch"), response.get("patchType")
    if hook.mutating and patch and not patch_type:
        raise invalid("webhook returned response.patch but not response.patchType")
    if hook.mutating and patch_type and not patch:
        raise invalid("webhook returned response.patchType but not response.patch")
    if not hook.mutating and patch:
        raise invalid("validating webhook may not return response.patch")
    if not hook.mutating and patch_type:
        raise invalid("validating webhook may not return response.patchType")
    if patch_type and patch_type != "JSONPatch":
        raise invalid(f'unsupported patch type "{patch_type}"')
    return response


def denial(hook: str, status: Any) -> errors.ApiError:
    """webhookerrors.ToStatusErr: code below 400 becomes 400; the message names the webhook."""
    status = status if isinstance(status, dict) else {}
    denied = f'admission webhook "{hook}" denied the request'
    code = int(status.get("code") or 0)
    reason = str(status.get("reason") or "")
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif reason:
        message = f"{denied}: {reason}"
    else:
        message = f"{denied} without explanation"
    exc = errors.ApiError(max(code, 400), message, details=status.get("details"))
    exc.reason = reason  # kube-apiserver passes the webhook's reason through, empty included
    return exc
