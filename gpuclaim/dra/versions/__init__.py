"""What differs between the Kubernetes minors gpuclaim supports (1.34-1.37), in one place (DESIGN decision 6).

``resolve("v1.37.2-eks-1")`` or ``model_for(36, feature_gates={...})`` gives a :class:`KubernetesModel`: gates,
allocator features and implementation, the apiserver's and the scheduler's CEL environments, limits, gated fields,
KEP-5004 and quota names. Pure data, no I/O.
"""

from gpuclaim.dra.versions.facts import GATED_FIELDS, GatedField, Implementation, Limits
from gpuclaim.dra.versions.gates import GateSpec
from gpuclaim.dra.versions.model import (
    NEWEST,
    NEWEST_MODEL,
    OLDEST,
    SUPPORTED,
    Allocator,
    ExtendedResources,
    GateError,
    KubernetesModel,
    KubeVersion,
    Resolved,
    VersionError,
    model_for,
    parse_version,
    resolve,
)

__all__ = [
    "GATED_FIELDS", "NEWEST", "NEWEST_MODEL", "OLDEST", "SUPPORTED", "Allocator", "ExtendedResources", "GateError",
    "GateSpec", "GatedField", "Implementation", "KubeVersion", "KubernetesModel", "Limits", "Resolved",
    "VersionError", "model_for", "parse_version", "resolve",
]
