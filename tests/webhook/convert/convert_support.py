"""Shared checks for the conversion tests: apply, validate against 1.34, compile selectors, count devices."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonpatch
import yaml
from official_schemas import assert_valid

from gpuclaim.dra import cel
from gpuclaim.dra.api import DeviceClass, parse_device_class, parse_resource_claim, parse_resource_claim_template
from gpuclaim.dra.config import Config, load_config
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.webhook.convert import Conversion, convert_pod

FIXTURES = Path(__file__).parents[2] / "fixtures"


@functools.cache
def nvidia_classes() -> dict[str, DeviceClass]:
    """Every driver's DeviceClasses; gpu.nvidia.com carries extendedResourceName nvidia.com/gpu (v25.12)."""
    out: dict[str, DeviceClass] = {}
    text = (FIXTURES / "deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml").read_text()
    for doc in yaml.safe_load_all(text):
        model, errors = parse_device_class(doc)
        assert model is not None and not errors, errors
        out[model.name] = model
    return out


def config(conversion: Mapping[str, Any] | None = None) -> Config:
    return load_config({"conversion": dict(conversion)} if conversion else None)


def legacy_counts(pod: Mapping[str, Any], cfg: Config, classes: Mapping[str, DeviceClass]) -> dict[str, int]:
    """container name → legacy device count of the resources the config converts."""
    in_tree = {c.extended_resource_name for c in classes.values()}
    leave = cfg.conversion.extended_resource_classes == "leave"

    def converted(name: str) -> bool:
        return cfg.conversion.mapping_for(name) is not None and not (leave and name in in_tree)

    out: dict[str, int] = {}
    for kind in ("initContainers", "containers"):
        for c in pod["spec"].get(kind) or ():
            limits = (c.get("resources") or {}).get("limits") or {}
            out[c["name"]] = sum(int(parse_quantity(str(v)).value) for k, v in limits.items() if converted(k))
    return out


def request_counts(claim_spec: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for request in claim_spec["devices"]["requests"]:
        if "exactly" in request:
            out[request["name"]] = request["exactly"]["count"]
        else:
            counts = {sub["count"] for sub in request["firstAvailable"]}
            assert len(counts) == 1, "every alternative must give the container the same count"
            out[request["name"]] = counts.pop()
    return out


def device_counts(pod: Mapping[str, Any], conversion: Conversion) -> dict[str, int]:
    """container name → devices it sees through gpuclaim's claim in the patched pod."""
    specs = {o["metadata"]["name"]: (o["spec"]["spec"] if o["kind"] == "ResourceClaimTemplate" else o["spec"])
             for o in conversion.objects}
    ours = {e["name"]: specs[e.get("resourceClaimTemplateName") or e.get("resourceClaimName")]
            for e in pod["spec"].get("resourceClaims") or () if
            (e.get("resourceClaimTemplateName") or e.get("resourceClaimName")) in specs}
    out: dict[str, int] = {}
    for kind in ("initContainers", "containers"):
        for c in pod["spec"].get(kind) or ():
            total = 0
            for ref in (c.get("resources") or {}).get("claims") or ():
                if ref["name"] in ours:
                    total += request_counts(ours[ref["name"]])[ref["request"]]
            out[c["name"]] = total
    return out


def selectors_of(claim_spec: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for request in claim_spec["devices"]["requests"]:
        for exact in [request["exactly"]] if "exactly" in request else request["firstAvailable"]:
            out += [s["cel"]["expression"] for s in exact.get("selectors") or ()]
    return out


def check_conversion(pod: dict[str, Any], conversion: Conversion, cfg: Config,
                     classes: Mapping[str, DeviceClass]) -> dict[str, Any]:
    """Every property a conversion must have; returns the patched pod."""
    assert not conversion.refusals, conversion.message()
    patched = jsonpatch.apply_patch(pod, conversion.patch)
    assert_valid(patched)
    for obj in conversion.objects:
        assert_valid(obj)
        parse = parse_resource_claim_template if obj["kind"] == "ResourceClaimTemplate" else parse_resource_claim
        model, errors = parse(obj)
        assert model is not None and not errors, errors
        spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
        for expression in selectors_of(spec):
            cel.compile_selector(expression, mode="new")  # the 1.34 apiserver would accept it
    if conversion.patch:
        assert device_counts(patched, conversion) == legacy_counts(pod, cfg, classes)
        names = [e["name"] for e in patched["spec"].get("resourceClaims") or ()]
        assert len(names) == len(set(names))
    again = convert_pod(patched, config=cfg, device_classes=classes)
    assert again.patch == [] and not again.refusals, again
    return patched


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **spec: Any) -> dict[str, Any]:
    """A Pod in namespace `team` with these containers (and init containers)."""
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}, "spec": body}


def ctr(name: str, limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox", **extra}
    if limits is not None:
        c["resources"] = {"limits": limits}
    return c


def convert(p: dict[str, Any], **conversion: Any) -> tuple[Conversion, Config]:
    """`convert_pod` with the NVIDIA classes and a config whose `conversion:` section is `conversion`."""
    cfg = config(conversion)
    return convert_pod(p, config=cfg, device_classes=nvidia_classes()), cfg
