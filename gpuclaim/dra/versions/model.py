"""One model per Kubernetes minor: what gpuclaim must do differently on 1.34, 1.35, 1.36 and 1.37.

A :class:`KubernetesModel` is a version plus its effective feature gates; everything else (the allocator features
and implementation, the CEL environments, limits, fields, quota names, KEP-5004) is looked up from those two, so a
gate override changes every answer consistently. Learn the version where it is known (``/version``, config,
``--kubernetes-version``) with :func:`resolve` and pass the model on; nothing else compares minors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from gpuclaim.dra.cel.environment import Environment
from gpuclaim.dra.versions import facts, gates
from gpuclaim.dra.versions.gates import GateSpec

OLDEST = 34
NEWEST = 37
SUPPORTED = tuple(f"1.{m}" for m in range(OLDEST, NEWEST + 1))

# "1.37", "v1.37", "1.37.2", "v1.37.2", and gitVersions with a suffix: "v1.37.2-eks-abc", "v1.37.0+k3s1",
# "v1.37.0-rc.1". A minor of "37+" (GKE's /version minor field) is read as 37.
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\+?(?:\.(\d+))?(?:[-+].*)?$")


class VersionError(ValueError):
    """A version string gpuclaim cannot read, or a version older than it supports."""


class GateError(ValueError):
    """A feature-gate override that names no gate of that version, or flips a locked gate."""


@dataclass(frozen=True, slots=True)
class KubeVersion:
    """A Kubernetes version as read: 1.``minor`` (``patch`` when given); ``text`` is what was read."""

    minor: int
    patch: int | None = None
    text: str = ""

    def __str__(self) -> str:
        return f"1.{self.minor}" if self.patch is None else f"1.{self.minor}.{self.patch}"


def parse_version(text: str) -> KubeVersion:
    """Read "1.37", "v1.37.2" or a ``/version`` gitVersion ("v1.37.2-eks-abc"); raises :class:`VersionError`."""
    m = _VERSION.match(text.strip())
    if m is None or int(m.group(1)) != 1:
        raise VersionError(f"{text!r} is not a Kubernetes version (expected 1.MINOR, e.g. 1.37 or v1.37.2)")
    patch = m.group(3)
    return KubeVersion(int(m.group(2)), None if patch is None else int(patch), text)


@dataclass(frozen=True, slots=True)
class ExtendedResources:
    """KEP-5004 (DRAExtendedResource) as this model's kube-scheduler and quota evaluator apply it."""

    #: the scheduler makes its own claim for an extended resource backed by a DeviceClass
    scheduler_claims: bool
    #: the gate is locked on: nothing can turn the native path off (1.37)
    locked: bool
    #: which nodes keep the device plugin for a mapped resource: "present" (1.34: the key in allocatable, even
    #: 0) or "nonzero" (1.35+: ``isBackedByDRA && allocatable == 0`` goes to DRA; K37/…/extendeddynamicresources.go
    #: :240-251)
    device_plugin_when: str
    #: every class also answers to ``deviceclass.resource.kubernetes.io/<class>`` (1.35+, CHANGELOG-1.35.md:757)
    implicit_class_names: bool
    #: claims are charged to ``requests.deviceclass.resource.kubernetes.io/<class>`` and ``requests.<name>``
    #: (1.35+ with the gate: K37/pkg/quota/v1/evaluator/core/resource_claims.go:119-166)
    quota_by_extended_name: bool


@dataclass(frozen=True, slots=True)
class Allocator:
    """What kube-scheduler's DRA allocator does in this model (reference section 4)."""

    features: frozenset[str]  # upstream Features.Set() names
    implementation: facts.Implementation
    #: pools sorted by (driver, pool) and slices by name, binding-condition pools last (0.36+ incubating and
    #: experimental; D37/…/incubating/pools_incubating.go:192-219). Before: Go map order, unspecified.
    sorted_pools: bool
    #: combinations, not permutations, within one request (0.36+ incubating and experimental, ``startLocation``)
    combinations_only: bool
    #: the DynamicResources Score plugin's weight in the default profile (1.35+: 2; it scores firstAvailable
    #: choices only with DRAPrioritizedList on; K35/pkg/scheduler/apis/config/v1/default_plugins.go:82)
    score_weight: int
    #: PreBind waits up to this long for binding conditions (1.35+, default 600 s with the gate on)
    binding_timeout_seconds: int | None

    def has(self, feature: str) -> bool:
        return feature in self.features


