"""Hypothesis over generated pods: the patch applies (jsonpatch), the pod and every object validate against the
1.34 schemas, selectors compile for the 1.34 apiserver, each container keeps its device count, twice = once."""

from __future__ import annotations

import os
from typing import Any

import pytest
from convert_support import check_conversion, config, nvidia_classes
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuclaim.webhook.convert import MAX_DEVICES, convert_pod

MAPPED = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "amd.com/gpu"]
OTHER = {"cpu": "500m", "memory": "1Gi", "example.com/foo": "2"}
NAMES = [f"c{i}" for i in range(12)]
BIG = "amd.com/gpu"
LONG = os.environ.get("GPUCLAIM_LONG") == "1"


@st.composite
def container(draw: st.DrawFn, name: str, init: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox"}
    if init and draw(st.booleans()):
        c["restartPolicy"] = "Always"
    shape = draw(st.sampled_from(["none", "empty", "limits", "both"]))
    if shape == "none":
        return c
    resources: dict[str, Any] = {}
    c["resources"] = resources
    if shape == "empty":
        return c
    limits = {r: draw(st.sampled_from([1, 2, 3, "1", "2"])) for r in draw(st.sets(st.sampled_from(MAPPED), max_size=2))}
    limits |= {k: v for k, v in OTHER.items() if draw(st.booleans())}
    if limits:
        resources["limits"] = limits
    if shape == "both" and limits:
        resources["requests"] = dict(limits)
    if draw(st.booleans()):
        resources["claims"] = [{"name": "own"}]
    return c


@st.composite
def pods(draw: st.DrawFn, size: str = "small") -> dict[str, Any]:
    """``size``: "small" counts of 1-3; "boundary" puts 28-32 GPUs on the first app container (the pod lands on
    either side of MAX_DEVICES with what the others add); "over" puts more than MAX_DEVICES on it, which no
    device math can bring back under the limit, so the refusal branch is reached by construction. The big
    count is amd.com/gpu: its class declares no extendedResourceName, so it is converted under every config
    (nvidia.com/gpu is left to the scheduler with extendedResourceClasses=leave)."""
    names = draw(st.permutations(NAMES))
    n_app = draw(st.integers(1, 4))
    n_init = draw(st.integers(0, 3))
    spec: dict[str, Any] = {
        "containers": [draw(container(names[i], False)) for i in range(n_app)],
    }
    if n_init:
        spec["initContainers"] = [draw(container(names[n_app + i], True)) for i in range(n_init)]
    if size != "small":
        low, high = (MAX_DEVICES - 4, MAX_DEVICES) if size == "boundary" else (MAX_DEVICES + 1, 4 * MAX_DEVICES)
        big = spec["containers"][0]
        resources = big.setdefault("resources", {})
        resources.setdefault("limits", {})[BIG] = draw(st.integers(low, high))
        if "requests" in resources:
            resources["requests"][BIG] = resources["limits"][BIG]
    uses_own = any(r.get("claims") for c in spec["containers"] + spec.get("initContainers", [])
                   for r in [c.get("resources") or {}])
    if uses_own:
        spec["resourceClaims"] = [{"name": "own", "resourceClaimName": "team-gpu"}]
        if draw(st.booleans()):
            spec["resourceClaims"].append({"name": "gpuclaim", "resourceClaimTemplateName": "their-template"})
    if draw(st.booleans()):
        spec["nodeSelector"] = {"nvidia.com/gpu.product": draw(st.sampled_from(["NVIDIA-H100-80GB-HBM3", "Tesla-T4"])),
                                **({"nvidia.com/gpu.memory": "81559"} if draw(st.booleans()) else {})}
    meta: dict[str, Any] = {"name": "p", "namespace": "ml"}
    if draw(st.booleans()):
        meta["annotations"] = {"gpuclaim.io/sharing-group": "inference"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


CONFIGS = st.fixed_dictionaries({
    "topology": st.fixed_dictionaries({"mode": st.sampled_from(["firstAvailable", "required", "off"])}),
    "gfdMigration": st.fixed_dictionaries({"keepNodeSelector": st.booleans()}),
    "extendedResourceClasses": st.sampled_from(["convert", "leave"]),
})


def _check(pod: dict[str, Any], conversion: dict[str, Any], *, size: str = "small") -> None:
    cfg = config(conversion)
    result = convert_pod(pod, config=cfg, device_classes=nvidia_classes())
    event(f"{size}: {'refused for size' if result.refusals else 'converted'}")
    if size == "over":
        assert result.refusals, "a container asking for more than MAX_DEVICES GPUs must be refused"
    if result.refusals:
        assert all("a claim can hold" in str(e) for e in result.refusals), result.message()
        total = sum(int(v) for kind in ("containers", "initContainers") for c in pod["spec"].get(kind, [])
                    for k, v in ((c.get("resources") or {}).get("limits") or {}).items() if k in MAPPED)
        assert total > MAX_DEVICES
        return
    check_conversion(pod, result, cfg, nvidia_classes())


SIZES = st.sampled_from(["small", "small", "boundary", "over"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sized=SIZES.flatmap(lambda size: st.tuples(st.just(size), pods(size))), conversion=CONFIGS)
def test_every_generated_pod_converts_correctly_or_is_refused_for_size(sized: tuple[str, dict[str, Any]],
                                                                      conversion: dict[str, Any]) -> None:
    size, pod = sized
    _check(pod, conversion, size=size)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not LONG, reason="long fuzz run: GPUCLAIM_LONG=1")
@settings(max_examples=2000, deadline=None)
@given(sized=SIZES.flatmap(lambda size: st.tuples(st.just(size), pods(size))), conversion=CONFIGS)
def test_long_fuzz_over_generated_pods(sized: tuple[str, dict[str, Any]], conversion: dict[str, Any]) -> None:
    size, pod = sized
    _check(pod, conversion, size=size)
