"""Never refuse what kube-apiserver admitted (issue 24, item 2), on each real control plane under test: claims
whose selectors the apiserver compiles (ext.Lists v3 from 1.35, `device.allowMultipleAllocations` where
DRAConsumableCapacity is on, and selectors gpuclaim's model may not know) go through the full admission chain,
gpuclaim's validating webhook included. Whatever the apiserver refuses, it refuses itself; gpuclaim's webhook
refuses none of them (none of these selectors can fail at run time, and no policy applies). Every create is a
dryRun."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realkube_cluster import Kube

NV = "device.attributes['gpu.nvidia.com']"
# runtime-safe selectors (no unguarded vendor attribute): the only refusal left is a compile error
SELECTORS = [
    "[3, 1, 2].sort()[0] == 1",
    f"[{NV}.?productName.orValue('')].sortBy(x, x).size() == 1",
    "lists.range(3).size() == 3",
    "[1, 2, 3].slice(1, 2) == [2]",
    "[1, 1].distinct().size() == 1",
    "[1, 2].reverse()[0] == 2",
    "[[1], [2]].flatten().size() == 2",
    "[1, 2].first().orValue(0) == 1",
    "device.allowMultipleAllocations == false || device.allowMultipleAllocations",
    "device.driver == 'gpu.nvidia.com'",
    f"has({NV}.productName) && {NV}.productName.startsWith('NVIDIA')",
    "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",  # no such overload: the apiserver refuses
]
claims = st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=3).map(lambda exprs: {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "admitted"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": e}} for e in exprs]}}]}}})


@pytest.fixture(scope="module")
def namespace(kube: Kube) -> str:
    name = "admitted"
    kube.api.apply_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
    return name


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(drawn=st.lists(claims, min_size=15, max_size=20))
def test_the_webhook_refuses_nothing_the_apiserver_admits(kube: Kube, namespace: str, drawn: list[dict]) -> None:
    refused_by_gpuclaim = []
    for index, claim in enumerate(drawn):
        claim = {**claim, "metadata": {"name": f"admitted-{index}", "namespace": namespace}}
        status, body = kube.api.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
                                        claim, params={"dryRun": "All"})
        assert status in (200, 201, 422), (status, body)
        message = str(body.get("message", ""))
        if status == 422 and "dra.validate.gpuclaim.io" in message:
            refused_by_gpuclaim.append((claim["spec"], message[:300]))
    assert not refused_by_gpuclaim, refused_by_gpuclaim
