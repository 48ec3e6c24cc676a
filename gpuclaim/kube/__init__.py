"""The only package that talks to kube-apiserver: config, the list/watch cluster view, template creation."""

from gpuclaim.dra.api import DeviceID
from gpuclaim.kube.cache import MANAGED_BY_SELECTOR, ClusterCache
from gpuclaim.kube.client import ApiError, ApiUnavailable, KubeClient, resource_path
from gpuclaim.kube.config import ApiConfig, KubeConfigError
from gpuclaim.kube.inventory import PoolView
from gpuclaim.kube.templates import TemplateError, ensure_template

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
