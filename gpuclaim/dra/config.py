"""The gpuclaim configuration file: one YAML document, every section and key optional.

``load_config(data)`` turns the parsed YAML (or None for "no file") into a typed, frozen :class:`Config`. The schema
is the dataclasses below: a field ``foo_bar`` is the key ``fooBar``; its type annotation is the expected type;
``_check`` metadata adds a rule. Unknown keys and wrong types are collected (all of them, not just the first) and
raised as one :class:`ConfigError` whose issues name the full key path, e.g.
``conversion.mappings[2].deviceClassName: expected a string, got int``. Pure: callers read the file.

To add a setting, add a field with a default to the right section; nothing else changes.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeGuard

from gpuclaim.dra import celtext, versions
from gpuclaim.dra.api import names
from gpuclaim.dra.schemas.model import DriverSchema

Check = Callable[[Any], str | None]


def _meta(check: Check) -> dict[str, Any]:
    return {"check": check}


def _rule(test: Callable[[Any], bool], message: str) -> Check:
    return lambda value: None if test(value) else message


_LISTEN = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]*):(\d{1,5})$")
_listen = _rule(
    lambda v: (m := _LISTEN.match(v)) is not None and 0 <= int(m.group(2)) <= 65535,
    "must be HOST:PORT (e.g. 0.0.0.0:8443, [::]:8443 or :8443)",
)


def split_listen(value: str) -> tuple[str, int]:
    """A `listen`/`metricsListen` value (checked by the rule above) -> (host, port) to bind; `:PORT` is all IPv4
    interfaces, `[v6]:PORT` loses its brackets."""
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


_positive = _rule(lambda v: v > 0, "must be greater than zero")
_non_negative = _rule(lambda v: v >= 0, "must be greater than or equal to zero")
_fraction = _rule(lambda v: 0 <= v <= 1, "must be between 0 and 1")
_label_key = _rule(
    lambda v: not names.check_label_key(v), "must be a valid label or annotation key (e.g. gpuclaim.io/x)"
)
_subdomain = _rule(lambda v: not names.check_dns1123_subdomain(v), "must be a lowercase RFC 1123 subdomain")
_namespaces = _rule(lambda v: all(not names.check_dns1123_label(n) for n in v), "must be namespace names (DNS labels)")
_fq_names = _rule(
    lambda v: all(not names.check_fully_qualified_name(n) for n in v),
    "must be fully qualified attribute names (domain/name, e.g. resource.kubernetes.io/pcieRoot)",
)
_fq_name = _rule(lambda v: not names.check_fully_qualified_name(v), "must be a fully qualified attribute name")


# --- conversion (issue 4) ---


def _check_mapping_resource(value: str) -> str | None:
    base = value[:-1] + "x" if value.endswith("*") else value
    if "*" in base or names.check_extended_resource_name(base):
        return "must be an extended resource name (domain/name), optionally ending in * (e.g. nvidia.com/mig-*)"
    return None


@dataclass(frozen=True, slots=True)
class ResourceMapping:
    """A legacy extended resource → a DeviceClass, plus selectors added to the converted request.

    ``resource`` is an exact name or ends in ``*`` (``nvidia.com/mig-*``); ``{suffix}`` in a selector is replaced by
    what the ``*`` matched (``1g.10gb``).
    """

    resource: str = field(metadata=_meta(_check_mapping_resource))
    device_class_name: str = field(metadata=_meta(_subdomain))
    selectors: tuple[str, ...] = ()

    def match(self, resource_name: str) -> str | None:
        """The suffix the wildcard matched ("" for an exact mapping), or None when this mapping does not apply."""
        if self.resource.endswith("*"):
            prefix = self.resource[:-1]
            if resource_name.startswith(prefix) and len(resource_name) > len(prefix):
                return resource_name[len(prefix) :]
            return None
        return "" if resource_name == self.resource else None

    def selectors_for(self, resource_name: str) -> tuple[str, ...]:
        suffix = self.match(resource_name) or ""
        # one escaping function for every literal (issue 14, finding 5); callers validate the name first too
        return tuple(celtext.fill_suffix(s, suffix) for s in self.selectors)


DEFAULT_MAPPINGS = (
    ResourceMapping(resource="nvidia.com/gpu", device_class_name="gpu.nvidia.com"),
    ResourceMapping(
        resource="nvidia.com/mig-*",
        device_class_name="mig.nvidia.com",
        selectors=(
            "'profile' in device.attributes['gpu.nvidia.com'] && "
            "device.attributes['gpu.nvidia.com'].profile == '{suffix}'",
        ),
    ),
    ResourceMapping(resource="amd.com/gpu", device_class_name="gpu.amd.com"),
)


@dataclass(frozen=True, slots=True)
class TopologyConfig:
    """How a request for N > 1 devices is kept local (DESIGN decision 2)."""

    mode: Literal["firstAvailable", "required", "off"] = "firstAvailable"
    attributes: tuple[str, ...] = field(default=("resource.kubernetes.io/pcieRoot",), metadata=_meta(_fq_names))


@dataclass(frozen=True, slots=True)
class GfdMigrationConfig:
    """GPU feature discovery node labels in nodeSelector / required node affinity → device selectors."""

    enabled: bool = True
    keep_node_selector: bool = True
    labels: tuple[str, ...] = ("nvidia.com/gpu.product", "nvidia.com/gpu.memory")


@dataclass(frozen=True, slots=True)
class SharingConfig:
    annotation: str = field(default="gpuclaim.io/sharing-group", metadata=_meta(_label_key))


@dataclass(frozen=True, slots=True)
class OptOutConfig:
    """A pod annotation or namespace label ``<key>: <value>`` skips gpuclaim (the chart's matchConditions agree)."""

    annotation: str = field(default="gpuclaim.io/webhook", metadata=_meta(_label_key))
    namespace_label: str = field(default="gpuclaim.io/webhook", metadata=_meta(_label_key))
    value: str = "disabled"


@dataclass(frozen=True, slots=True)
class ConversionConfig:
    enabled: bool = True
    mappings: tuple[ResourceMapping, ...] = DEFAULT_MAPPINGS
    topology: TopologyConfig = TopologyConfig()
    gfd_migration: GfdMigrationConfig = GfdMigrationConfig()
    sharing: SharingConfig = SharingConfig()
    # KEP-5004: a DeviceClass already declares the resource as its extendedResourceName
    extended_resource_classes: Literal["convert", "leave"] = "convert"
    require_classes_exist: bool = True
    opt_out: OptOutConfig = OptOutConfig()
    # gpuclaim's own namespace is always excluded too (known at runtime)
    excluded_namespaces: tuple[str, ...] = field(default=("kube-system",), metadata=_meta(_namespaces))
    scheduler_name: str | None = None
    #: the ResourceClaimTemplates and shared ResourceClaims gpuclaim makes in one namespace (issue 22, item 6:
    #: forged reviews of distinct shapes made 50,000, each held by every watcher); past it the pod is refused
    max_objects_per_namespace: int = field(default=200, metadata=_meta(_positive))

    def mapping_for(self, resource_name: str) -> ResourceMapping | None:
        """The first mapping that applies to a resource name (exact names and wildcards, in file order)."""
        for mapping in self.mappings:
            if mapping.match(resource_name) is not None:
                return mapping
        return None


# --- validation (issue 5) ---


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    runtime_error: Literal["deny", "warn"] = "deny"
    no_match: Literal["warn", "deny"] = "warn"
    pod_policy: Literal["off", "warn", "deny"] = "off"
    admin_access: Literal["enforce", "off"] = "enforce"
    #: the CEL selectors of one object, all together, in UTF-8 bytes (issue 14, finding 2): more is denied
    #: naming the first selector past the budget, before anything is compiled
    max_selector_bytes: int = field(default=64 * 1024, metadata=_meta(_positive))
    #: compiling one object's new selectors (off the event loop) must finish within this; else a denial
    compile_deadline_seconds: float = field(default=2.0, metadata=_meta(_positive))


# --- servers (issues 6, 7) ---


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """No certFile: the extender serves plain HTTP; the webhook requires TLS (flags may supply the files)."""

    min_version: Literal["1.2", "1.3"] = "1.2"
    cert_file: str | None = None
    key_file: str | None = None


@dataclass(frozen=True, slots=True)
class InternalErrorPolicy:
    validate: Literal["deny", "allow"] = "deny"
    mutate: Literal["allow", "deny"] = "allow"  # allow: the pod is admitted unchanged, with a warning


@dataclass(frozen=True, slots=True)
class ClientAuthConfig:
    """Optional verification of kube-apiserver's client certificate on /mutate and /validate (issue 14,
    finding 7). With `caFile` set, a call without a certificate signed by that CA is refused (401), and with
    `allowedNames` one whose subject CN / DNS SANs name none of them too (403). Probes need no certificate."""

    ca_file: str | None = None
    allowed_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConnectionTimeouts:
    """Bounds on one client connection (docs/dev/serving.md): slow or idle clients cannot hold connections open.

    idleSeconds stays above the 90 s after which Go clients (kube-apiserver, kube-scheduler) drop idle
    connections themselves, so the server never closes one just as the client reuses it for a POST.
    """

    handshake_seconds: float = field(default=10.0, metadata=_meta(_positive))
    header_seconds: float = field(default=10.0, metadata=_meta(_positive))
    body_seconds: float = field(default=10.0, metadata=_meta(_positive))
    idle_seconds: float = field(default=120.0, metadata=_meta(_positive))
    #: writing paused (the client not reading the answer) this long in all since the last request head: closed
    write_seconds: float = field(default=10.0, metadata=_meta(_positive))


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    listen: str = field(default="0.0.0.0:8443", metadata=_meta(_listen))
    metrics_listen: str = field(default="0.0.0.0:9090", metadata=_meta(_listen))
    tls: TlsConfig = TlsConfig()
    max_body_bytes: int = field(default=3 * 1024 * 1024, metadata=_meta(_positive))
    internal_error_policy: InternalErrorPolicy = InternalErrorPolicy()
    grace_period_seconds: float = field(default=25.0, metadata=_meta(_non_negative))
    client_auth: ClientAuthConfig = ClientAuthConfig()
    timeouts: ConnectionTimeouts = ConnectionTimeouts()
    # ~67 KB per idle TLS connection (measured): 1024 of them stay well inside the chart's 512Mi with the caches
    max_connections: int = field(default=1024, metadata=_meta(_positive))
    # one source (peer IP: kube-apiserver is one per replica) may hold this many of them: one flooding client
    # leaves 7/8 of the places to the others (issue 22, item 3)
    max_connections_per_source: int = field(default=128, metadata=_meta(_positive))
    # request bodies (by declared size) and answers held at once; one source at most half of it (serving/bodies.py)
    max_buffered_body_bytes: int = field(default=48 * 1024 * 1024, metadata=_meta(_positive))


@dataclass(frozen=True, slots=True)
class TopologyAttribute:
    name: str = field(metadata=_meta(_fq_name))
    weight: float = field(default=1.0, metadata=_meta(_non_negative))


@dataclass(frozen=True, slots=True)
class ProductFact:
    """Facts a slice does not publish, by product name prefix (e.g. an NVSwitch board: one NVLink domain per node)."""

    product_name: str
    nvlink_domain: Literal["node", "none"] = "node"


@dataclass(frozen=True, slots=True)
class ExtenderWeights:
    topology: float = field(default=0.6, metadata=_meta(_fraction))
    fragmentation: float = field(default=0.4, metadata=_meta(_fraction))


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    listen: str = field(default="0.0.0.0:8888", metadata=_meta(_listen))
    metrics_listen: str = field(default="0.0.0.0:9091", metadata=_meta(_listen))
    tls: TlsConfig = TlsConfig()
    policy: Literal["binpack", "spread"] = "binpack"
    policy_annotation: str = field(default="gpuclaim.io/placement-policy", metadata=_meta(_label_key))
    hard_topology_annotation: str = field(default="gpuclaim.io/topology", metadata=_meta(_label_key))
    topology_attributes: tuple[TopologyAttribute, ...] = (
        TopologyAttribute("resource.kubernetes.io/pcieRoot", 2.0),
        TopologyAttribute("resource.kubernetes.io/numaNode", 1.0),
        TopologyAttribute("gpu.nvidia.com/parentUUID", 1.0),
    )
    product_facts: tuple[ProductFact, ...] = (
        ProductFact("NVIDIA H100 80GB HBM3"),
        ProductFact("NVIDIA H200"),
        ProductFact("NVIDIA A100-SXM4"),
        ProductFact("NVIDIA B200"),
        ProductFact("NVIDIA GB200"),
        ProductFact("NVIDIA GB300"),
    )
    nvlink_annotation: str = field(default="gpuclaim.io/nvlink-groups", metadata=_meta(_label_key))
    weights: ExtenderWeights = ExtenderWeights()
    grace_period_seconds: float = field(default=25.0, metadata=_meta(_non_negative))
    timeouts: ConnectionTimeouts = ConnectionTimeouts()
    max_connections: int = field(default=1024, metadata=_meta(_positive))
    max_connections_per_source: int = field(default=128, metadata=_meta(_positive))
    # a body alone is always taken (kube-scheduler's NodeList may be 64 MiB); the rest as the webhook's
    max_buffered_body_bytes: int = field(default=128 * 1024 * 1024, metadata=_meta(_positive))
    # candidate nodes in one /prioritize or /filter; kube-scheduler sends at most its numFeasibleNodesToFind
    # (500 at 5,000 nodes with the default percentageOfNodesToScore), all nodes only when that is set to 100
    max_nodes: int = field(default=15_000, metadata=_meta(_positive))


# --- the fleet view (issue 26, docs/fleet.md) ---


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The fleet page and API, served by the extender on a port of its own. ``listen`` None: not served."""

    listen: str | None = field(default=None, metadata=_meta(_listen))
    # the node labels the API returns and the nodeSelector filter is meant for (never all of a node's labels)
    labels: tuple[str, ...] = field(default=("nvidia.com/gpu.product", "node.kubernetes.io/instance-type",
                                             "topology.kubernetes.io/zone"), metadata=_meta(
        _rule(lambda v: all(not names.check_label_key(n) for n in v), "must be label keys")))
    # how long a TokenReview/SubjectAccessReview verdict is reused, and how many are kept
    verdict_ttl_seconds: float = field(default=10.0, metadata=_meta(_positive))
    max_verdicts: int = field(default=4096, metadata=_meta(_positive))
    # namespaces asked about per viewer without a cluster-wide right (one SubjectAccessReview each)
    max_namespace_reviews: int = field(default=256, metadata=_meta(_positive))
    max_query_bytes: int = field(default=4096, metadata=_meta(_positive))
    timeouts: ConnectionTimeouts = ConnectionTimeouts()
    max_connections: int = field(default=256, metadata=_meta(_positive))
    max_connections_per_source: int = field(default=32, metadata=_meta(_positive))


# --- the Kubernetes version (issue 24) ---


def _check_kube_version(value: str) -> str | None:
    try:
        parsed = versions.parse_version(value)
    except versions.VersionError:
        return f"must be a Kubernetes version such as {versions.SUPPORTED[-1]} (supported: " \
               f"{versions.SUPPORTED[0]} to {versions.SUPPORTED[-1]})"
    if parsed.minor < versions.OLDEST:
        return f"Kubernetes {parsed} is not supported (supported: {versions.SUPPORTED[0]} to {versions.SUPPORTED[-1]})"
    return None


@dataclass(frozen=True, slots=True)
class KubernetesConfig:
    """Which Kubernetes the servers model (docs/kubernetes-versions.md). ``version`` None: the cluster's
    ``/version``, read at start and after every relist; set: that version, whatever the cluster says.
    ``featureGates``: the gates the control plane runs with where they differ from that version's defaults."""

    version: str | None = field(default=None, metadata=_meta(_check_kube_version))
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))

    def model(self, cluster_version: str | None = None) -> versions.Resolved:
        """The model for the pinned version, else ``cluster_version`` (else the newest), with the gates;
        raises ``versions.VersionError`` / ``versions.GateError``."""
        return versions.resolve(self.version or cluster_version, feature_gates=self.feature_gates)


