"""GPU feature discovery node labels in `nodeSelector` / required node affinity → guarded device selectors.

A pod pinned with `nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB` picked a *node*; under DRA the claim
picks the *device*, so the same wish is written into the converted NVIDIA requests. Supported labels:

- `nvidia.com/gpu.product` → `productName`. GFD replaces spaces by `-` and may append `-SHARED` or
  `-MIG-<profile>`: both are stripped, and the device's name is compared with its spaces replaced.
- `nvidia.com/gpu.memory` → capacity `memory`, full GPUs only (a MIG device's memory is its slice's).
  GFD gives MiB; equality matches within ±1 % (GFD and the DRA driver may round differently, e.g.
  vGPU profiles); `Gt`/`Lt` compare strictly in MiB. Always `compareTo` (quantities have no `<`).
- `nvidia.com/gpu.family` → `architecture`, case-insensitive.
- `nvidia.com/gpu.compute.major` / `.minor` → `cudaComputeCapability.major()` / `.minor()`.

Every expression is guarded (`'<name>' in device.attributes[...]`), because a missing attribute is a
scheduling error, not a mismatch. Operators In, NotIn, Gt, Lt map as in node affinity; Exists adds
nothing (every GPU has these); DoesNotExist cannot be expressed on a device and is left to the node
selector (with a warning). nodeSelector keys and affinity requirements are ANDed, affinity terms ORed.
With `gfdMigration.keepNodeSelector: false` the migrated keys are removed from `nodeSelector` and from the
affinity terms (a term left empty means any node, so the required affinity then goes).

A selector is at most 10 KiB (kube-apiserver's limit): where the nodeSelector value or the required affinity
would make a longer one (about 170 product names or more), that part is not migrated. It stays a node constraint
only, even with keepNodeSelector off, which is what it was under the device plugin; a warning says so. (Issue 22,
item 2: the template with the long selector was refused by the apiserver, and the pod admitted unconverted.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuclaim.dra.api import names
from gpuclaim.dra.celtext import int_literal, string_literal
from gpuclaim.dra.config import GfdMigrationConfig
from gpuclaim.dra.fieldpath import FieldError, Path

from . import patch

DOMAIN = "gpu.nvidia.com"
MEMORY_TOLERANCE_PERCENT = 1
# GFD writes these labels as decimal integers (MiB, compute capability parts); a label value is at most 63
# characters, and anything above int64 can be no GPU's: such a value is refused with a field error instead of
# reaching float math or CEL (issue 14, finding 8: a 400-digit memory value raised OverflowError)
MAX_DIGITS = 18
_A = f"device.attributes['{DOMAIN}']"
_C = f"device.capacity['{DOMAIN}']"


_lit = string_literal  # the one escaping function for CEL literals
MAX_SELECTOR_BYTES = names.CEL_SELECTOR_EXPRESSION_MAX_LENGTH


def _too_big(expressions: list[str]) -> int | None:
    """The size of the longest expression when one is past the apiserver's limit, else None."""
    longest = max((len(e.encode("utf-8", "surrogatepass")) for e in expressions), default=0)
    return longest if longest > MAX_SELECTOR_BYTES else None


def _stays_node_constraint(where: str, size: int) -> str:
    return (f"gpuclaim did not turn {where} into a device selector: it would be {size} bytes, more than the "
            f"{MAX_SELECTOR_BYTES} a CEL selector may hold; it stays a node constraint only (as under the device "
            "plugin: any GPU of the chosen node)")


def _product(value: str) -> str:
    if value.endswith("-SHARED"):
        value = value[: -len("-SHARED")]
    return value.partition("-MIG-")[0]


@dataclass(frozen=True, slots=True)
class _Label:
    guard: str
    #: (operator, values) → the unguarded condition, or None when the values do not fit
    condition: Callable[[str, list[str]], str | None]
    full_gpu_only: bool = False
    #: the values are decimal integers (bounded by MAX_DIGITS)
    numeric: bool = False


def _in_list(expr: str, values: list[str]) -> str:
    return f"{expr} == {_lit(values[0])}" if len(values) == 1 else f"{expr} in [{', '.join(map(_lit, values))}]"


def _string_label(expr: str, normalize: Callable[[str], str] = str) -> Callable[[str, list[str]], str | None]:
    def condition(operator: str, values: list[str]) -> str | None:
        wanted = list(dict.fromkeys(normalize(v) for v in values))
        if operator in ("In", "NotIn") and wanted:
            test = _in_list(expr, wanted)
            return test if operator == "In" else f"!({test})"
        return None
    return condition


