"""`ConversionCache`: pods that differ only in what conversion never reads share one entry; anything conversion
reads (the pod's relevant parts, the namespace, its labels, the config, the DeviceClass set) misses, and a cached
answer always equals a fresh `convert_pod`. A recording pod proves the key covers every read `convert_pod` makes."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from convert_support import config, nvidia_classes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuclaim.dra.config import Config
from gpuclaim.webhook.convert import ConversionCache, conversion_key, convert_pod

LONG = os.environ.get("GPUCLAIM_LONG") == "1"
OPT_OUT = "gpuclaim.io/webhook"
SHARING = "gpuclaim.io/sharing-group"


def replica(n: int) -> dict[str, Any]:
    """Pod `n` of one ReplicaSet as the webhook sees it: names, the injected token volume, env values differ."""
    token = f"kube-api-access-{n:05d}"
    containers = [{"name": name, "image": f"nvcr.io/nvidia/pytorch:25.0{n % 3}-py3",
                   "env": [{"name": "RANK", "value": str(n)}],
                   "volumeMounts": [{"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                   "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4"}, "requests": {"cpu": "2"}}}
                  for name in ("trainer", "evaluator")]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"train-7d9f-{n:05d}", "generateName": "train-7d9f-", "namespace": "ml",
                         "labels": {"app": "train", "pod-template-hash": "7d9f"}, "uid": f"uid-{n}",
                         "annotations": {"kubectl.kubernetes.io/restartedAt": f"2025-01-0{n % 9 + 1}"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "train-7d9f", "uid": "rs"}]},
            "spec": {"containers": containers, "restartPolicy": "Never", "serviceAccountName": "default",
                     "volumes": [{"name": token, "projected": {"sources": []}}], "nodeName": None}}


def _convert(cache: ConversionCache, pod: dict[str, Any], cfg: Config, **kwargs: Any) -> Any:
    kwargs.setdefault("device_classes", nvidia_classes())
    kwargs.setdefault("namespace", "ml")
    return cache.convert(pod, config=cfg, **kwargs)


def test_replicas_of_one_shape_share_an_entry() -> None:
    cache = ConversionCache()
    cfg = config()
    first = _convert(cache, replica(1), cfg)
    assert first.patch and first.templates
    for n in range(2, 12):
        again = _convert(cache, replica(n), cfg)
        assert again is first  # the same object: no conversion ran
        assert again == convert_pod(replica(n), config=cfg, device_classes=nvidia_classes(), namespace="ml")
    assert (cache.hits, cache.misses, len(cache)) == (10, 1, 1)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        node = pod
        for step in path[:-1]:
            node = node.setdefault(step, {}) if isinstance(node, dict) else node[step]
        node[path[-1]] = value
    return change


def _del(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        node: Any = pod
        for step in path[:-1]:
            node = node[step]
        del node[path[-1]]
    return change


GPU_LIMITS = ("spec", "containers", 0, "resources", "limits")
CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "gpu count": _set((*GPU_LIMITS, "nvidia.com/gpu"), "2"),
    "another mapped resource": _set((*GPU_LIMITS, "nvidia.com/mig-1g.10gb"), "1"),
    "a non-whole count (refused)": _set((*GPU_LIMITS, "nvidia.com/gpu"), "500m"),
    "request differs from limit": _set(("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"), "2"),
    "cpu limit (kept in the patch)": _set((*GPU_LIMITS, "cpu"), "8"),
    "container name": _set(("spec", "containers", 0, "name"), "learner"),
    "resources removed": _del(("spec", "containers", 0, "resources")),
    "a sidecar init container": _set(("spec", "initContainers"), [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]),
    "an init container's restartPolicy": _set(("spec", "initContainers"), [
        {"name": "proxy", "restartPolicy": "OnFailure", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]),
    "container order": lambda pod: pod["spec"]["containers"].reverse(),
    "GFD node selector": _set(("spec", "nodeSelector"), {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    "GFD node affinity": _set(("spec", "affinity"), {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-40GB"]}]}]}}}),
    "existing resourceClaims": _set(("spec", "resourceClaims"), [{"name": "gpuclaim", "resourceClaimName": "x"}]),
    "schedulerName": _set(("spec", "schedulerName"), "volcano"),
    "opt-out annotation": _set(("metadata", "annotations", OPT_OUT), "disabled"),
    "sharing group": _set(("metadata", "annotations", SHARING), "inference"),
    "metadata.namespace": _set(("metadata", "namespace"), "other"),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_each_change_conversion_reads_misses_and_answers_fresh(what: str) -> None:
    cfg = config({"schedulerName": "gpuclaim-scheduler"})
    cache = ConversionCache()
    base = replica(1)
    _convert(cache, base, cfg, namespace=None)
    changed = copy.deepcopy(base)
    CHANGES[what](changed)
    got = _convert(cache, changed, cfg, namespace=None)  # namespace from the pod: metadata.namespace counts
    assert cache.misses == 2
    assert got == convert_pod(changed, config=cfg, device_classes=nvidia_classes())
    assert got != convert_pod(base, config=cfg, device_classes=nvidia_classes()), "the change must matter"


def test_the_request_context_is_part_of_the_key() -> None:
    cfg = config()
    cache = ConversionCache()
    pod = replica(1)
    plain = _convert(cache, pod, cfg, namespace_labels={"team": "a"})
    opted_out = _convert(cache, pod, cfg, namespace_labels={"team": "a", OPT_OUT: "disabled"})
    assert plain.patch and not opted_out.patch and opted_out.skipped
    other_namespace = _convert(cache, pod, cfg, namespace="research")
    assert other_namespace.templates[0]["metadata"]["namespace"] == "research"
    own = _convert(cache, pod, cfg, namespace="gpuclaim", own_namespace="gpuclaim")
    assert own.skipped and not own.patch
    assert cache.hits == 0 and cache.misses == 4
    assert _convert(cache, pod, cfg, namespace_labels={"team": "a"}) is plain


def test_another_config_or_device_class_set_empties_the_cache() -> None:
    cache = ConversionCache()
    cfg = config()
    first = _convert(cache, replica(1), cfg)
    assert any("KEP-5004" in w for w in first.warnings)  # gpu.nvidia.com declares nvidia.com/gpu
    left = _convert(cache, replica(2), config({"extendedResourceClasses": "leave"}))
    assert not left.patch and cache.misses == 2
    without_declaring_class = {k: v for k, v in nvidia_classes().items() if k != "gpu.nvidia.com"}
    refused = _convert(cache, replica(3), cfg, device_classes=without_declaring_class)
    assert refused.refusals and cache.misses == 3  # requireClassesExist: the mapped class is gone
    assert _convert(cache, replica(4), cfg, device_classes=without_declaring_class) is refused


def test_bounded_least_recently_used() -> None:
    cache = ConversionCache(max_entries=3)
    cfg = config()
    pods = []
    for n in range(1, 5):
        pod = replica(1)
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(n)
        pods.append(pod)
    for pod in pods[:3]:
        _convert(cache, pod, cfg)
    _convert(cache, pods[0], cfg)  # used again: the oldest is now pods[1]
    _convert(cache, pods[3], cfg)
    assert len(cache) == 3 and cache.misses == 4
    _convert(cache, pods[0], cfg)
    assert cache.misses == 4
    _convert(cache, pods[1], cfg)
    assert cache.misses == 5


def test_a_pod_json_cannot_express_is_converted_not_cached() -> None:
    pod = replica(1)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1, 7: "odd key"}
    cfg = config()
    assert conversion_key(pod, cfg.conversion, namespace="ml", namespace_labels=None, own_namespace=None) is None
    cache = ConversionCache()
    assert _convert(cache, pod, cfg) == convert_pod(pod, config=cfg, device_classes=nvidia_classes(), namespace="ml")
    assert len(cache) == 0


# ---- the key covers every read -----------------------------------------------------------------------------------

Path = tuple[Any, ...]
ANY = "*"


def _wrap(value: Any, path: Path, reads: set[Path]) -> Any:
    if type(value) is dict:
        return RecordingDict(value, path, reads)
    if type(value) is list:
        return RecordingList(value, path, reads)
    return value


class RecordingDict(dict[Any, Any]):
    """A dict that notes the path of every key read (`*` for a read of all keys)."""

    def __init__(self, data: dict[Any, Any], path: Path, reads: set[Path]) -> None:
        super().__init__(data)
        self._path, self._reads = path, reads

    def _note(self, key: Any) -> Path:
        path = (*self._path, key)
        self._reads.add(path)
        return path

    def __getitem__(self, key: Any) -> Any:
        return _wrap(dict.__getitem__(self, key), self._note(key), self._reads)

    def get(self, key: Any, default: Any = None) -> Any:
        path = self._note(key)
        return _wrap(dict.__getitem__(self, key), path, self._reads) if dict.__contains__(self, key) else default

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[Any]:
        self._note(ANY)
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._note(ANY)
        return dict.__len__(self)

    def keys(self) -> Any:
        self._note(ANY)
        return dict.keys(self)

    def items(self) -> Any:
        path = self._note(ANY)
        return [(k, _wrap(v, (*path[:-1], k), self._reads)) for k, v in dict.items(self)]

    def values(self) -> Any:
        path = self._note(ANY)
        return [_wrap(v, (*path[:-1], k), self._reads) for k, v in dict.items(self)]


class RecordingList(list[Any]):
    def __init__(self, data: list[Any], path: Path, reads: set[Path]) -> None:
        super().__init__(data)
        self._path, self._reads = path, reads

    def __getitem__(self, index: Any) -> Any:
        self._reads.add((*self._path, ANY))
        return _wrap(list.__getitem__(self, index), (*self._path, ANY), self._reads)

    def __iter__(self) -> Iterator[Any]:
        self._reads.add((*self._path, ANY))
        return (_wrap(v, (*self._path, ANY), self._reads) for v in list.__iter__(self))


# what conversion_key holds: a path is covered when it is one of these or lies under a `...` entry
_WHOLE = [("spec", "nodeSelector"), ("spec", "resourceClaims"), ("spec", "schedulerName"),
          ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
          ("spec", "containers", ANY, "resources"), ("spec", "initContainers", ANY, "resources")]
_EXACT = {("metadata",), ("metadata", "namespace"), ("metadata", "annotations"), ("metadata", "annotations", OPT_OUT),
          ("metadata", "annotations", SHARING), ("spec",), ("spec", "affinity"), ("spec", "affinity", "nodeAffinity"),
          *(("spec", kind, *rest) for kind in ("containers", "initContainers")
             for rest in [(), (ANY,), (ANY, "name"), (ANY, "restartPolicy")])}


def uncovered(reads: set[Path]) -> list[Path]:
    return sorted((p for p in reads if p not in _EXACT and not any(p[:len(w)] == w for w in _WHOLE)), key=str)


def recorded_reads(pod: dict[str, Any], cfg: Config, **kwargs: Any) -> set[Path]:
    reads: set[Path] = set()
    convert_pod(RecordingDict(copy.deepcopy(pod), (), reads), config=cfg, device_classes=nvidia_classes(), **kwargs)
    return reads


def test_the_recorder_catches_a_read_outside_the_key() -> None:
    reads: set[Path] = set()
    pod = RecordingDict(replica(1), (), reads)
    pod["metadata"]["labels"].get("app")
    [c.get("image") for c in pod["spec"]["containers"]]
    assert uncovered(reads) == [("metadata", "labels"), ("metadata", "labels", "app"),
                                ("spec", "containers", "*", "image")]


def _every_shape() -> Iterator[dict[str, Any]]:
    yield replica(1)
    for change in CHANGES.values():
        pod = replica(1)
        change(pod)
        yield pod


@pytest.mark.parametrize("topology", ["firstAvailable", "required", "off"])
def test_convert_pod_reads_only_what_the_key_holds(topology: str) -> None:
    cfg = config({"topology": {"mode": topology}, "schedulerName": "gpuclaim-scheduler",
                  "gfdMigration": {"keepNodeSelector": False}})
    for pod in _every_shape():
        assert uncovered(recorded_reads(pod, cfg, namespace_labels={"team": "a"})) == []


# ---- hypothesis: a cached answer is always the fresh answer ------------------------------------------------------

MAPPED = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"]


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    """Few shapes (so entries get reused), with noise conversion must ignore: names, env, images, labels."""
    def container(name: str, init: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "image": draw(st.sampled_from(["a", "b"])),
                             "env": [{"name": "X", "value": draw(st.text(max_size=3))}]}
        if init and draw(st.booleans()):
            c["restartPolicy"] = draw(st.sampled_from(["Always", "OnFailure"]))
        limits = {r: draw(st.sampled_from(["1", "2", 1])) for r in draw(st.sets(st.sampled_from(MAPPED), max_size=2))}
        if limits or draw(st.booleans()):
            c["resources"] = {"limits": limits | ({"cpu": "1"} if draw(st.booleans()) else {})}
        return c

    spec: dict[str, Any] = {"containers": [container(f"c{i}", False) for i in range(draw(st.integers(1, 2)))]}
    if draw(st.booleans()):
        spec["initContainers"] = [container("init", True)]
    if draw(st.booleans()):
        spec["nodeSelector"] = {"nvidia.com/gpu.product": draw(st.sampled_from(["NVIDIA-H100-80GB-HBM3", "Tesla-T4"]))}
    annotations = {"note": draw(st.text(max_size=3))}
    if draw(st.booleans()):
        annotations[draw(st.sampled_from([SHARING, OPT_OUT]))] = draw(st.sampled_from(["disabled", "inference"]))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": draw(st.text(max_size=5)),
                                                           "namespace": "ml", "annotations": annotations},
            "spec": spec}


_SHARED_CACHE = ConversionCache(max_entries=64)
_CONFIGS = [config(), config({"extendedResourceClasses": "leave", "topology": {"mode": "off"}})]


@settings(max_examples=2000 if LONG else 150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), which=st.integers(0, 1), labels=st.sampled_from([None, {}, {OPT_OUT: "disabled"}]),
       namespace=st.sampled_from([None, "ml", "kube-system"]))
def test_cached_answers_equal_fresh_ones(pod: dict[str, Any], which: int, labels: dict[str, str] | None,
                                         namespace: str | None) -> None:
    cfg = _CONFIGS[which]
    fresh = convert_pod(pod, config=cfg, device_classes=nvidia_classes(), namespace_labels=labels,
                        namespace=namespace)
    got = _SHARED_CACHE.convert(pod, config=cfg, device_classes=nvidia_classes(), namespace_labels=labels,
                                namespace=namespace)
    assert got == fresh
    assert uncovered(recorded_reads(pod, cfg, namespace_labels=labels, namespace=namespace)) == []


def big_pod(n: int, size: int = 1_400_000) -> dict[str, Any]:
    """A distinct ~1.4 MB pod whose bulk is in what conversion reads (its containers' resources)."""
    per = 40
    limits = {f"example.org/r{n}-{i:06d}": "1" for i in range(size // per)}
    limits["nvidia.com/gpu"] = "1"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"big-{n}", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]}}


