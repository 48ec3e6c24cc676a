"""Static checks of selectors, constraints and counts against what the drivers publish (docs/driver-schemas.md).

Without an inventory the shipped schemas (plus the config's ``schemas:``) are the reference; with one (``lint
--slices``, the webhook's cluster view) what the devices of a driver publish wins for that driver. Findings the
issue calls errors (an unknown name, a non-bool selector, a claim over 32 devices, an unknown constraint
attribute) are reported with ``SchemaCheck.severity``: ``deny`` in ``gpuclaim lint`` (as errors the scheduler
would meet, ``Verdict.scheduling``, apart from admission's denials), ``warn`` in the webhook, because
kube-apiserver itself accepts these objects. The rest are warnings everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuclaim.dra import api
from gpuclaim.dra.api import names
from gpuclaim.dra.fieldpath import FieldError, Path
from gpuclaim.dra.schemas import STANDARD_DOMAIN, Entry, Schema, closest, registry
from gpuclaim.dra.schemas.selectors import Comparison, Facts, Read, facts

from .inventory import DeviceIndex, Unknown
from .verdict import Findings

__all__ = ["SchemaCheck", "check_claim", "check_class"]

_NUMERIC = {"int", "uint", "double"}
_LITERAL_TYPE = {"int": "int", "uint": "int", "double": "int", "string": "string", "bool": "bool",
                 "version": "version"}


@dataclass(frozen=True)
class SchemaCheck:
    """The reference schemas for one validation: ``registry`` (shipped + config) and, per driver, what the
    inventory's devices publish (``observed``; None without an inventory)."""

    registry: registry.Registry
    observed: dict[str, Schema] | None
    severity: Literal["deny", "warn"]

    @classmethod
    def build(cls, extra: Any, index: DeviceIndex | Unknown, *, severity: Literal["deny", "warn"]) -> SchemaCheck:
        reg = registry.registry(extra)
        if not isinstance(index, DeviceIndex):
            return cls(reg, None, severity)
        if index.schemas is None or index.schemas[0] is not reg:
            # Owned by the index (a new one for every slice change), merged from what each slice publishes,
            # which its segment owns: an unchanged slice is not read again.
            parts = []
            for segment in index.segments:
                if segment.schemas is None or segment.schemas[0] is not reg:
                    segment.schemas = (reg, registry.published(segment.devices, reg))
                parts.append(segment.schemas[1])
            index.schemas = (reg, registry.observed(parts, reg))
        return cls(reg, index.schemas[1], severity)

    def schema(self, driver: str) -> Schema | None:
        if self.observed is not None and driver in self.observed:
            return self.observed[driver]
        return self.registry.get(driver)


def _facts(selectors: tuple[api.Selector, ...]) -> list[tuple[api.Selector, Facts]]:
    return [(s, f) for s in selectors if (f := facts(s.expression)) is not None]


def _drivers(chain: list[tuple[api.Selector, Facts]]) -> list[str]:
    out: dict[str, None] = {}
    for _, f in chain:
        out.update(dict.fromkeys(f.drivers))
        out.update(dict.fromkeys(r.domain for r in f.reads if r.domain != STANDARD_DOMAIN))
    return list(out)


def _listing(items: Any) -> str:
    return ", ".join(str(i) for i in items)


