"""The shipped driver schemas (gpuclaim/dra/schemas/*.yaml): they load, they agree with every real ResourceSlice
of the fixtures, the config's `schemas:` key is checked like any other, and the typo finder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuclaim.dra import api
from gpuclaim.dra.config import ConfigError, load_config
from gpuclaim.dra.schemas import closest, registry

SLICES = Path(__file__).parents[1] / "fixtures/resourceslices"
_TYPES = {bool: "bool", int: "int", str: "string"}


def test_every_shipped_schema_loads_once_with_its_provenance() -> None:
    shipped = registry.shipped()
    assert {s.driver for s in shipped} >= {
        "gpu.nvidia.com", "compute-domain.nvidia.com", "gpu.amd.com", "gpu.intel.com", "gaudi.intel.com",
        "tpu.google.com", "gpu.example.com", "resource.kubernetes.io"}
    assert all(s.source.startswith("https://github.com/") for s in shipped)
    assert registry.shipped() is shipped and registry.registry() is registry.registry()  # loaded once, cached
    nvidia = registry.registry().schemas["gpu.nvidia.com"]
    assert nvidia.releases == ("v25.3", "v25.8", "v25.12", "HEAD") and nvidia.device_types == ("gpu", "mig", "vfio")


def _real_devices() -> list[api.Device]:
    out = []
    for path in sorted(SLICES.glob("*.yaml")):
        try:
            documents = api.flatten_documents(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # the one deliberately broken dump
        for obj in documents:
            if isinstance(obj, dict) and obj.get("kind") == "ResourceSlice":
                parsed, errors = api.parse_resource_slice(obj)
                if parsed is not None and not errors:
                    out.extend(parsed.devices)
    return out


def test_every_attribute_and_capacity_of_the_real_slices_is_in_its_drivers_schema_with_its_type() -> None:
    reg = registry.registry()
    checked = 0
    for device in _real_devices():
        schema = reg.get(device.driver)
        if schema is None:
            continue
        for name, value in device.attributes.items():
            domain, _, ident = name.partition("/")
            if domain not in schema.domains():
                continue  # another driver's domain (dranet's azure.dra.net extras): read unchecked, as in a selector
            entries = schema.lookup("attribute", domain, ident)
            assert entries, f"{device.driver} {device.name}: {name} missing from the shipped schema"
            expected = _TYPES.get(type(value), "version")
            assert {e.type for e in entries} == {expected}, f"{name}: {value!r}"
            checked += 1
        for name in device.capacity:
            domain, _, ident = name.partition("/")
            assert schema.lookup("capacity", domain, ident), f"{device.driver}: capacity {name}"
            checked += 1
    assert checked > 500  # p4d, p5, GB200, GB300, vGPU, Intel, Gaudi, dranet devices


def test_config_schemas_are_checked_with_full_key_paths() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"schemas": [
            {"driver": "a.example.org", "attributes": [{"name": "x", "type": "float"}]},
            {"driver": "a.example.org", "capacitys": []},
            {"driver": "Not_A_Driver"}]})
    text = str(err.value)
    assert "schemas[0].attributes[0].type: must be one of int, bool, string, version, got 'float'" in text
    assert "schemas[1].capacitys: unknown key" in text


def test_config_cross_checks_duplicate_and_invalid_driver_names() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"schemas": [{"driver": "a.example.org"}, {"driver": "a.example.org"}, {"driver": "Bad_Name"}]})
    assert "schemas[1].driver: duplicate schema for a.example.org" in str(err.value)
    assert "schemas[2].driver: must be a driver name" in str(err.value)


def test_a_config_schema_overrides_by_name_and_adds_releases() -> None:
    config = load_config({"schemas": [{"driver": "gpu.nvidia.com", "releases": ["v26.4"], "attributes": [
        {"name": "productName", "type": "string", "releases": ["v26.4"]}]}]})
    schema = registry.registry(config.schemas).schemas["gpu.nvidia.com"]
    assert schema.origin == "shipped+config" and schema.releases[-1] == "v26.4"
    (entry,) = schema.lookup("attribute", "gpu.nvidia.com", "productName")
    assert entry.releases == frozenset({"v26.4"})
    assert schema.lookup("attribute", "gpu.nvidia.com", "uuid")  # the rest is kept


@pytest.mark.parametrize(("typo", "meant"), [
    ("productname", "productName"), ("prodcutName", "productName"), ("pcieRot", "pcieRoot"), ("uiud", "uuid"),
    ("somethingElse", None)], ids=["case", "swap", "drop", "swap-short", "far"])
def test_closest_name(typo: str, meant: str | None) -> None:
    assert closest(typo, ["productName", "pcieRoot", "uuid", "profile", "parentUUID"]) == meant
