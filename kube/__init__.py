"""The only package that talks to kube-apiserver: config, the list/watch cluster view, template creation."""

from kube.cache import MANAGED_BY_SELECTOR, ClusterCache
from kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from kube.config import ApiConfig, KubeConfigError
from kube.inventory import DeviceID, PoolView
from kube.templates import TemplateError, ensure_template

__all__ = [
    "MANAGED_BY_SELECTOR",
    "ApiConfig",
    "ApiError",
    "ApiUnavailable",
    "ClusterCache",
    "DeviceID",
    "KubeClient",
    "KubeConfigError",
    "PoolView",
    "TemplateError",
    "ensure_template",
    "resource_path",
]