class _Checker:
    def __init__(self, check: SchemaCheck, findings: Findings) -> None:
        self.check = check
        self.findings = findings

    def error(self, path: Path, value: object, message: str) -> None:
        if self.check.severity == "deny":
            self.findings.refused_at_scheduling(FieldError.invalid(path, value, message))
        else:
            self.findings.warn(path, message)

    def warn(self, path: Path, message: str) -> None:
        self.findings.warn(path, message)

    def schema_for(self, domain: str, drivers: list[str]) -> Schema | None:
        """The schema that knows names of ``domain``: the driver's own, or for the standard domain the one driver
        the request is for (its schema lists the standard names it publishes), else the standard schema."""
        if domain != STANDARD_DOMAIN:
            return self.check.schema(domain)
        own = self.check.schema(drivers[0]) if len(drivers) == 1 else None
        if own is not None and STANDARD_DOMAIN in own.domains():
            return own
        return self.check.registry.standard

    def entries(self, kind: Literal["attribute", "capacity"], domain: str, name: str, drivers: list[str],
                path: Path, value: object, what: str, device_types: frozenset[str] = frozenset(),
                guarded: bool = False) -> tuple[Schema | None, list[Entry]]:
        """Report an unknown name (error), one the request's device types do not carry or only some releases
        publish (warnings); return the entries. ``device_types``: the types the selectors pin, if any.
        ``guarded``: the selector reads the name behind a presence test or optionally, so devices without it
        cannot make it fail: only some releases publishing it is then no finding."""
        schema = self.schema_for(domain, drivers)
        if schema is None:
            return None, []
        found = schema.lookup(kind, domain, name)
        if not found:
            # With an inventory the dry-run has usually said it already (a runtime error on those devices).
            if schema.origin != "inventory" or not self._reported(path):
                self.error(path, value, self._unknown(schema, kind, domain, name, qualified=what != kind))
            return schema, []
        narrowed = found
        types = device_types & set(schema.device_types) if schema.origin != "inventory" else frozenset()
        if types:
            narrowed = [e for e in found if not e.devices or e.devices & types]
            if not narrowed:
                carriers = sorted(set().union(*(e.devices for e in found)))
                self.warn(path, f"{what} {domain}/{name} is not published on {_listing(sorted(types))} devices (only "
                                f"on {_listing(carriers)} devices), which the selectors ask for")
                return schema, found
        existing = schema.releases_with(types) if types else frozenset(schema.releases)
        releases = schema.releases_of(narrowed) & existing
        if schema.releases and len(releases) < len(existing) and not guarded:
            published = [r for r in schema.releases if r in releases]
            missing = [r for r in schema.releases if r in existing and r not in releases]
            notes = sorted({e.note for e in narrowed if e.note})
            on = f" on {_listing(sorted(types))} devices" if narrowed is not found else ""
            self.warn(path, f"{what} {domain}/{name} is published{on} only by {schema.driver} releases "
                            f"{_listing(published)} (not by {_listing(missing)}): "
                            + ("devices of those releases never satisfy the constraint" if what != kind else
                               "on devices of those releases the selector fails with a CEL runtime error")
                            + (f"; {'; '.join(notes)}" if notes else ""))
        return schema, found

    def _reported(self, path: Path) -> bool:
        return any(e.path == path for e in self.findings.denials) or any(
            n.path == path for n in self.findings.notices)

    def _unknown(self, schema: Schema, kind: str, domain: str, name: str, *, qualified: bool) -> str:
        where = (f"no device of {schema.driver} in the inventory ({schema.devices} devices) publishes"
                 if schema.origin == "inventory" else
                 f"no release of {schema.driver} ({_listing(schema.releases) or 'its schema'}) publishes"
                 if domain != STANDARD_DOMAIN or schema.driver != STANDARD_DOMAIN else
                 "Kubernetes defines no standard")
        message = f"{where} {'an attribute' if kind == 'attribute' else 'a capacity'} {domain}/{name}"
        guess = closest(name, schema.names(kind, domain))  # type: ignore[arg-type]
        other = "capacity" if kind == "attribute" else "attribute"
        if guess is not None:
            guess = guess.replace("<N>", "0")
            message += f"; did you mean {domain}/{guess}?" if qualified else f"; did you mean {guess}?"
        elif schema.lookup(other, domain, name):  # type: ignore[arg-type]
            where_ = "device.capacity" if other == "capacity" else "device.attributes"
            message += f"; {name} is a {other}: read it as {where_}[\"{domain}\"].{name}"
        shipped = self.check.registry.get(schema.driver) if schema.origin == "inventory" else None
        if shipped is not None and shipped.lookup(kind, domain, name):  # type: ignore[arg-type]
            message += " (the shipped schema knows it: the inventory's driver release does not publish it)"
        return message

    def selector(self, selector: api.Selector, f: Facts, drivers: list[str],
                 device_types: frozenset[str] = frozenset()) -> None:
        types: dict[Read, str | None] = {}
        for read in dict.fromkeys(f.reads):
            _, found = self.entries(read.kind, read.domain, read.name, drivers, selector.path,
                                    selector.expression, read.kind, device_types, guarded=read.guarded)
            kinds = {e.type for e in found}
            types[read] = kinds.pop() if len(kinds) == 1 else None
        for comparison in f.comparisons:
            self.comparison(selector, comparison, types.get(comparison.read))
        results = [types.get(r) for r in f.result]
        if f.result and all(t is not None and t != "bool" for t in results):
            shown = _listing(dict.fromkeys(f"{r.qualified} is {'an' if t == 'int' else 'a'} {t}"
                                           for r, t in zip(f.result, results, strict=True)))
            self.error(selector.path, selector.expression,
                       f"the selector evaluates to {_listing(dict.fromkeys(results))}, not bool ({shown}): "
                       "kube-apiserver accepts it (attribute values have no static type there), but the scheduler "
                       "fails every device with \"CEL result of type ... could not be converted to bool\"; "
                       "compare the attribute with a value")

    def comparison(self, selector: api.Selector, c: Comparison, attribute_type: str | None) -> None:
        if attribute_type is None or c.literal_type == "quantity":
            return
        literal = _LITERAL_TYPE.get(c.literal_type, c.literal_type)
        if literal == attribute_type or (attribute_type == "int" and c.literal_type in _NUMERIC):
            return
        shown = f"{c.literal_type} {c.literal!r}" if c.literal_type != "null" else "null"
        if c.literal_type == "version":
            shown = f'semver("{c.literal}")'
        head = f"{c.read.qualified} is {'an' if attribute_type == 'int' else 'a'} {attribute_type} attribute"
        if c.op in ("==", "!="):
            outcome = "never true" if c.op == "==" else "always true"
            self.warn(selector.path, f"{head}: compared with {shown} by {c.op} it is {outcome}")
        else:
            self.warn(selector.path, f"{head}: compared with {shown} by {c.op} it fails with a CEL runtime error "
                                     "(no matching overload) on every device")

    def mig(self, chain: list[tuple[api.Selector, Facts]]) -> None:
        nvidia = self.check.registry.get("gpu.nvidia.com")
        if nvidia is None or not nvidia.mig_profiles:
            return
        products = [str(c.literal) for _, f in chain for c in f.comparisons if c.op == "==" and
                    c.read.qualified == "gpu.nvidia.com/productName" and isinstance(c.literal, str)]
        inventory = self.check.observed.get("gpu.nvidia.com") if self.check.observed is not None else None
        for selector, f in chain:
            for c in f.comparisons:
                if c.op != "==" or c.read.qualified != "gpu.nvidia.com/profile" or not isinstance(c.literal, str):
                    continue
                self._profile(selector.path, c.literal, nvidia, products, inventory)

    def _profile(self, path: Path, profile: str, nvidia: Schema, products: list[str],
                 inventory: Schema | None) -> None:
        if profile not in nvidia.all_profiles:
            guess = closest(profile, sorted(nvidia.all_profiles))
            self.warn(path, f"no NVIDIA GPU offers a MIG profile {profile!r}"
                            + (f"; did you mean {guess}?" if guess else ""))
            return
        for product in products:
            offered = nvidia.profiles_for(str(product))
            if offered is not None and profile not in offered:
                self.warn(path, f"{product} does not offer the MIG profile {profile} (it offers {_listing(offered)})")
        if inventory is not None and inventory.products:
            known = {p: o for p in inventory.products if (o := nvidia.profiles_for(p)) is not None}
            if known and all(profile not in o for o in known.values()):
                self.warn(path, f"no GPU of the inventory offers the MIG profile {profile}: " + "; ".join(
                    f"{p} offers {_listing(o)}" for p, o in known.items()))

    def explain(self, *, where: Path, name: str, device_class: str | None, drivers: list[str],
                chain: list[tuple[api.Selector, Facts]]) -> None:
        schemas = []
        for driver in drivers:
            schema = self.check.schema(driver)
            schemas.append({"driver": driver, "schema": None if schema is None else schema.origin,
                            "releases": list(schema.releases) if schema else [],
                            "deviceTypes": list(schema.device_types) if schema else [],
                            "devices": schema.devices if schema and schema.origin == "inventory" else None,
                            "source": schema.source if schema else None})
        reads = dict.fromkeys(r for _, f in chain for r in f.reads)
        self.findings.explain({
            "field": str(where), "request": name, "deviceClassName": device_class, "schemas": schemas,
            "attributes": sorted({r.qualified for r in reads if r.kind == "attribute"}),
            "capacities": sorted({r.qualified for r in reads if r.kind == "capacity"}),
            "inventory": self.check.observed is not None,
        })


