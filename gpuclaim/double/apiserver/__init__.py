"""A Kubernetes API double for tests, not a kube-apiserver (docs/dev/doubles.md: what it models)."""

from gpuclaim.double.apiserver.admission import Admission, AdmissionAttributes
from gpuclaim.double.apiserver.app import Settings, create_app
from gpuclaim.double.apiserver.errors import ApiError
from gpuclaim.double.apiserver.faults import Fault, Faults
from gpuclaim.double.apiserver.resources import RESOURCE_TYPES, ResourceType
from gpuclaim.double.apiserver.server import RunningDouble, load_directory, serve, write_kubeconfig
from gpuclaim.double.apiserver.store import Store

__all__ = [
    "RESOURCE_TYPES",
    "Admission",
    "AdmissionAttributes",
    "ApiError",
    "Fault",
    "Faults",
    "ResourceType",
    "RunningDouble",
    "Settings",
    "Store",
    "create_app",
    "load_directory",
    "serve",
    "write_kubeconfig",
]