@dataclass(frozen=True, eq=False)
class KubernetesModel:
    """Kubernetes 1.``version.minor`` with ``gates`` in effect (defaults plus ``overrides``).

    Two models are equal (and hash alike) when their minor and effective gates are: a cache keyed by the model
    holds one entry for 1.37.1 and 1.37.2. Derived answers are computed once per model (the webhook asks for
    the CEL environments on every admission).
    """

    version: KubeVersion
    gates: Mapping[str, bool]
    overrides: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> tuple[int, tuple[tuple[str, bool], ...]]:
        return (self.minor, tuple(sorted(self.gates.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KubernetesModel) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def minor(self) -> int:
        return self.version.minor

    @property
    def name(self) -> str:
        """"1.37" (the model, whatever patch was read)."""
        return f"1.{self.minor}"

    def gate(self, name: str) -> bool:
        """Whether gate ``name`` is on; a gate this version does not know is off."""
        return self.gates.get(name, False)

    def gate_spec(self, name: str) -> GateSpec | None:
        """The gate's stage in this version (None: no such gate)."""
        return gates.spec(name, self.minor)

    def with_gates(self, overrides: Mapping[str, bool]) -> KubernetesModel:
        """A derived model with these gates set (on top of this model's overrides)."""
        return model_for(self.version, feature_gates={**self.overrides, **overrides})

    # -- the allocator ----------------------------------------------------------------------------------

    @cached_property
    def allocator(self) -> Allocator:
        features = facts.allocator_features(self.minor, self.gates)
        impl = facts.pick_allocator(self.minor, features)
        newer_search = self.minor >= 36 and impl != "stable"
        binding = self.minor >= 35 and self.gate("DRADeviceBindingConditions")
        return Allocator(features, impl, sorted_pools=newer_search, combinations_only=newer_search,
                         score_weight=2 if self.minor >= 35 else 0,
                         binding_timeout_seconds=600 if binding else None)

    # -- CEL --------------------------------------------------------------------------------------------

    @cached_property
    def cel_new(self) -> Environment:
        """kube-apiserver's environment for a new or changed selector: the libraries of the previous minor
        (``DefaultCompatibilityVersion()`` = min-compatibility = binary - 1, AS37/pkg/cel/environment/base.go:49-55),
        honouring the gates (D37/cel/compile.go:582-660)."""
        compat = self.minor - 1
        lists_types = self.minor >= 36 and self.gate("DRAListTypeAttributes")
        return Environment(
            "new", compat,
            # ext.Lists(ListsVersion(3)) enters at 1.34 (AS35/pkg/cel/environment/base.go:186-188)
            ext_lists=3 if compat >= 34 else 0,
            # the V134 device type with DRAConsumableCapacity on (D34/cel/compile.go:318-366)
            allow_multiple_allocations=self.gate("DRAConsumableCapacity"),
            # library.Lists(ListsVersion(1)) only at 1.37 (AS37 base.go:182-186), so never for new expressions
            # before 1.38; DRA adds IncludesOption() at 1.36 with DRAListTypeAttributes (D37/cel/compile.go:651-658)
            includes=lists_types or compat >= 37,
            list_attributes=lists_types,
            cel_go=facts.CEL_GO[self.minor],
        )

    @cached_property
    def cel_stored(self) -> Environment:
        """kube-scheduler's environment: every library of the binary, gates ignored for declarations
        (AS36/pkg/cel/environment/environment.go:183: "The StoredExpressions environment ignores this function")."""
        return Environment(
            "stored", self.minor, ext_lists=3, allow_multiple_allocations=True,
            includes=self.minor >= 36,
            # 0.37 reads list values whatever the gate (D37/cel/compile.go:292-328); 0.36 only with it on
            list_attributes=self.minor >= 37 or (self.minor == 36 and self.gate("DRAListTypeAttributes")),
            cel_go=facts.CEL_GO[self.minor],
        )

    # -- API ----------------------------------------------------------------------------------------------

    @property
    def limits(self) -> facts.Limits:
        return facts.LIMITS[self.minor]

    def field_state(self, kind: str, field_: str) -> str:
        """"kept", "dropped" (the apiserver silently clears it: its gate is off) or "unknown" (not in this
        version's API) for a gated field of ``facts.GATED_FIELDS``; "kept" for any other field."""
        for entry in facts.GATED_FIELDS:
            if entry.kind == kind and entry.field == field_:
                if entry.since > self.minor:
                    return "unknown"
                return "kept" if self.gate(entry.gate) else "dropped"
        return "kept"

    def gated_field(self, kind: str, field_: str) -> facts.GatedField | None:
        return next((f for f in facts.GATED_FIELDS if f.kind == kind and f.field == field_), None)

    # -- KEP-5004 and quota ---------------------------------------------------------------------------------

    @cached_property
    def extended_resources(self) -> ExtendedResources:
        on = self.gate("DRAExtendedResource")
        spec = self.gate_spec("DRAExtendedResource")
        return ExtendedResources(
            scheduler_claims=on,
            locked=spec is not None and spec.locked,
            device_plugin_when="present" if self.minor == 34 else "nonzero",
            implicit_class_names=on and self.minor >= 35,
            quota_by_extended_name=on and self.minor >= 35,
        )

    def quota_names(self, device_class: str, extended_resource_name: str | None = None) -> tuple[str, ...]:
        """The ResourceQuota resource names a claim's devices of ``device_class`` are charged to.

        Always ``<class>.deviceclass.resource.k8s.io/devices``; with KEP-5004's quota (1.35+, gate on) also
        ``requests.deviceclass.resource.kubernetes.io/<class>`` (A37/core/v1/types.go:8141) and, when the class
        maps an extended resource name, ``requests.<name>`` (K37/pkg/quota/v1/evaluator/core/resource_claims.go
        :119-131, 291-292).
        """
        out = [f"{device_class}.deviceclass.resource.k8s.io/devices"]
        if self.extended_resources.quota_by_extended_name:
            out.append(f"requests.deviceclass.resource.kubernetes.io/{device_class}")
            if extended_resource_name:
                out.append(f"requests.{extended_resource_name}")
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A model and what the caller should tell the user about how it was chosen."""

    model: KubernetesModel
    read: KubeVersion
    warnings: tuple[str, ...] = ()


def model_for(version: KubeVersion | str | int, *,
              feature_gates: Mapping[str, bool] | None = None) -> KubernetesModel:
    """The model of a supported version (raises :class:`VersionError` outside 1.34-1.37, :class:`GateError` for
    a bad override). ``version`` may be a minor (37), a string, or a :class:`KubeVersion`."""
    if isinstance(version, int):
        version = KubeVersion(version, None, f"1.{version}")
    elif isinstance(version, str):
        version = parse_version(version)
    if not OLDEST <= version.minor <= NEWEST:
        raise VersionError(_unsupported(version))
    effective = gates.defaults_at(version.minor)
    for name, value in (feature_gates or {}).items():
        spec = gates.spec(name, version.minor)
        if spec is None:
            known = ", ".join(gates.names_at(version.minor))
            raise GateError(f"feature gate {name!r} does not exist in Kubernetes 1.{version.minor} "
                            f"(its DRA gates: {known})")
        if not isinstance(value, bool):
            raise GateError(f"feature gate {name!r}: expected true or false, got {value!r}")
        if spec.locked and value != spec.default:
            raise GateError(f"feature gate {name!r} is locked to {str(spec.default).lower()} in Kubernetes "
                            f"1.{version.minor} ({spec.stage.upper()}); it cannot be set to {str(value).lower()}")
        effective[name] = value
    return KubernetesModel(version, MappingProxyType(effective), MappingProxyType(dict(feature_gates or {})))


def resolve(version: str | None = None, *, feature_gates: Mapping[str, bool] | None = None) -> Resolved:
    """The model for a version as a user or ``/version`` gives it; None means the newest supported.

    Older than 1.34: :class:`VersionError` naming the version and the supported range. Newer than 1.37: the
    newest model and a warning (a newer cluster mostly keeps what 1.37 does; gates it added are unknown here).
    """
    parsed = parse_version(version) if version is not None else KubeVersion(NEWEST, None, f"1.{NEWEST}")
    if parsed.minor > NEWEST:
        newest = KubeVersion(NEWEST, None, parsed.text)
        warning = (f"Kubernetes {parsed} is newer than gpuclaim knows (supported: {SUPPORTED[0]} to "
                   f"{SUPPORTED[-1]}); using the {SUPPORTED[-1]} model")
        return Resolved(model_for(newest, feature_gates=feature_gates), parsed, (warning,))
    return Resolved(model_for(parsed, feature_gates=feature_gates), parsed)


def _unsupported(version: KubeVersion) -> str:
    return (f"Kubernetes {version} is not supported: gpuclaim supports {SUPPORTED[0]} to {SUPPORTED[-1]} "
            "(resource.k8s.io/v1 is GA from 1.34)")


#: the newest supported version at default gates: the offline commands' default
NEWEST_MODEL = model_for(NEWEST)
