"""Dry-run selectors against the devices the cluster publishes, as the scheduler's allocator would see them.

Per request alternative: the devices its class admits and its selectors select (class selectors first,
stopping at the first false or error, like the allocator). Findings:

- a request selector raising a CEL runtime error on a device its class admits (``validation.runtimeError``,
  deny by default): the scheduler would abort scheduling of the pod on it, again and again;
- no device matches; no single node offers ``count`` matching devices; a ``matchAttribute`` that none of
  the matching devices has (``validation.noMatch``, warn by default).

The per-device work is done once per (selector chain, slice) by :mod:`.segments` (identical slices share it);
everything here sums per-slice summaries, so after a slice change only that slice's devices cost anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from gpuclaim.dra import api, cel
from gpuclaim.dra.fieldpath import Path

from . import messages
from .inventory import DeviceIndex
from .segments import ALL_NODES, MATCHED, Scope, SliceSummary
from .verdict import Findings

__all__ = ["Modes", "Result", "check_class", "match_alternative", "report_alternative"]

@dataclass(frozen=True, slots=True)
class Modes:
    runtime_error: str  # deny | warn
    no_match: str  # warn | deny


@dataclass(slots=True)
class _ErrorGroup:
    count: int
    example: api.Device
    message: str


@dataclass(slots=True)
class Result:
    """One selector chain over the index, summed from the per-slice summaries (identical slices share one).

    When the index is its parent with a few slices updated in place (the live inventory after device health
    updates), the sums start from the parent's result for the same chain and redo only those slices.
    """

    index: DeviceIndex
    chain: Sequence[cel.CompiledSelector]
    summaries: list[SliceSummary]  # per segment of the index
    n_class: int  # how many selectors of the chain come from the class
    matched: int = 0
    rejected: Counter[int] = field(default_factory=Counter)  # selector index -> devices it said false on
    errors: dict[int, _ErrorGroup] = field(default_factory=dict)  # selector index -> runtime errors
    _per_node: dict[Scope, int] | None = None  # matching devices per named scope, every scope in index order
    _everywhere: int = 0  # matching devices usable on all nodes
    _best: tuple[int, str] | None = None

    @classmethod
    def run(cls, index: DeviceIndex, chain: Sequence[cel.CompiledSelector], n_class: int) -> Result:
        """The summary for this chain, computed once per index (compiled selectors are cached objects)."""
        key = (n_class, *chain)
        parent = index.parent.memo.get(key) if index.parent is not None else None
        if parent is not None:
            result: Result = index.remember(key, lambda: parent._patched(index))
        else:
            result = index.remember(key, lambda: cls._run(index, tuple(chain), n_class))
        return result

    @classmethod
    def _run(cls, index: DeviceIndex, chain: tuple[cel.CompiledSelector, ...], n_class: int) -> Result:
        summaries = index.summaries.summarise(index.segments, chain)
        result = cls(index, chain, summaries, n_class)
        for summary, count in Counter(summaries).items():  # by identity: a fleet has a few distinct summaries
            result._add(summary, count)
        if result.errors:
            _first_examples(result)
        return result

    def _patched(self, index: DeviceIndex) -> Result:
        """This result (over ``index.parent``) moved to ``index``: only the patched segments are summarised."""
        parent = self.index
        chain = tuple(self.chain)
        summaries = list(self.summaries)
        fresh = index.summaries.summarise([index.segments[n] for n in index.patched], chain)
        result = Result(index, chain, summaries, self.n_class, self.matched, Counter(self.rejected),
                        {k: _ErrorGroup(g.count, g.example, g.message) for k, g in self.errors.items()})
        same_scopes = self._per_node is not None
        for n, summary in zip(index.patched, fresh, strict=True):
            result._add(summaries[n], -1)
            result._add(summary, 1)
            summaries[n] = summary
            old_scope, new_scope = parent.segments[n].scope, index.segments[n].scope
            same_scopes = same_scopes and old_scope is not None and old_scope == new_scope
        result.rejected = +result.rejected  # drops the selectors that reject nothing any more
        result.errors = {k: g for k, g in result.errors.items() if g.count > 0}
        if result.errors:
            _first_examples(result)
        if same_scopes and self._per_node is not None:
            per_node, everywhere = dict(self._per_node), self._everywhere
            for n in index.patched:
                delta = summaries[n].matched - self.summaries[n].matched
                scope = index.segments[n].scope
                if scope == (ALL_NODES, False):
                    everywhere += delta
                else:
                    per_node[scope] += delta  # type: ignore[index]
            result._per_node, result._everywhere = per_node, everywhere
        return result

    def _add(self, summary: SliceSummary, weight: int) -> None:
        self.matched += summary.matched * weight
        for selector_index, rejected in summary.rejected:
            self.rejected[selector_index] += rejected * weight
        for selector_index, failed, _, _ in summary.errors:
            group = self.errors.get(selector_index)
            if group is None:
                self.errors[selector_index] = _ErrorGroup(failed * weight, _NO_DEVICE, "")
            else:
                group.count += failed * weight

    def matching_devices(self) -> list[api.Device]:
        return [d for segment, summary in zip(self.index.segments, self.summaries, strict=True) if summary.matched
                for d, stop in zip(segment.devices, summary.stops, strict=True) if stop == MATCHED]

    def admitted_by_class(self) -> list[api.Device]:
        """Devices every class selector accepted (whatever the request's selectors said)."""
        n = self.n_class
        return [d for segment, summary in zip(self.index.segments, self.summaries, strict=True)
                for d, stop in zip(segment.devices, summary.stops, strict=True) if stop == MATCHED or stop >= n]

    def best_node(self) -> tuple[int, str]:
        """The most matching devices usable on one node (the first such node in index order), and where."""
        if self._best is None:
            if self._per_node is None:
                self._count_per_node()
            assert self._per_node is not None
            self._best = self._everywhere, ALL_NODES
            if self._per_node:
                (name, _), most = max(self._per_node.items(), key=itemgetter(1))
                if most > 0:
                    self._best = most + self._everywhere, name
        return self._best

    def _count_per_node(self) -> None:
        per_node: dict[Scope, int] = {}
        for segment, summary in zip(self.index.segments, self.summaries, strict=True):
            if segment.scope is not None:
                per_node[segment.scope] = per_node.get(segment.scope, 0) + summary.matched
            else:
                for scope, stop in zip(segment.scopes, summary.stops, strict=True):
                    per_node[scope] = per_node.get(scope, 0) + (stop == MATCHED)
        self._everywhere = per_node.pop((ALL_NODES, False), 0)
        self._per_node = per_node


def _first_examples(result: Result) -> None:
    """Each error group's example and message: the first failing device in index order, as the allocator
    would meet it."""
    missing = set(result.errors)
    for segment, summary in zip(result.index.segments, result.summaries, strict=True):
        for selector_index, _, first, message in summary.errors:
            if selector_index in missing:
                group = result.errors[selector_index]
                group.example, group.message = segment.devices[first], message
                missing.discard(selector_index)
        if not missing:
            return


_NO_DEVICE = api.Device(name="", driver="", pool="", attributes={}, capacity={})


def match_alternative(
    index: DeviceIndex, class_selectors: Sequence[cel.CompiledSelector],
    request_selectors: Sequence[cel.CompiledSelector],
) -> Result:
    return Result.run(index, [*class_selectors, *request_selectors], len(class_selectors))


def report_alternative(
    alt: api.ExactRequest, device_class: api.DeviceClass, result: Result, *, modes: Modes, findings: Findings,
    report_no_match: bool,
) -> None:
    """Runtime errors and the count check for one ``exactly`` or subrequest; no-match when asked to."""
    n_class = result.n_class
    total = len(result.index)
    for selector_index, group in sorted(result.errors.items()):
        device = group.example
        if selector_index < n_class:
            findings.warn(
                alt.path.child("deviceClassName"),
                f"selector #{selector_index} of DeviceClass {device_class.name} raises a CEL runtime error on "
                f"{messages.plural(group.count, 'device')}, e.g. {device.id}: {group.message}; the scheduler aborts "
                "scheduling of pods using this class on them: fix the class",
            )
            continue
        j = selector_index - n_class
        selector = alt.selectors[j]
        hint = messages.guard_hint(group.message, result.chain[selector_index])
        findings.report(
            modes.runtime_error, selector.path, selector.expression,
            f"CEL runtime error on {messages.plural(group.count, 'device')} that DeviceClass {device_class.name} "
            f"admits, e.g. {device.id}: {group.message}; kube-scheduler aborts scheduling of the pod when it "
            f"meets such a device (and retries forever); {hint}",
        )
    if result.matched == 0:
        if report_no_match and not any(k >= n_class for k in result.errors):
            findings.report(modes.no_match, alt.path, alt.name, no_match_message(alt, device_class, result, total))
        return
    if alt.allocation_mode == "ExactCount" and alt.count > 1:
        best, where = result.best_node()
        if best < alt.count:
            findings.report(
                modes.no_match, alt.path.child("count"), alt.count,
                f"no single node offers {alt.count} matching devices: {result.matched} match in the cluster, at most "
                f"{best} usable on one node ({where}); all devices of a claim must be usable on the pod's node",
            )


def no_match_message(alt: api.ExactRequest, device_class: api.DeviceClass, result: Result, total: int) -> str:
    admitted = result.admitted_by_class()
    if not admitted:
        drivers = Counter(d.driver for d in result.index.devices)
        offered = ", ".join(f"{d} ({messages.plural(n, 'device')})" for d, n in drivers.most_common(5))
        return (f"no device matches: DeviceClass {device_class.name} admits none of the "
                f"{messages.plural(total, 'device')} in the cluster (drivers: {offered})")
    n_class = result.n_class
    worst = max(result.rejected, key=lambda k: (result.rejected[k], -k), default=None)
    text = (f"no device matches: DeviceClass {device_class.name} admits {messages.plural(len(admitted), 'device')} "
            f"of {total}")
    if worst is None or worst < n_class:
        return text + ", none of them passes the request's selectors"
    selector = result.chain[worst]
    text += f", selectors[{worst - n_class}] rejects {result.rejected[worst]} of them"
    offers = messages.describe_offers(admitted, selector)
    if offers:
        text += f"; they offer {offers}"
    for note in messages.quantity_traps(admitted, selector):
        text += f"; {note}"
    return text


def check_constraints(
    spec: api.DeviceClaim, matched: dict[str, list[api.Device]], *, modes: Modes, findings: Findings
) -> None:
    """``matchAttribute`` naming an attribute that none of the devices matching its requests has."""
    for constraint in spec.constraints:
        attribute = constraint.match_attribute
        if attribute is None:
            continue
        refs = constraint.requests or tuple(r.name for r in spec.requests)
        devices: list[api.Device] = []
        names: list[str] = []
        for ref in refs:
            for key, found in matched.items():
                if key == ref or key.startswith(ref + "/"):
                    devices.extend(found)
                    names.append(key)
        if not names or len(names) < len(refs) or not devices:
            continue  # some request was not dry-run (unknown class, no match already reported)
        if not any(attribute in d.attributes for d in devices):
            findings.report(
                modes.no_match, constraint.path.child("matchAttribute"), attribute,
                f"none of the {messages.plural(len(devices), 'device')} matching {', '.join(names)} has attribute "
                f"{attribute}, so the constraint can never be met",
            )


def check_class(
    device_class: api.DeviceClass, compiled: Sequence[cel.CompiledSelector], index: DeviceIndex, *,
    modes: Modes, findings: Findings,
) -> None:
    """A DeviceClass's own selectors over every device: runtime errors and no match at all."""
    if not compiled or not len(index):
        return
    result = Result.run(index, compiled, 0)
    for k, group in sorted(result.errors.items()):
        selector = device_class.selectors[k]
        device = group.example
        hint = messages.guard_hint(group.message, compiled[k])
        findings.report(
            modes.runtime_error, selector.path, selector.expression,
            f"CEL runtime error on {messages.plural(group.count, 'device')}, e.g. {device.id}: {group.message}; "
            f"kube-scheduler aborts scheduling of every pod using this class when it meets such a device; {hint}",
        )
    if result.matched == 0 and not result.errors:
        worst = max(result.rejected, key=lambda k: (result.rejected[k], -k), default=0)
        text = (f"no device matches this class: selectors[{worst}] rejects {result.rejected[worst]} of the "
                f"{messages.plural(len(index), 'device')} in the cluster")
        offers = messages.describe_offers(index.devices, compiled[worst])
        if offers:
            text += f"; they offer {offers}"
        for note in messages.quantity_traps(index.devices, compiled[worst]):
            text += f"; {note}"
        findings.report(modes.no_match, Path.root("spec", "selectors"), device_class.name, text)
