"""A Kubernetes API double for tests, not a kube-apiserver (README, "The Kubernetes API double": what it models)."""

from e2e.apiserver.admission import Admission, AdmissionAttributes
from e2e.apiserver.app import Settings, create_app
from e2e.apiserver.errors import ApiError
from e2e.apiserver.faults import Fault, Faults
from e2e.apiserver.resources import RESOURCE_TYPES, ResourceType
from e2e.apiserver.server import RunningDouble, load_directory, serve, write_kubeconfig
from e2e.apiserver.store import Store

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
