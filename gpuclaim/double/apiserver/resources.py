"""The resource types the double serves, keyed the way their URL paths name them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    immutable_spec: bool = False  # ResourceClaim(Template).spec cannot change after create
    # what discovery says about the type, as kube-apiserver 1.37 says it: kubectl resolves `po` or `all` with these
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # the first minor that serves the type at this version: playing an older minor, the double answers 404 as
    # that kube-apiserver does at default gates
    since_minor: int = 0

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.group}/{self.version}/{self.plural}"

    def base_path(self, namespace: str | None = None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"


_RESOURCE = "resource.k8s.io"
_ADMISSION = "admissionregistration.k8s.io"

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(_RESOURCE, "v1", "resourceslices", "ResourceSlice", namespaced=False),
    ResourceType(_RESOURCE, "v1", "resourceclaims", "ResourceClaim", namespaced=True,
                 status_subresource=True, immutable_spec=True),
    ResourceType(_RESOURCE, "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True,
                 immutable_spec=True),
    ResourceType(_RESOURCE, "v1", "deviceclasses", "DeviceClass", namespaced=False),
    # kube-scheduler taints matching devices with these before allocating (1.37 GA, v1; the extender predicts so)
    ResourceType(_RESOURCE, "v1", "devicetaintrules", "DeviceTaintRule", namespaced=False, status_subresource=True,
                 since_minor=37),
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True,
                 short_names=("ns",)),
    ResourceType("", "v1", "nodes", "Node", namespaced=False, status_subresource=True, short_names=("no",)),
    ResourceType("", "v1", "pods", "Pod", namespaced=True, status_subresource=True, short_names=("po",),
                 categories=("all",)),
    ResourceType("", "v1", "secrets", "Secret", namespaced=True),
    ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True, short_names=("cm",)),
    # nothing in the double writes events; served so that `kubectl describe` can look for them
    ResourceType("", "v1", "events", "Event", namespaced=True, short_names=("ev",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    # who may do what (auth.py answers TokenRequest, TokenReview and SubjectAccessReview from these)
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True, short_names=("sa",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    ResourceType(_ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                 namespaced=False, categories=("api-extensions",)),
    ResourceType(_ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                 namespaced=False, categories=("api-extensions",)),
)

BY_KEY: dict[str, ResourceType] = {rt.key: rt for rt in RESOURCE_TYPES}
BY_KIND: dict[tuple[str, str], ResourceType] = {(rt.api_version, rt.kind): rt for rt in RESOURCE_TYPES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_KEY.get(f"{group}/{version}/{plural}")