def test_the_cache_is_bounded_in_bytes_whatever_the_pods() -> None:
    """Issue 14, finding 4: by entries alone, 250 distinct 1.47 MB pods took the webhook to 1,092 MB RSS."""
    import gc
    import tracemalloc

    cfg = config()
    classes = nvidia_classes()
    cache = ConversionCache()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for n in range(40):  # 40 x 1.4 MB: enough to show growth (the bench sends 250 to a real process)
            pod = big_pod(n)
            assert cache.convert(pod, config=cfg, device_classes=classes).patch  # converted, answered
            del pod
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert cache.bytes <= cache.max_bytes
    assert held < 16 * 1024 * 1024, held  # 40 entries of their 1.4 MB keys and patches were ~170 MB


def test_the_byte_budget_evicts_least_recently_used_first() -> None:
    cfg = config()
    classes = nvidia_classes()
    pods = [big_pod(n, size=60_000) for n in range(6)]
    cache = ConversionCache(max_bytes=800_000, max_entry_bytes=10**9)  # each is charged ~255 KB: 3 fit
    for pod in pods:
        cache.convert(pod, config=cfg, device_classes=classes)
    assert 0 < len(cache) < 6 and cache.bytes <= cache.max_bytes
    cache.convert(pods[-1], config=cfg, device_classes=classes)
    assert cache.hits == 1  # the newest survived
    cache.convert(pods[0], config=cfg, device_classes=classes)
    assert cache.hits == 1  # the oldest went first