def _ints(values: list[str]) -> list[int] | None:
    try:
        return [int(v) for v in values]
    except ValueError:
        return None


def _memory(operator: str, values: list[str]) -> str | None:
    numbers = _ints(values)
    if not numbers or any(n < 0 for n in numbers):
        return None
    mem = f"{_C}.memory"
    if operator in ("Gt", "Lt") and len(numbers) == 1:
        return f"{mem}.compareTo(quantity({_lit(f'{numbers[0]}Mi')})) {'>' if operator == 'Gt' else '<'} 0"
    if operator in ("In", "NotIn"):
        # integer arithmetic: floor(n * 0.99) and ceil(n * 1.01) without floats (exact for any size)
        low = [n * (100 - MEMORY_TOLERANCE_PERCENT) // 100 for n in dict.fromkeys(numbers)]
        high = [-(-n * (100 + MEMORY_TOLERANCE_PERCENT) // 100) for n in dict.fromkeys(numbers)]
        windows = [f"({mem}.compareTo(quantity({_lit(f'{lo}Mi')})) >= 0 && "
                   f"{mem}.compareTo(quantity({_lit(f'{hi}Mi')})) <= 0)"
                   for lo, hi in zip(low, high, strict=True)]
        test = " || ".join(windows) if len(windows) > 1 else windows[0][1:-1]
        return test if operator == "In" else f"!({test})"
    return None


def _version_part(part: str) -> Callable[[str, list[str]], str | None]:
    expr = f"{_A}.cudaComputeCapability.{part}()"

    def condition(operator: str, values: list[str]) -> str | None:
        numbers = _ints(values)
        if not numbers:
            return None
        if operator in ("Gt", "Lt") and len(numbers) == 1:
            return f"{expr} {'>' if operator == 'Gt' else '<'} {int_literal(numbers[0])}"
        if operator in ("In", "NotIn"):
            test = f"{expr} in [{', '.join(int_literal(n) for n in dict.fromkeys(numbers))}]"
            return test if operator == "In" else f"!({test})"
        return None
    return condition


LABELS: dict[str, _Label] = {
    "nvidia.com/gpu.product": _Label(f"'productName' in {_A}",
                                     _string_label(f"{_A}.productName.replace(' ', '-')", _product)),
    "nvidia.com/gpu.memory": _Label(f"'memory' in {_C}", _memory, full_gpu_only=True, numeric=True),
    "nvidia.com/gpu.family": _Label(f"'architecture' in {_A}",
                                    _string_label(f"{_A}.architecture.lowerAscii()", str.lower)),
    "nvidia.com/gpu.compute.major": _Label(f"'cudaComputeCapability' in {_A}", _version_part("major"), numeric=True),
    "nvidia.com/gpu.compute.minor": _Label(f"'cudaComputeCapability' in {_A}", _version_part("minor"), numeric=True),
}


@dataclass(slots=True)
class Migration:
    full_gpu: list[str] = field(default_factory=list)  # selectors for whole-GPU requests
    mig: list[str] = field(default_factory=list)  # selectors for MIG requests
    ops: list[patch.Op] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    refusals: list[FieldError] = field(default_factory=list)


def _too_long(key: str, values: list[tuple[Path, str]], out: Migration) -> bool:
    """Refuse integer values beyond MAX_DIGITS, naming the value's field; True when any was refused."""
    bad = [(path, value) for path, value in values if len(value.strip().lstrip("+-")) > MAX_DIGITS]
    for path, value in bad:
        shown = value if len(value) <= 40 else f"{value[:20]}...({len(value)} characters)"
        out.refusals.append(FieldError.invalid(path, shown, f"{key} is a whole number (GPU feature discovery "
                                               f"labels); gpuclaim takes at most {MAX_DIGITS} digits"))
    return bool(bad)


def _requirement(key: str, operator: str, values: list[str], where: str, out: Migration,
                 paths: list[Path] | None = None) -> tuple[str, bool] | None:
    """(guarded expression or "" for 'no condition', full-GPU only) or None when not migrated."""
    label = LABELS[key]
    if label.numeric and paths is not None and _too_long(key, list(zip(paths, values, strict=True)), out):
        return None
    if operator == "Exists":
        return "", label.full_gpu_only
    condition = label.condition(operator, values) if operator != "DoesNotExist" else None
    if condition is None:
        out.warnings.append(f"gpuclaim could not turn {where} ({key} {operator} {values}) into a device selector; "
                            "it stays a node constraint only")
        return None
    if operator == "NotIn":  # like node affinity, a device without the attribute satisfies NotIn
        return f"!({label.guard}) || {condition}", label.full_gpu_only
    return f"{label.guard} && {condition}", label.full_gpu_only


def migrate(spec: Mapping[str, Any], config: GfdMigrationConfig) -> Migration:
    out = Migration()
    if not config.enabled:
        return out
    keys = [k for k in config.labels if k in LABELS]
    if not keys:
        return out
    node_selector = spec.get("nodeSelector")
    dropped: list[str] = []
    if isinstance(node_selector, Mapping):
        for key in keys:
            value = node_selector.get(key)
            if not isinstance(value, str):
                continue
            got = _requirement(key, "In", [value], f"spec.nodeSelector[{key}]", out,
                               [Path.root("spec", "nodeSelector").key(key)])
            if got is None:
                continue
            expr, full_only = got
            size = _too_big([expr])
            if size is not None:
                out.warnings.append(_stays_node_constraint(f"spec.nodeSelector[{key}]", size))
                continue
            if expr:
                out.full_gpu.append(expr)
                if not full_only:
                    out.mig.append(expr)
            dropped.append(key)
    _affinity(spec, keys, config, out)
    if dropped and not config.keep_node_selector:
        assert isinstance(node_selector, Mapping)
        if len(dropped) == len(node_selector):
            out.ops.append(patch.remove("/spec/nodeSelector"))
        else:
            out.ops.extend(patch.remove(patch.pointer("spec", "nodeSelector", k)) for k in dropped)
    return out


def _terms(spec: Mapping[str, Any]) -> list[Any] | None:
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
                if isinstance(node_affinity, Mapping) else None)
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    return terms if isinstance(terms, list) and terms else None


def _affinity(spec: Mapping[str, Any], keys: list[str], config: GfdMigrationConfig, out: Migration) -> None:
    terms = _terms(spec)
    if terms is None:
        return
    full_terms: list[list[str]] = []
    mig_terms: list[list[str]] = []
    new_terms: list[Any] = []
    changed = False
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    for t, term in enumerate(terms):
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        full: list[str] = []
        mig: list[str] = []
        kept: list[Any] = []
        for e, requirement in enumerate(expressions if isinstance(expressions, list) else ()):
            key = requirement.get("key") if isinstance(requirement, Mapping) else None
            if key not in keys:
                kept.append(requirement)
                continue
            raw = requirement.get("values")
            at = Path.root("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                           "nodeSelectorTerms").index(t).child("matchExpressions").index(e).child("values")
            pairs = [(at.index(i), v) for i, v in enumerate(raw if isinstance(raw, list) else ()) if isinstance(v, str)]
            values = [v for _, v in pairs]
            got = _requirement(key, str(requirement.get("operator")), values,
                               f"{base}[{t}].matchExpressions[{e}]", out, [p for p, _ in pairs])
            if got is None:
                kept.append(requirement)
                continue
            expr, full_only = got
            if expr:
                full.append(expr)
                if not full_only:
                    mig.append(expr)
        full_terms.append(full)
        mig_terms.append(mig)
        if isinstance(term, Mapping) and isinstance(expressions, list) and len(kept) != len(expressions):
            changed = True
            new_term = {k: v for k, v in term.items() if k != "matchExpressions"}
            if kept:
                new_term["matchExpressions"] = kept
            new_terms.append(new_term)
        else:
            new_terms.append(term)
    full, mig = _any_of(full_terms), _any_of(mig_terms)
    size = _too_big([*full, *mig])
    if size is not None:  # nothing of the affinity is migrated: its terms stay as they are
        out.warnings.append(_stays_node_constraint(base, size))
        return
    out.full_gpu.extend(full)
    out.mig.extend(mig)
    if changed and not config.keep_node_selector:
        path = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
        if any(not t for t in new_terms):  # an empty term: that alternative now allows every node
            out.ops.append(patch.remove(path))
        else:
            out.ops.append(patch.replace(path + "/nodeSelectorTerms", new_terms))


def _any_of(terms: list[list[str]]) -> list[str]:
    if not terms or any(not t for t in terms):  # one alternative without a device condition: no constraint
        return []
    if len(terms) == 1:
        return terms[0]
    return [" || ".join("(" + " && ".join(f"({c})" for c in t) + ")" for t in terms)]
