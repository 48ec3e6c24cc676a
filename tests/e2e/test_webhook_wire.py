"""The chain's pure parts: label selectors against an independent implementation (the double's own selector
syntax parser), rule matching of resources and subresources, and the Status of a denial."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.double.apiserver import selectors
from gpuclaim.double.apiserver import webhook_wire as wire
from gpuclaim.double.apiserver.resources import BY_KEY

KEYS = st.sampled_from(["app", "tier", "gpuclaim.io/webhook", "kubernetes.io/metadata.name"])
VALUES = st.sampled_from(["a", "b", "disabled", "kube-system"])
REQUIREMENT = st.one_of(
    st.tuples(KEYS, st.sampled_from(["In", "NotIn"]), st.lists(VALUES, min_size=1, max_size=3, unique=True)),
    st.tuples(KEYS, st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
)


def as_text(selector: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in selector.get("matchLabels", {}).items()]
    for req in selector.get("matchExpressions", []):
        key, op, values = req["key"], req["operator"], req.get("values", [])
        parts.append({"In": f"{key} in ({','.join(values)})", "NotIn": f"{key} notin ({','.join(values)})",
                      "Exists": key, "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


@given(st.dictionaries(KEYS, VALUES, max_size=2), st.lists(REQUIREMENT, max_size=3),
       st.dictionaries(KEYS, VALUES, max_size=4))
@settings(max_examples=400, deadline=None)
def test_label_selector_agrees_with_the_string_syntax_matcher(match_labels: dict[str, str], reqs: list[Any],
                                                              labels: dict[str, str]) -> None:
    selector: dict[str, Any] = {"matchLabels": match_labels,
                                "matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in reqs]}
    assert wire.selector_matches(selector, labels) == selectors.parse_label_selector(as_text(selector))(labels)


PODS, CLAIMS = BY_KEY["/v1/pods"], BY_KEY["resource.k8s.io/v1/resourceclaims"]


@pytest.mark.parametrize(("resources", "rt", "sub", "expected"), [
    (["pods"], PODS, None, True),
    (["pods"], PODS, "status", False),
    (["pods/status"], PODS, "status", True),
    (["*"], PODS, "status", False),
    (["*/status"], PODS, "status", True),
    (["pods/*"], PODS, "status", True),
    (["pods/*"], PODS, None, False),
    (["*/*"], CLAIMS, "status", True),
    (["resourceclaims"], PODS, None, False),
], ids=["main", "main-not-sub", "sub", "star-not-sub", "star-sub", "resource-any-sub", "any-sub-not-main",
        "everything", "other-resource"])
def test_rules_match_resources_and_subresources_as_upstream(resources: list[str], rt: Any, sub: str | None,
                                                            expected: bool) -> None:
    rule = {"operations": ["UPDATE"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": resources}
    assert wire.rule_matches(rule, "UPDATE", rt, sub, "default") is expected


def test_scope_separates_namespaced_and_cluster_objects() -> None:
    rule = {"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"}
    assert not wire.rule_matches(rule, "CREATE", PODS, None, "default")
    assert wire.rule_matches(rule, "CREATE", BY_KEY["/v1/nodes"], None, "")


@pytest.mark.parametrize(("status", "code", "message"), [
    ({"code": 403, "reason": "Forbidden", "message": "no"}, 403, 'admission webhook "w" denied the request: no'),
    ({"code": 200, "message": "no"}, 400, 'admission webhook "w" denied the request: no'),
    ({"reason": "Quota"}, 400, 'admission webhook "w" denied the request: Quota'),
    (None, 400, 'admission webhook "w" denied the request without explanation'),
], ids=["as-given", "code-below-400", "reason-only", "nothing"])
def test_denials_are_worded_as_kube_apiserver_words_them(status: Any, code: int, message: str) -> None:
    error = wire.denial("w", status)
    assert (error.code, error.message) == (code, message)


def test_warning_header_quotes_and_escapes() -> None:
    assert wire.warning_header('a "b" \\ c\nd') == '299 - "a \\"b\\" \\\\ c d"'