def _device_types(chain: list[tuple[api.Selector, Facts]], check: SchemaCheck) -> frozenset[str]:
    """The device types the selectors pin (``type == "mig"``), read only from selectors without a negation:
    ``!(type == "mig")`` must not count as ``mig``. Empty: not pinned."""
    out: set[str] = set()
    for selector, f in chain:
        if "!" in selector.expression:
            continue
        for c in f.comparisons:
            schema = check.registry.get(c.read.domain)
            if schema is not None and c.op == "==" and c.read.name == schema.type_attribute and isinstance(
                    c.literal, str):
                out.add(c.literal)
    return frozenset(out)


def _class_chain(device_class: api.DeviceClass | None) -> list[tuple[api.Selector, Facts]]:
    return _facts(device_class.selectors) if isinstance(device_class, api.DeviceClass) else []


def check_class(model: api.DeviceClass, *, check: SchemaCheck, findings: Findings) -> None:
    checker = _Checker(check, findings)
    chain = _facts(model.selectors)
    drivers = _drivers(chain)
    device_types = _device_types(chain, check)
    for selector, f in chain:
        checker.selector(selector, f, drivers, device_types)
    checker.mig(chain)
    checker.explain(where=Path.root("spec", "selectors"), name=model.name, device_class=None, drivers=drivers,
                    chain=chain)


