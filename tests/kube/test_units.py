"""Backoff, sharing of JSON containers, and node selector matching on their own."""

from __future__ import annotations

import copy
import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuclaim.kube.backoff import Backoff
from gpuclaim.kube.inventory import Inventory
from gpuclaim.kube.sharing import Interner


def test_backoff_grows_to_its_cap_and_resets() -> None:
    backoff = Backoff(initial=0.5, cap=4.0, jitter=0.0, rng=random.Random(0))
    assert [backoff.next() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_backoff_jitter_is_seeded_and_bounded() -> None:
    def delays(seed: int) -> list[float]:
        backoff = Backoff(initial=1.0, cap=8.0, jitter=0.5, rng=random.Random(seed))
        return [backoff.next() for _ in range(8)]

    assert delays(1) == delays(1)
    assert delays(1) != delays(2)
    assert all(0.5 <= d <= 8.0 for d in delays(3))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["a", "b", "NVIDIA H100"]),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.sampled_from("abcdef"), children,
                                                                     max_size=6),
    max_leaves=30,
)


@given(st.lists(json_values, max_size=6))
def test_sharing_never_changes_a_value_or_its_json(values: list[Any]) -> None:
    interner = Interner(max_width=4, max_entries=50)
    originals = copy.deepcopy(values)
    shared = [interner.share(copy.deepcopy(v)) for v in values]
    assert [orjson.dumps(v) for v in shared] == [orjson.dumps(v) for v in originals]


def test_equal_small_containers_become_one_object_and_json_types_stay_apart() -> None:
    interner = Interner()
    first = interner.share({"a": {"string": "Hopper"}, "b": {"int": 1}})
    second = interner.share({"a": {"string": "Hopper"}, "b": {"bool": True}, "c": {"int": True}})
    assert first["a"] is second["a"]
    assert second["c"] == {"int": True} and second["c"]["int"] is True  # not merged with {"int": 1}
    assert orjson.dumps(interner.share([{"x": 0.0}, {"x": -0.0}])) == b'[{"x":0.0},{"x":-0.0}]'


@pytest.mark.parametrize(("selector", "name", "labels", "expected"), [
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}]},
     "n", {"z": "a"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "NotIn", "values": ["a"]}]}]},
     "n", {}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}]},
     "n", {"gpus": "8"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["x"]}]}]},
     "n", {"gpus": "8"}, False),
    ({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]},
     "n", {}, True),
    ({"nodeSelectorTerms": [{}]}, "n", {"z": "a"}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "DoesNotExist"}]},
                            {"matchExpressions": [{"key": "z", "operator": "Exists"}]}]}, "n", {"z": "a"}, False),
], ids=["in", "notin-absent", "gt", "lt-not-a-number", "match-fields-name", "empty-term",
        # a slice's nodeSelector must have exactly one term (ORed terms are dra.api's tests): the apiserver
        # refuses this slice, so it is used on no node, as the allocator would skip it
        "two-terms-invalid-for-a-slice"])
def test_node_selector_slices_are_indexed_on_the_nodes_they_select(
    selector: dict[str, Any], name: str, labels: dict[str, str], expected: bool
) -> None:
    # matching itself is dra.api's NodeSelector (one implementation); this pins how the index uses it
    inventory = Inventory()
    inventory.on_node(None, {"metadata": {"name": name, "labels": labels}})
    inventory.on_slice(None, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "d.example.com", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
                 "nodeSelector": selector, "devices": [{"name": "dev-0"}]},
    })
    assert bool(inventory.slices_for_node(name)) is expected
    assert [s.name for s in inventory.parsed_slices_for_node(name)] == (["s"] if expected else [])


def test_device_classes_are_parsed_once_and_the_mapping_changes_only_with_them() -> None:
    inventory = Inventory()

    def klass(name: str, expression: str, rv: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name, "resourceVersion": rv},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}

    gpu = klass("gpu.example.com", "device.driver == 'gpu.example.com'", "1")
    inventory.on_class(None, gpu)
    first = inventory.parsed_classes()
    assert list(first) == ["gpu.example.com"]
    # the same object again (a relist) keeps the mapping: consumers key caches on its identity
    inventory.on_class(gpu, dict(gpu))
    assert inventory.parsed_classes() is first
    inventory.on_class(gpu, klass("gpu.example.com", "device.driver == 'other.example.com'", "3"))
    assert inventory.parsed_classes() is not first
    # one the apiserver would refuse is present but unusable, not missing
    bad = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "bad"},
           "spec": {"selectors": [{"cel": {}}]}}
    inventory.on_class(None, bad)
    assert inventory.class_refused("bad") and inventory.parsed_class("bad") is None
    assert "bad" not in inventory.parsed_classes() and not inventory.class_refused("missing")
    inventory.on_class(gpu, None)
    assert inventory.parsed_classes() == {}
