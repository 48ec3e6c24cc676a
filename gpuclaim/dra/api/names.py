"""Name rules and size limits of resource.k8s.io/v1 as kube-apiserver 1.34 applies them.

Each ``check_*`` function returns the apimachinery messages for a bad value (empty list when valid), so callers
can wrap them in a ``FieldError`` at the right path. Messages are the apiserver's own
(k8s.io/apimachinery/pkg/util/validation and pkg/apis/resource/validation).
"""

from __future__ import annotations

import re

# --- limits (k8s.io/api resource/v1 types.go, release-1.34) ---
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
RESOURCE_SLICE_MAX_DEVICES = 128
RESOURCE_SLICE_MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32
DEVICE_MAX_ID_LENGTH = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_REQUESTS_MAX_SIZE = 32
ALLOCATION_RESULTS_MAX_SIZE = 32
DEVICE_CONSTRAINTS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
DEVICE_SELECTORS_MAX_SIZE = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
DEVICE_TOLERATIONS_MAX_LENGTH = 16
DEVICE_DERIVED_ATTRIBUTES_MAX_SIZE = 32  # 1.37
# 4 in 1.34, 16 from 1.35: the parser takes the largest, because the inventory holds what the cluster's own
# apiserver admitted; the limit of one version is `dra.versions` Limits', which `gpuclaim lint` applies
DEVICE_TAINTS_MAX_LENGTH = 16
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
RESOURCE_CLAIM_RESERVED_FOR_MAX_SIZE = 256
BINDING_CONDITIONS_MAX_SIZE = 4
CAPACITY_POLICY_VALID_VALUES_MAX_SIZE = 10  # requestPolicy.validValues (resource/v1 types.go, +k8s:maxItems=10)

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
LABEL_VALUE_MAX_LENGTH = 63
QUALIFIED_NAME_MAX_LENGTH = 63

_LABEL_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + r")*"
_DNS1123_LABEL = re.compile(f"^{_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# semver 2.0.0 without a leading "v", as pkg/apis/resource/validation has it
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$", re.ASCII)

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SEMVER_MSG = "must be a string compatible with semver.org spec 2.0.0"
FULLY_QUALIFIED_MSG = "a fully qualified name must be a domain and a name separated by a slash"


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} characters"


def check_dns1123_label(value: str) -> list[str]:
    msgs = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        msgs.append(_max_len(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL.match(value):
        msgs.append(LABEL_MSG)
    return msgs


def check_dns1123_subdomain(value: str) -> list[str]:
    msgs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        msgs.append(_max_len(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN.match(value):
        msgs.append(SUBDOMAIN_MSG)
    return msgs


def check_driver_name(value: str) -> list[str]:
    """Driver names are validated like CSI driver names: a DNS subdomain of at most 63 characters (case-folded)."""
    msgs = []
    if len(value) > DRIVER_NAME_MAX_LENGTH:
        msgs.append(_max_len(DRIVER_NAME_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN.match(value.lower()):
        msgs.append(SUBDOMAIN_MSG)
    return msgs


def check_pool_name(value: str) -> list[str]:
    """At most 253 characters: one or more DNS subdomains separated by "/"."""
    msgs = []
    if len(value) > POOL_NAME_MAX_LENGTH:
        msgs.append(_max_len(POOL_NAME_MAX_LENGTH))
    for part in value.split("/"):
        if not _DNS1123_SUBDOMAIN.match(part):
            msgs.append(SUBDOMAIN_MSG)
            break
    return msgs


def check_c_identifier(value: str) -> list[str]:
    msgs = []
    if len(value) > DEVICE_MAX_ID_LENGTH:
        msgs.append(_max_len(DEVICE_MAX_ID_LENGTH))
    if not _C_IDENTIFIER.match(value):
        msgs.append(C_IDENTIFIER_MSG)
    return msgs


def check_qualified_name(value: str) -> list[str]:
    """A device attribute / capacity name: C identifier (≤32), optionally prefixed by a driver-style domain."""
    parts = value.split("/")
    if len(parts) == 1:
        return check_c_identifier(value)
    if len(parts) > 2:
        return ["must not contain more than one slash"]
    domain, ident = parts
    msgs = ["the domain must not be empty"] if not domain else check_driver_name(domain)
    msgs += ["the name must not be empty"] if not ident else check_c_identifier(ident)
    return msgs


def check_fully_qualified_name(value: str) -> list[str]:
    """``matchAttribute`` / ``distinctAttribute``: a qualified name that must carry its domain."""
    msgs = check_qualified_name(value)
    if "/" not in value:
        msgs.append(FULLY_QUALIFIED_MSG)
    return msgs


def check_label_key(value: str) -> list[str]:
    """A label / annotation key (``IsQualifiedName``): optional DNS-subdomain prefix, name part ≤63."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        prefix = None
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    msgs = []
    if not name:
        msgs.append("name part must be non-empty")
    else:
        if len(name) > QUALIFIED_NAME_MAX_LENGTH:
            msgs.append("name part must be no more than 63 characters")
        if not _QUALIFIED_NAME_PART.match(name):
            msgs.append(QUALIFIED_NAME_MSG)
    if prefix is not None:
        msgs += ["prefix part " + m for m in check_dns1123_subdomain(prefix)]
    return msgs


def check_label_value(value: str) -> list[str]:
    msgs = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        msgs.append(_max_len(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE.match(value):
        msgs.append(LABEL_VALUE_MSG)
    return msgs


def check_extended_resource_name(value: str) -> list[str]:
    """``v1helper.IsExtendedResourceName``: a qualified name outside the kubernetes.io domain."""
    if "/" not in value or "kubernetes.io/" in value or value.startswith("requests."):
        return ["must be a valid extended resource name"]
    if check_label_key("requests." + value):
        return ["must be a valid extended resource name"]
    return []


def is_semver(value: str) -> bool:
    """Whether a version attribute value is semver 2.0.0 as the apiserver accepts it (no leading "v")."""
    return _SEMVER.match(value) is not None


def qualify(name: str, driver: str) -> str:
    """The fully qualified form of an attribute/capacity name: unqualified names live in the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def split_qualified(name: str) -> tuple[str, str]:
    """``"gpu.nvidia.com/productName"`` → ``("gpu.nvidia.com", "productName")``; no domain gives ``("", name)``."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else ("", name)
