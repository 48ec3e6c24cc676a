"""The extender's filter and mixed nodes: a converted pod fails the mixed candidates with a reason, other pods and
mixedNodes: allow pass them; the wire answer keeps the other failures; the cluster view keeps what tells them."""

from __future__ import annotations

import orjson

from gpuclaim.dra.mixed import Overlap
from gpuclaim.extender import mixed, wire
from gpuclaim.kube.cache import compact_node

OVERLAP = (Overlap("nvidia.com/gpu", "8", "gpu.nvidia.com", "gpu.nvidia.com"),)
CONVERTED = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [
    {"name": "gpuclaim", "resourceClaimTemplateName": "gpuclaim-0123"}]}}


class Tracker:
    def __init__(self, policy: str = "avoid") -> None:
        self.avoid = policy == "avoid"
        self.avoided = None

    def nodes(self) -> dict[str, tuple[Overlap, ...]]:
        return {"b": OVERLAP, "z": OVERLAP}


def args(pod: dict) -> wire.ExtenderArgs:
    return wire.ExtenderArgs(pod=pod, node_names=("a", "b", "c"), nodes=None)


def test_a_converted_pod_fails_the_mixed_candidates_with_the_reason() -> None:
    left, avoided = mixed.avoid(args(CONVERTED), Tracker())
    assert left.node_names == ("a", "c")
    assert list(avoided) == ["b"] and avoided["b"].startswith(
        "gpuclaim: node b is mixed: the device plugin advertises nvidia.com/gpu=8 and driver gpu.nvidia.com")
    body = wire.encode_filter_result(args=left, passed=["a"], failed={"c": "gpuclaim: topology"})
    result = orjson.loads(mixed.add_failed(body, avoided))
    assert result["NodeNames"] == ["a"] and set(result["FailedNodes"]) == {"b", "c"}


def test_other_pods_allow_and_no_view_pass_everything() -> None:
    plain = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "x", "resourceClaimTemplateName": "x"}]}}
    for pod, tracker in ((plain, Tracker()), (CONVERTED, Tracker("allow")), (CONVERTED, None)):
        left, avoided = mixed.avoid(args(pod), tracker)
        assert left.node_names == ("a", "b", "c") and avoided == {}
    assert mixed.add_failed(b'{"x":1}', {}) == b'{"x":1}'


def test_the_cluster_view_keeps_a_nodes_extended_resources_only() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready"}]}}
    assert compact_node(node) == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}},
                                  "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    assert "status" not in compact_node({**node, "status": {"allocatable": {"cpu": "8"}}})