def check_claim(spec: api.DeviceClaim, *, classes: dict[str, api.DeviceClass | None], check: SchemaCheck,
                findings: Findings) -> None:
    """``classes``: the DeviceClass of each alternative's ``deviceClassName`` when the inventory has it."""
    checker = _Checker(check, findings)
    drivers_of: dict[str, list[str]] = {}
    types_of: dict[str, frozenset[str]] = {}
    for request in spec.requests:
        pinned = []
        for alt in request.alternatives:
            class_chain = _class_chain(classes.get(alt.device_class_name))
            own = _facts(alt.selectors)
            drivers = _drivers(class_chain + own)
            drivers_of[alt.ref] = drivers_of[request.name] = drivers_of.get(request.name, []) + drivers
            device_types = types_of[alt.ref] = _device_types(class_chain + own, check)
            pinned.append(device_types)
            for selector, f in own:
                checker.selector(selector, f, drivers, device_types)
            checker.mig(class_chain + own)
            checker.explain(where=alt.path, name=alt.ref, device_class=alt.device_class_name, drivers=drivers,
                            chain=class_chain + own)
        # a request is pinned to device types only when each of its subrequests is
        types_of[request.name] = frozenset().union(*pinned) if pinned and all(pinned) else frozenset()
    _counts(spec, checker)
    for constraint in spec.constraints:
        _constraint(spec, constraint, drivers_of, types_of, checker)


def _counts(spec: api.DeviceClaim, checker: _Checker) -> None:
    """The allocator's limit: the sum over requests of the (smallest subrequest's) count, at most 32."""
    limit = names.ALLOCATION_RESULTS_MAX_SIZE
    total = 0
    parts = []
    for request in spec.requests:
        counts = [a.count for a in request.alternatives if a.allocation_mode == "ExactCount"]
        smallest = min(counts, default=0)
        total += smallest
        parts.append(f"{request.name}: {smallest}")
        for alt in request.first_available:
            if alt.allocation_mode == "ExactCount" and alt.count > limit and smallest <= limit:
                checker.warn(alt.path.child("count"), f"this subrequest can never be allocated: count {alt.count} "
                                                      f"exceeds the claim limit of {limit}")
    if total <= limit:
        return
    single = [r for r in spec.requests if r.exactly is not None and r.exactly.count > limit]
    if len(single) == 1 and single[0].exactly is not None and single[0].exactly.count == total:
        path = single[0].exactly.path.child("count")
    else:
        path = Path(spec.requests[0].path.steps[:-1])
    checker.error(path, total, f"number of requested devices {total} exceeds the claim limit of {limit} "
                               f"({', '.join(parts)}): "
                               "kube-apiserver accepts the claim, the scheduler's allocator refuses it "
                               "(\"claim <namespace>/<name>: number of requested devices "
                               f"{total} exceeds the claim limit of {limit}\") and the pod stays Pending")


def _constraint(spec: api.DeviceClaim, constraint: api.DeviceConstraint, drivers_of: dict[str, list[str]],
                types_of: dict[str, frozenset[str]], checker: _Checker) -> None:
    for field, name in (("matchAttribute", constraint.match_attribute),
                        ("distinctAttribute", constraint.distinct_attribute)):
        if not name or "/" not in name:
            continue
        domain, _, ident = name.partition("/")
        refs = constraint.requests or tuple(r.name for r in spec.requests)
        drivers = list(dict.fromkeys(d for ref in refs for d in drivers_of.get(ref, [])))
        path = constraint.path.child(field)
        pinned = [types_of.get(ref, frozenset()) for ref in refs]
        device_types = frozenset().union(*pinned) if pinned and all(pinned) else frozenset()
        _, found = checker.entries("attribute", domain, ident, drivers, path, name, "constraint attribute",
                                   device_types)
        if not found:
            continue
        devices = sum(_count(spec, ref) for ref in refs)
        if field == "matchAttribute" and any(e.unique for e in found) and devices > 1:
            checker.warn(path, f"{name} is different on every device: matchAttribute over {devices} devices is "
                               "never satisfied")
        if field == "distinctAttribute" and all(e.type == "bool" for e in found) and devices > 2:
            checker.warn(path, f"{name} is a bool: at most 2 devices can have distinct values, not {devices}")


def _count(spec: api.DeviceClaim, ref: str) -> int:
    base, _, sub = ref.partition("/")
    request = spec.request(base)
    if request is None:
        return 0
    counts = [a.count for a in request.alternatives if not sub or a.name == sub]
    return min(counts, default=0)
