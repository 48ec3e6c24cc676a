"""core/v1 NodeSelector: parsed, validated like the apiserver, and matched like kube-scheduler's nodeaffinity.

Matching: terms are ORed, a term's requirements are ANDed, an empty term matches nothing; ``matchFields``
only knows ``metadata.name``. ``Gt``/``Lt`` compare integers as Go's ``strconv.ParseInt(s, 10, 64)`` reads
them (apimachinery labels/selector.go:269): a node label value it refuses ("5_0", " 7", 20 digits) makes the
requirement false, though Python's ``int()`` would read it.

The apiserver accepts a ``Gt``/``Lt`` requirement whose value is any valid label value
(core/validation ValidateNodeSelectorRequirement), but nodeaffinity.NewNodeSelector refuses one ParseInt cannot
read (labels.NewRequirement, selector.go:210): :meth:`NodeSelector.parse_error` says so, in upstream's words,
and the allocator fails as upstream's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path

from . import names
from ._read import Reader

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
NODE_NAME_FIELD = "metadata.name"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ASCII_DIGITS = frozenset("0123456789")


def parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, or None where it fails: an optional sign then ASCII digits only (no
    ``_``, no spaces, no other Unicode digits), within int64."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not set(digits) <= _ASCII_DIGITS:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = parse_int64(labels[self.key]), parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False

    def matches_name(self, node_name: str) -> bool:
        if self.key != NODE_NAME_FIELD:
            return False
        if self.operator == "In":
            return node_name in self.values
        if self.operator == "NotIn":
            return node_name not in self.values
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, *, labels: Mapping[str, str], name: str) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        return all(req.matches_labels(labels) for req in self.match_expressions) and all(
            req.matches_name(name) for req in self.match_fields
        )


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, *, labels: Mapping[str, str], name: str) -> bool:
        """Whether a node with these labels and this name is selected (terms ORed)."""
        return any(term.matches(labels=labels, name=name) for term in self.terms)

    def parse_error(self) -> str | None:
        """What nodeaffinity.NewNodeSelector reports for a selector the apiserver accepted: a ``Gt``/``Lt`` value
        ParseInt cannot read. None when it parses."""
        for i, term in enumerate(self.terms):
            for j, req in enumerate(term.match_expressions):
                if req.operator in ("Gt", "Lt"):
                    for k, value in enumerate(req.values):
                        if parse_int64(value) is None:
                            return (f"nodeSelectorTerms[{i}].matchExpressions[{j}].values[{k}]: Invalid value: "
                                    f"\"{value}\": for 'Gt', 'Lt' operators, the value must be an integer")  # fmt: skip
        return None


def node_selector_matches(selector: NodeSelector, *, labels: Mapping[str, str], name: str) -> bool:
    return selector.matches(labels=labels, name=name)


_SELECTOR_FIELDS = frozenset({"nodeSelectorTerms"})
_TERM_FIELDS = frozenset({"matchExpressions", "matchFields"})
_REQ_FIELDS = frozenset({"key", "operator", "values"})


def parse_node_selector(value: object, path: Path, r: Reader) -> NodeSelector | None:
    """Parse and validate (``corevalidation.ValidateNodeSelector``) a NodeSelector at ``path``."""
    if not isinstance(value, Mapping):
        r.wrong_type(path, value, "an object")
        return None
    r.unknown_fields(value, _SELECTOR_FIELDS, path)
    raw_terms = r.seq(value, "nodeSelectorTerms", path)
    if not raw_terms:
        r.add(FieldError.required(path.child("nodeSelectorTerms"), "must have at least one node selector term"))
    terms = []
    for i, raw in enumerate(raw_terms):
        tpath = path.child("nodeSelectorTerms").index(i)
        if not isinstance(raw, Mapping):
            r.wrong_type(tpath, raw, "an object")
            continue
        r.unknown_fields(raw, _TERM_FIELDS, tpath)
        exprs = _requirements(raw, "matchExpressions", tpath, r, fields=False)
        fields = _requirements(raw, "matchFields", tpath, r, fields=True)
        terms.append(NodeSelectorTerm(match_expressions=exprs, match_fields=fields))
    return NodeSelector(terms=tuple(terms))


def _requirements(
    term: Mapping[str, Any], key: str, tpath: Path, r: Reader, *, fields: bool
) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for rpath, raw in r.each_object(term, key, tpath):
        r.unknown_fields(raw, _REQ_FIELDS, rpath)
        req_key = r.string(raw, "key", rpath, required=True) or ""
        op = r.string(raw, "operator", rpath, required=True) or ""
        values = r.strings(raw, "values", rpath)
        if fields:
            _check_field_requirement(req_key, op, values, rpath, r)
        else:
            _check_label_requirement(req_key, op, values, rpath, r)
        out.append(NodeSelectorRequirement(key=req_key, operator=op, values=values))
    return tuple(out)


def _check_label_requirement(key: str, op: str, values: tuple[str, ...], rpath: Path, r: Reader) -> None:
    if key:
        r.check(rpath.child("key"), key, names.check_label_key)
    if op in ("In", "NotIn"):
        if not values:
            r.add(FieldError.required(rpath.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            r.add(
                FieldError.forbidden(
                    rpath.child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
    elif op in ("Gt", "Lt"):
        # no integer check: the apiserver has none (a value ParseInt refuses fails at scheduling, see parse_error)
        if len(values) != 1:
            r.add(
                FieldError.required(
                    rpath.child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            )
    elif op:
        r.add(FieldError.not_supported(rpath.child("operator"), op, OPERATORS))
    for k, value in enumerate(values):  # allowInvalidLabelValueInRequiredNodeAffinity is false for DRA objects
        r.check(rpath.child("values").index(k), value, names.check_label_value)


def _check_field_requirement(key: str, op: str, values: tuple[str, ...], rpath: Path, r: Reader) -> None:
    if key and key != NODE_NAME_FIELD:
        r.add(FieldError.not_supported(rpath.child("key"), key, [NODE_NAME_FIELD]))
    if op and op not in FIELD_OPERATORS:
        r.add(FieldError.not_supported(rpath.child("operator"), op, FIELD_OPERATORS))
    elif op and len(values) != 1:
        r.add(
            FieldError.required(
                rpath.child("values"),
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )

