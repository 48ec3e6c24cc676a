"""Discovery: `/version`, `/api`, `/apis` and each group version, for exactly the types the double serves.

kubectl 1.37 asks `/api` and `/apis` for aggregated discovery (apidiscovery.k8s.io/v2) and falls back to the
legacy documents (APIVersions, APIGroupList, one APIResourceList per group version) when the server answers
plain JSON; both are served, chosen by `Accept` as kube-apiserver chooses. The verbs are the double's own: no
`deletecollection`, since the double deletes one object at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from gpuclaim.double.apiserver import negotiation
from gpuclaim.double.apiserver.resources import RESOURCE_TYPES, ResourceType

#: the Kubernetes release the double claims to be: the newest gpuclaim supports. The build metadata says it is
#: the double (as k3s says `+k3s1`), so `kubectl version` and anything reading /version can tell.
KUBERNETES_VERSION = "v1.37.2"
GIT_VERSION = f"{KUBERNETES_VERSION}+gpuclaim-double"

VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


def version_info() -> dict[str, str]:
    major, minor, _ = KUBERNETES_VERSION.removeprefix("v").split(".")
    return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMajor": major, "minCompatibilityMinor": str(int(minor) - 1),
            "gitVersion": GIT_VERSION, "gitCommit": "", "gitTreeState": "", "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "", "compiler": "", "platform": "gpuclaim API double (Python), not a kube-apiserver"}


def _group_versions(group: str) -> list[str]:
    return sorted({rt.version for rt in RESOURCE_TYPES if rt.group == group})


def named_groups() -> list[str]:
    return sorted({rt.group for rt in RESOURCE_TYPES if rt.group})


def _types(group: str, version: str) -> list[ResourceType]:
    return sorted((rt for rt in RESOURCE_TYPES if (rt.group, rt.version) == (group, version)), key=lambda r: r.plural)


def served(group: str, version: str) -> bool:
    return bool(_types(group, version))


# ---- legacy discovery ----------------------------------------------------------------------------------------
def _gv(group: str, version: str) -> dict[str, str]:  # only named groups: the core group is APIVersions
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": _group_versions(""),
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group(group: str) -> dict[str, Any]:
    versions = [_gv(group, v) for v in _group_versions(group)]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
            "preferredVersion": versions[0]}


def api_group_list() -> dict[str, Any]:
    groups = [{k: v for k, v in api_group(g).items() if k not in ("kind", "apiVersion")} for g in named_groups()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for rt in _types(group, version):
        entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.kind.lower(), "namespaced": rt.namespaced,
                                 "kind": rt.kind, "verbs": list(VERBS)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        if rt.status_subresource:
            resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": list(STATUS_VERBS)})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}


# ---- aggregated discovery (apidiscovery.k8s.io/v2) -------------------------------------------------------------
def _resource_discovery(rt: ResourceType) -> dict[str, Any]:
    kind = {"group": "", "version": "", "kind": rt.kind}  # empty: the group version it is listed under
    out: dict[str, Any] = {"resource": rt.plural, "responseKind": kind,
                           "scope": "Namespaced" if rt.namespaced else "Cluster",
                           "singularResource": rt.kind.lower(), "verbs": list(VERBS)}
    if rt.short_names:
        out["shortNames"] = list(rt.short_names)
    if rt.categories:
        out["categories"] = list(rt.categories)
    if rt.status_subresource:
        out["subresources"] = [{"subresource": "status", "responseKind": kind, "verbs": list(STATUS_VERBS)}]
    return out


def _group_discovery(group: str, types: Iterable[ResourceType]) -> dict[str, Any]:
    by_version = groupby(sorted(types, key=lambda r: (r.version, r.plural)), key=lambda r: r.version)
    versions = [{"version": version, "resources": [_resource_discovery(rt) for rt in rts], "freshness": "Current"}
                for version, rts in by_version]
    return {"metadata": {"name": group} if group else {}, "versions": versions}


def aggregated(legacy: bool) -> dict[str, Any]:
    """`/api` (legacy=True: the core group, unnamed) or `/apis` (every named group) as an APIGroupDiscoveryList."""
    groups = [""] if legacy else named_groups()
    items = [_group_discovery(g, (rt for rt in RESOURCE_TYPES if rt.group == g)) for g in groups]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": items}


OFFERS = (negotiation.DISCOVERY_V2,)
