"""ExtenderArgs decoding and answer encoding against kube-scheduler's wire JSON (fixtures): Go field names
matched case-insensitively, both node forms, precise errors on bad bodies, answers with exact Go names."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.extender import wire

from .fleet import WIRE

NAMES = ["ip-10-0-171-111.ec2.internal", "ip-10-0-206-2.ec2.internal"]


def fixture(name: str) -> bytes:
    return (WIRE / name).read_bytes()


def _recase(value: Any, how: str) -> Any:
    """Change the case of the ExtenderArgs keys only (the embedded objects keep Kubernetes' camelCase)."""
    return {getattr(k, how)(): v for k, v in value.items()}


def test_node_names_form_is_decoded() -> None:
    args = wire.decode_args(fixture("ExtenderArgs.nodeCacheCapable-true.json"))
    assert args.node_names == tuple(NAMES) and args.nodes is None and args.node_cache_capable
    assert args.pod["metadata"]["name"] == "pod0"


def test_full_nodes_form_is_decoded_with_the_node_objects() -> None:
    args = wire.decode_args(fixture("ExtenderArgs.nodeCacheCapable-false.json"))
    assert args.node_names == tuple(NAMES) and not args.node_cache_capable
    node = args.node(NAMES[0])
    assert node is not None and node["metadata"]["labels"]["kubernetes.io/hostname"] == NAMES[0]


@pytest.mark.parametrize("how", ["lower", "upper", "swapcase"])
@pytest.mark.parametrize("name", ["ExtenderArgs.nodeCacheCapable-true.json",
                                  "ExtenderArgs.nodeCacheCapable-false.json"])
def test_keys_match_case_insensitively_as_go_does(how: str, name: str) -> None:
    raw = json.loads(fixture(name))
    assert wire.decode_args(json.dumps(_recase(raw, how)).encode()) == wire.decode_args(fixture(name))


def test_an_exact_key_wins_over_a_case_variant() -> None:
    body = {"pod": {"metadata": {"name": "wrong"}}, "Pod": {"metadata": {"name": "right"}}, "NodeNames": []}
    assert wire.decode_args(orjson.dumps(body)).pod["metadata"]["name"] == "right"


@pytest.mark.parametrize(("body", "message"), [
    (b"", "empty request body"),
    (b"{not json", "request body is not JSON"),
    (b"[1, 2]", "expected an ExtenderArgs object, got array"),
    (b'{"NodeNames": ["a"]}', "Pod: required"),
    (b'{"Pod": "p"}', "Pod: expected an object, got string"),
    (b'{"Pod": {"spec": []}}', "Pod.spec: expected an object, got array"),
    (b'{"Pod": {}, "NodeNames": "a"}', "NodeNames: expected an array of strings, got string"),
    (b'{"Pod": {}, "NodeNames": ["a", 3]}', "NodeNames[1]: expected a string, got number"),
    (b'{"Pod": {}, "Nodes": []}', "Nodes: expected a NodeList object, got array"),
    (b'{"Pod": {}, "Nodes": {"items": {}}}', "Nodes.items: expected an array, got object"),
    (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}', "Nodes.items[0].metadata.name: required"),
], ids=["empty", "not-json", "array", "no-pod", "pod-string", "spec-array", "names-string", "name-number",
        "nodes-array", "items-object", "node-unnamed"])  # fmt: skip
def test_bad_bodies_are_refused_with_the_field(body: bytes, message: str) -> None:
    with pytest.raises(wire.WireError) as err:
        wire.decode_args(body)
    assert message in str(err.value)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["Pod", "pod", "Nodes", "NodeNames", "nodenames", "items", "metadata",
                                         "name", "spec"]), inner, max_size=4), max_leaves=12))  # fmt: skip
def test_any_json_is_either_decoded_or_refused_with_a_wire_error(value: Any) -> None:
    try:
        args = wire.decode_args(json.dumps(value).encode())
    except wire.WireError:
        return
    assert isinstance(args.pod, dict) and all(isinstance(n, str) for n in args.node_names)


def test_priorities_use_the_go_field_names_of_the_fixture() -> None:
    expected = json.loads(fixture("HostPriorityList.json"))
    body = wire.encode_priorities([(e["Host"], e["Score"]) for e in expected])
    assert json.loads(body) == expected
    assert json.loads(wire.encode_equal_priorities(NAMES, 0)) == [{"Host": n, "Score": 0} for n in NAMES]
    assert wire.encode_equal_priorities([]) == b"[]"


def test_a_score_outside_0_to_10_is_a_bug_not_an_answer() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.10"):
        wire.encode_priorities([("n", 11)])


def test_filter_answers_in_the_form_the_request_used() -> None:
    names_args = wire.decode_args(fixture("ExtenderArgs.nodeCacheCapable-true.json"))
    out = json.loads(wire.encode_filter_result(args=names_args, passed=[NAMES[0]], failed={NAMES[1]: "why"}))
    reference = json.loads(fixture("ExtenderFilterResult.nodeCacheCapable-true.json"))
    assert out.keys() == reference.keys()
    assert out["NodeNames"] == [NAMES[0]] and out["Nodes"] is None and out["FailedNodes"] == {NAMES[1]: "why"}
    nodes_args = wire.decode_args(fixture("ExtenderArgs.nodeCacheCapable-false.json"))
    out = json.loads(wire.encode_filter_result(args=nodes_args, passed=[NAMES[1]]))
    assert out["NodeNames"] is None and [n["metadata"]["name"] for n in out["Nodes"]["items"]] == [NAMES[1]]


def test_a_filter_error_has_the_shape_of_the_fixture() -> None:
    reference = json.loads(fixture("ExtenderFilterResult.error.json"))
    out = json.loads(wire.encode_filter_result(args=None, error="boom"))
    assert out == {**reference, "Error": "boom"}


def test_filter_never_returns_a_name_that_was_not_a_candidate() -> None:
    args = wire.decode_args(fixture("ExtenderArgs.nodeCacheCapable-true.json"))
    out = json.loads(wire.encode_filter_result(args=args, passed=[NAMES[0], "stranger"]))
    assert out["NodeNames"] == [NAMES[0]]


@given(st.lists(st.lists(st.tuples(st.text(max_size=6), st.integers(0, 10)), max_size=5), max_size=6))
def test_arrays_joined_are_the_array_of_all_their_elements(pieces: list[list[tuple[str, int]]]) -> None:
    joined = wire.join_arrays([wire.encode_priorities(piece) for piece in pieces])
    assert joined == wire.encode_priorities([pair for piece in pieces for pair in piece])