# --- cluster view, certificates, logging ---


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    initial_seconds: float = field(default=0.5, metadata=_meta(_positive))
    cap_seconds: float = field(default=30.0, metadata=_meta(_positive))
    factor: float = field(default=2.0, metadata=_meta(_rule(lambda v: v >= 1, "must be at least 1")))
    jitter: float = field(default=0.5, metadata=_meta(_fraction))


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    stale_after_seconds: float = field(default=120.0, metadata=_meta(_positive))
    api_timeout_seconds: float = field(default=10.0, metadata=_meta(_positive))
    backoff: BackoffConfig = BackoffConfig()


@dataclass(frozen=True, slots=True)
class CertsConfig:
    """What the servers read of their certificate. `gpuclaim certs` (issuing, rotation) takes flags only."""

    reload_interval_seconds: float = field(default=10.0, metadata=_meta(_positive))


@dataclass(frozen=True, slots=True)
class GcConfig:
    """Garbage collection of what the webhook creates (kube/garbage.py, docs/garbage-collection.md): its
    ResourceClaimTemplates no pod references and its sharing-group ResourceClaims nobody uses are deleted once
    idle for ``idleSeconds``, by the one webhook replica holding the Lease ``leaseName``. The lease timings are
    client-go's leader-election defaults (15 s / 10 s / 2 s)."""

    enabled: bool = True
    idle_seconds: float = field(default=3600.0, metadata=_meta(_positive))
    interval_seconds: float = field(default=300.0, metadata=_meta(_positive))
    dry_run: bool = False  # find and count what would be deleted, log it, delete nothing
    # paces the collector's writes (DELETEs, unused-since marks and clears) so a backlog (20,000 templates)
    # does not hit kube-apiserver as one burst
    max_deletes_per_second: float = field(default=20.0, metadata=_meta(_positive))
    lease_name: str = field(default="gpuclaim-gc", metadata=_meta(_subdomain))
    # default: the webhook's own namespace (POD_NAMESPACE)
    lease_namespace: str | None = field(default=None, metadata=_meta(_rule(
        lambda v: not names.check_dns1123_label(v), "must be a namespace name (a DNS label)")))
    lease_duration_seconds: float = field(default=15.0, metadata=_meta(_positive))
    renew_deadline_seconds: float = field(default=10.0, metadata=_meta(_positive))
    retry_period_seconds: float = field(default=2.0, metadata=_meta(_positive))


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    """GPU quotas across the conversion (kube/quota.py, docs/migration.md). Opt-in: the elected webhook replica
    keeps, beside each ResourceQuota with a ``requests.<mapped resource>`` entry, a ResourceQuota of its own with
    ``<class>.deviceclass.resource.k8s.io/devices``, which kube-apiserver charges converted pods' claims to; the
    mutating webhook refuses a pod whose devices would pass it. The Lease's namespace and timings are gc's."""

    enabled: bool = False
    interval_seconds: float = field(default=10.0, metadata=_meta(_positive))
    # refuse at admission a pod the quota has no room for, as the device plugin's pods were refused
    precheck: bool = True
    # how long the pre-check counts a pod it admitted whose claim the quota's status does not show yet
    reservation_seconds: float = field(default=30.0, metadata=_meta(_positive))
    lease_name: str = field(default="gpuclaim-quota", metadata=_meta(_subdomain))


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "text"] = "json"


