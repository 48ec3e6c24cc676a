"""Tokens and RBAC in the double: TokenRequest, TokenReview and SubjectAccessReview, as kube-apiserver answers them.

- ``POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`` (TokenRequest): a random token for an existing
  ServiceAccount, user ``system:serviceaccount:<ns>:<name>``, groups ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>``, ``system:authenticated``. Tokens live in memory (at most ``MAX_TOKENS``, the
  oldest dropped first) and expire after ``spec.expirationSeconds`` (default 3600).
- ``POST /apis/authentication.k8s.io/v1/tokenreviews``: ``status.authenticated`` and ``status.user`` for those.
- ``POST /apis/authorization.k8s.io/v1/subjectaccessreviews``: RBAC over the Roles, ClusterRoles, RoleBindings
  and ClusterRoleBindings the double stores, with kube-apiserver's semantics for resource requests: a rule matches
  when its verbs, apiGroups and resources (``*`` for any, ``resource/subresource``) cover the request and its
  resourceNames are empty or name the object; ClusterRoleBindings grant everywhere, RoleBindings (to a Role of
  their namespace or a ClusterRole) only in their namespace; a cluster-scoped request (namespace "") needs a
  ClusterRoleBinding. Group ``system:masters`` may do everything. Not modelled: aggregated ClusterRoles,
  non-resource URLs, impersonation.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuclaim.double.apiserver import errors
from gpuclaim.double.apiserver.resources import ResourceType, lookup
from gpuclaim.double.apiserver.store import Obj, Store

MAX_TOKENS = 10_000
RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class User:
    username: str
    uid: str
    groups: tuple[str, ...]
    expires: float


class Tokens:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._users: OrderedDict[bytes, User] = OrderedDict()

    def issue(self, namespace: str, name: str, uid: str, seconds: int) -> tuple[str, float]:
        token = "gpuclaim-double." + secrets.token_urlsafe(32)
        expires = self.clock() + seconds
        self._users[hashlib.sha256(token.encode()).digest()] = User(
            f"system:serviceaccount:{namespace}:{name}", uid,
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"), expires)
        while len(self._users) > MAX_TOKENS:
            self._users.popitem(last=False)
        return token, expires

    def review(self, token: str) -> User | None:
        user = self._users.get(hashlib.sha256(token.encode()).digest())
        if user is None or user.expires <= self.clock():
            return None
        return user


def _rt(group: str, plural: str) -> ResourceType:
    rt = lookup(group, "v1", plural)
    assert rt is not None, plural
    return rt


def _subject_matches(subject: Mapping[str, Any], username: str, groups: Iterable[str], binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == username
    if kind == "Group":
        return subject.get("name") in set(groups)
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return username == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def _covers(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def rule_allows(rule: Mapping[str, Any], attrs: Mapping[str, str]) -> bool:
    resource = attrs.get("resource", "")
    if attrs.get("subresource"):
        resource = f"{resource}/{attrs['subresource']}"
    if not _covers(rule.get("verbs"), attrs.get("verb", "")):
        return False
    if not _covers(rule.get("apiGroups"), attrs.get("group", "")):
        return False
    if not _covers(rule.get("resources"), resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.get("name", "") in names


def authorize(store: Store, username: str, groups: Iterable[str], attrs: Mapping[str, str]) -> tuple[bool, str]:
    groups = tuple(groups)
    if "system:masters" in groups:
        return True, "system:masters"
    namespace = attrs.get("namespace", "")

    def rules(kind: str, role_ns: str, name: str) -> list[Any]:
        rt = _rt(RBAC, "clusterroles" if kind == "ClusterRole" else "roles")
        try:
            role = store.get(rt, role_ns if kind == "Role" else "", name)
        except errors.ApiError:
            return []  # a binding to a role that does not exist grants nothing
        return [r for r in role.get("rules") or [] if isinstance(r, Mapping)]

    bindings: list[tuple[str, Obj]] = [("", b) for b in store.list(_rt(RBAC, "clusterrolebindings"), None,
                                                                     lambda _: True)[0]]
    if namespace:
        bindings += [(namespace, b) for b in store.list(_rt(RBAC, "rolebindings"), namespace, lambda _: True)[0]]
    for binding_ns, binding in bindings:
        if not any(_subject_matches(s, username, groups, binding_ns) for s in binding.get("subjects") or []
                   if isinstance(s, Mapping)):
            continue
        ref = binding.get("roleRef") or {}
        kind, name = ref.get("kind", ""), ref.get("name", "")
        if kind == "Role" and not binding_ns:
            continue
        for rule in rules(kind, binding_ns, name):
            if rule_allows(rule, attrs):
                where = f"RoleBinding {binding_ns}/" if binding_ns else "ClusterRoleBinding "
                return True, f'RBAC: allowed by {where}"{binding["metadata"]["name"]}" of {kind} "{name}"'
    return False, ""


def token_request(store: Store, tokens: Tokens, namespace: str, name: str, body: Any) -> Obj:
    sa = store.get(_rt("", "serviceaccounts"), namespace, name)  # 404 as kube-apiserver's when it does not exist
    spec = body.get("spec") if isinstance(body, Mapping) else None
    seconds = (spec or {}).get("expirationSeconds", 3600)
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not 600 <= seconds <= 2**32:
        raise errors.invalid("TokenRequest", name, "authentication.k8s.io", "spec.expirationSeconds",
                             "may not specify a duration less than 10 minutes")
    token, expires = tokens.issue(namespace, name, sa["metadata"].get("uid", ""), seconds)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"expirationSeconds": seconds, "audiences": (spec or {}).get("audiences") or []},
            "status": {"token": token, "expirationTimestamp": stamp}}


def _spec(body: Any, kind: str) -> Mapping[str, Any]:
    spec = body.get("spec") if isinstance(body, Mapping) else None
    if not isinstance(spec, Mapping):
        raise errors.ApiError(400, f"{kind}: spec: Required value")
    return spec


def token_review(tokens: Tokens, body: Any) -> Obj:
    spec = _spec(body, "TokenReview")
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise errors.invalid("TokenReview", "", "authentication.k8s.io", "spec.token", "Required value")
    user = tokens.review(token)
    status: dict[str, Any] = {"authenticated": False, "user": {}}
    if user is not None:
        status = {"authenticated": True, "user": {"username": user.username, "uid": user.uid,
                                                  "groups": list(user.groups)}}
    else:
        status["error"] = "invalid bearer token"
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
            "spec": {"token": token}, "status": status}


def access_review(store: Store, body: Any) -> Obj:
    spec = _spec(body, "SubjectAccessReview")
    attrs = spec.get("resourceAttributes")
    if not isinstance(attrs, Mapping):
        raise errors.invalid("SubjectAccessReview", "", "authorization.k8s.io", "spec.resourceAttributes",
                             "Required value: the double answers resource requests only")
    user, groups = spec.get("user"), spec.get("groups") or []
    if not isinstance(user, str) or not isinstance(groups, list):
        raise errors.invalid("SubjectAccessReview", "", "authorization.k8s.io", "spec.user",
                             "Required value: a user name, and groups as a list")
    clean = {k: str(v) for k, v in attrs.items() if isinstance(v, str)}
    allowed, reason = authorize(store, user, [str(g) for g in groups], clean)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
            "spec": dict(spec), "status": {"allowed": allowed, **({"reason": reason} if reason else {})}}
