"""NodeSelector matching as kube-scheduler's nodeaffinity does it, and its validation."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import paths

from gpuclaim.dra import api
from gpuclaim.dra.api._read import Reader
from gpuclaim.dra.api.nodeselector import parse_node_selector
from gpuclaim.dra.fieldpath import Path


def selector(*terms: dict[str, Any]) -> api.NodeSelector:
    r = Reader()
    parsed = parse_node_selector({"nodeSelectorTerms": list(terms)}, Path.root("nodeSelector"), r)
    assert r.errors == [] and parsed is not None
    return parsed


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


LABELS = {"zone": "z1", "gpus": "8", "nvidia.com/gpu.product": "H100"}

MATCH_CASES = [
    ("in", expr("zone", "In", "z1", "z2"), True),
    ("in-miss", expr("zone", "In", "z3"), False),
    ("in-absent", expr("rack", "In", "r1"), False),
    ("notin", expr("zone", "NotIn", "z2"), True),
    ("notin-absent-label-matches", expr("rack", "NotIn", "r1"), True),
    ("exists", expr("nvidia.com/gpu.product", "Exists"), True),
    ("doesnotexist", expr("rack", "DoesNotExist"), True),
    ("gt", expr("gpus", "Gt", "4"), True),
    ("gt-equal", expr("gpus", "Gt", "8"), False),
    ("lt", expr("gpus", "Lt", "9"), True),
    ("gt-non-integer-label", expr("zone", "Gt", "1"), False),
    ("field-name-in", {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}, True),
    ("field-name-notin", {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}]}, False),
    ("empty-term-matches-nothing", {}, False),
    (
        "expressions-are-anded",
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["z1"]},
                {"key": "rack", "operator": "Exists"},
            ]
        },
        False,
    ),
]


@pytest.mark.parametrize(("term", "expected"), [c[1:] for c in MATCH_CASES], ids=[c[0] for c in MATCH_CASES])
def test_one_term_matches_like_kube_scheduler(term: dict[str, Any], expected: bool) -> None:
    if not term:
        sel = api.NodeSelector(terms=(api.NodeSelectorTerm(),))
    else:
        sel = selector(term)
    assert sel.matches(labels=LABELS, name="node-a") is expected
    assert api.node_selector_matches(sel, labels=LABELS, name="node-a") is expected


def test_terms_are_ored() -> None:
    sel = selector(expr("zone", "In", "nope"), expr("gpus", "Gt", "1"))
    assert sel.matches(labels=LABELS, name="n")
    assert not selector(expr("zone", "In", "nope")).matches(labels=LABELS, name="n")


INVALID = [
    ("no-terms", {"nodeSelectorTerms": []}, [("nodeSelector.nodeSelectorTerms", "FieldValueRequired")]),
    (
        "in-without-values",
        {"nodeSelectorTerms": [expr("zone", "In")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values", "FieldValueRequired")],
    ),
    (
        "exists-with-values",
        {"nodeSelectorTerms": [expr("zone", "Exists", "x")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values", "FieldValueForbidden")],
    ),
    (
        "gt-two-values",
        {"nodeSelectorTerms": [expr("gpus", "Gt", "1", "2")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values", "FieldValueRequired")],
    ),
    (
        "bad-operator",
        {"nodeSelectorTerms": [expr("zone", "Near", "x")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator", "FieldValueNotSupported")],
    ),
    (
        "bad-field-key",
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}]},
        [("nodeSelector.nodeSelectorTerms[0].matchFields[0].key", "FieldValueNotSupported")],
    ),
    ("not-an-object", [], [("nodeSelector", "FieldValueInvalid")]),
    (
        "gt-value-not-a-label-value",
        {"nodeSelectorTerms": [expr("gpus", "Gt", "-5")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]", "FieldValueInvalid")],
    ),
    (
        "in-value-not-a-label-value",
        {"nodeSelectorTerms": [expr("zone", "In", "z1", "a b")]},
        [("nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[1]", "FieldValueInvalid")],
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_node_selectors_are_reported(raw: Any, expected: list[tuple[str, str]]) -> None:
    r = Reader()
    parse_node_selector(raw, Path.root("nodeSelector"), r)
    assert paths(r.errors) == expected


@pytest.mark.parametrize(("label", "expected"), [("5", True), ("007", True), ("9223372036854775807", True),
                                                 ("5_0", False), ("5.0", False), ("99999999999999999999", False),
                                                 ("abc", False)])  # fmt: skip
def test_gt_reads_label_values_as_go_parse_int_does(label: str, expected: bool) -> None:
    """apimachinery labels/selector.go:269: a value strconv.ParseInt(s, 10, 64) refuses makes Gt/Lt false."""
    assert selector(expr("rank", "Gt", "4")).matches(labels={"rank": label}, name="n") is expected


def test_a_gt_value_parse_int_refuses_is_valid_but_does_not_parse() -> None:
    """The apiserver checks only that it is a label value; nodeaffinity.NewNodeSelector then refuses it."""
    sel = selector(expr("rank", "Gt", "5_0"))
    assert sel.parse_error() == ("nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"5_0\": "
                                 "for 'Gt', 'Lt' operators, the value must be an integer")  # fmt: skip
    assert selector(expr("rank", "Gt", "4")).parse_error() is None