@dataclass(frozen=True, slots=True)
class Config:
    conversion: ConversionConfig = ConversionConfig()
    validation: ValidationConfig = ValidationConfig()
    webhook: WebhookConfig = WebhookConfig()
    extender: ExtenderConfig = ExtenderConfig()
    cluster: ClusterConfig = ClusterConfig()
    certs: CertsConfig = CertsConfig()
    gc: GcConfig = GcConfig()
    quota: QuotaConfig = QuotaConfig()
    # a node where the device plugin advertises a mapped resource and the DRA driver behind it publishes slices
    # (dra/mixed.py): avoid = the extender's filter keeps converted pods off it; allow = only warn and count
    mixed_nodes: Literal["avoid", "allow"] = "avoid"
    logging: LoggingConfig = LoggingConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    fleet: FleetConfig = FleetConfig()
    # Driver attribute schemas added to (or, with replace: true, replacing) the shipped ones: docs/driver-schemas.md
    schemas: tuple[DriverSchema, ...] = ()


# --- the loader ---


class ConfigIssue(NamedTuple):
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ValueError):
    """Every problem found in a config file; ``issues`` lists them, the message joins them."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = tuple(issues)
        head = "1 error" if len(issues) == 1 else f"{len(issues)} errors"
        super().__init__(f"config: {head}: " + "; ".join(str(i) for i in issues))


def load_config(data: Mapping[str, Any] | None) -> Config:
    """Build the Config from a parsed YAML document (None or {} = all defaults); raises ConfigError."""
    issues: list[ConfigIssue] = []
    config = _load_dataclass(Config, {} if data is None else data, "", issues)
    if issues:
        raise ConfigError(issues)
    assert isinstance(config, Config)
    _cross_checks(config, issues)
    if issues:
        raise ConfigError(issues)
    return config


def config_keys(cls: type = Config) -> dict[str, Any]:
    """The schema as nested camelCase keys (for docs and the chart's values.schema.json tests)."""
    out: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        out[_camel(f.name)] = config_keys(tp) if _is_dataclass_type(tp) else _describe(tp)
    return out


def _is_dataclass_type(tp: object) -> TypeGuard[type]:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _cross_checks(config: Config, issues: list[ConfigIssue]) -> None:
    for section in ("webhook", "extender"):
        tls: TlsConfig = getattr(config, section).tls
        if (tls.cert_file is None) != (tls.key_file is None):
            issues.append(ConfigIssue(f"{section}.tls", "certFile and keyFile must be set together"))
    gc = config.gc
    # client-go's leaderelection.NewLeaderElector checks the same two orderings (JitterFactor 1.2)
    if gc.lease_duration_seconds <= gc.renew_deadline_seconds:
        issues.append(ConfigIssue("gc.leaseDurationSeconds", "must be greater than gc.renewDeadlineSeconds"))
    if gc.renew_deadline_seconds <= 1.2 * gc.retry_period_seconds:
        issues.append(ConfigIssue("gc.renewDeadlineSeconds", "must be greater than 1.2 x gc.retryPeriodSeconds"))
    seen: set[str] = set()
    for i, mapping in enumerate(config.conversion.mappings):
        if mapping.resource in seen:
            issues.append(
                ConfigIssue(f"conversion.mappings[{i}].resource", f"duplicate mapping for {mapping.resource}")
            )
        seen.add(mapping.resource)
    _check_gates(config.kubernetes, issues)
    drivers: set[str] = set()
    for i, schema in enumerate(config.schemas):
        if schema.driver in drivers:
            issues.append(ConfigIssue(f"schemas[{i}].driver", f"duplicate schema for {schema.driver}"))
        drivers.add(schema.driver)
        if names.check_dns1123_subdomain(schema.driver):
            issues.append(ConfigIssue(f"schemas[{i}].driver", "must be a driver name (a lowercase DNS subdomain)"))


def _check_gates(kube: KubernetesConfig, issues: list[ConfigIssue]) -> None:
    """Gates are checked against the pinned version; unpinned, against every supported one (the cluster's
    own version is checked again when it is known)."""
    minors = range(versions.OLDEST, versions.NEWEST + 1)
    if kube.version is not None:
        minors = range(min(versions.parse_version(kube.version).minor, versions.NEWEST), versions.NEWEST + 1)[:1]
    for name, value in kube.feature_gates.items():
        where = f"kubernetes.featureGates.{name}"
        problems = []
        for minor in minors:
            try:
                versions.model_for(minor, feature_gates={name: value})
            except versions.GateError as err:
                problems.append(str(err))
            else:
                break
        else:
            issues.append(ConfigIssue(where, problems[-1]))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def _typename(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def _load_dataclass(cls: type, data: object, path: str, issues: list[ConfigIssue]) -> object:
    if not isinstance(data, Mapping):
        issues.append(ConfigIssue(path, f"expected a mapping, got {_typename(data)}"))
        return None
    hints = typing.get_type_hints(cls)
    fields = {_camel(f.name): f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            where = f"{path}.{key}" if path else str(key)
            issues.append(ConfigIssue(where, f"unknown key (valid keys: {', '.join(fields)})"))
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        where = f"{path}.{key}" if path else key
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                issues.append(ConfigIssue(where, "required key is missing"))
            continue
        before = len(issues)
        value = _load_value(hints[f.name], data[key], where, issues)
        check = f.metadata.get("check")
        if len(issues) == before and check is not None and value is not None:
            message = check(value)
            if message:
                issues.append(ConfigIssue(where, message))
        kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except TypeError:  # a required key was missing: already reported
        return None


def _load_value(tp: Any, value: object, path: str, issues: list[ConfigIssue]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = (a for a in args if a is not type(None))
        return _load_value(inner, value, path, issues)
    if origin is Literal:
        if not isinstance(value, str) or value not in args:
            choices = ", ".join(str(a) for a in args)
            got = f"{value!r}" if isinstance(value, str) else f"{_typename(value)} {value!r}"
            hint = (
                " (YAML reads unquoted on/off/yes/no as booleans: quote the value)" if isinstance(value, bool) else ""
            )
            issues.append(ConfigIssue(path, f"must be one of {choices}, got {got}{hint}"))
            return args[0]
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            issues.append(ConfigIssue(path, f"expected a list, got {_typename(value)}"))
            return ()
        return tuple(_load_value(args[0], item, f"{path}[{i}]", issues) for i, item in enumerate(value))
    if origin in (Mapping, dict) or tp is Mapping:
        if not isinstance(value, Mapping):
            issues.append(ConfigIssue(path, f"expected a mapping, got {_typename(value)}"))
            return MappingProxyType({})
        return MappingProxyType({str(k): _load_value(args[1], v, f"{path}.{k}", issues) for k, v in value.items()})
    if _is_dataclass_type(tp):
        return _load_dataclass(tp, value, path, issues)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            issues.append(ConfigIssue(path, f"expected a number, got {_typename(value)}"))
            return 0.0
        return float(value)
    if tp in (bool, int, str):
        if type(value) is not tp:
            issues.append(ConfigIssue(path, f"expected {_TYPE_NAMES[tp]}, got {_typename(value)}"))
            return tp()
        return value
    raise TypeError(f"config schema: unsupported type {tp!r} at {path}")  # a bug in the schema, not in the input


def _describe(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (a for a in args if a is not type(None))
        return _describe(inner)
    if origin is Literal:
        return list(args)
    if origin is tuple:
        inner = args[0]
        return [config_keys(inner) if _is_dataclass_type(inner) else _describe(inner)]
    if origin in (Mapping, dict):
        return {"<name>": _describe(args[1])}
    return {bool: "bool", int: "int", float: "number", str: "string"}.get(tp, str(tp))
