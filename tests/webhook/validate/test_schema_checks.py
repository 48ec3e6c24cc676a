"""Driver schema checks (issue 16): through `gpuclaim lint` (errors) and the webhook's validate_object (warnings),
without an inventory (the shipped schemas) and with one (what the devices publish wins)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import validate_objects as o
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.cli import main
from gpuclaim.dra.schemas import registry
from gpuclaim.webhook.validate import OfflineInventory, validate_object

SEL = "spec.devices.requests[0].exactly.selectors[0].cel.expression"
NV = 'device.attributes["gpu.nvidia.com"]'


def _lint(capsys: pytest.CaptureFixture[str], tmp_path: Path, *docs: Any, args: tuple[str, ...] = ()
          ) -> tuple[int, list[dict[str, Any]]]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["lint", str(path), "-o", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def _found(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["field"], f["severity"]) for f in found if f["severity"] != "info"]


def _webhook(obj: object, inventory: OfflineInventory | None = None) -> Any:
    return validate_object(obj, operation="CREATE", inventory=inventory or OfflineInventory(), config=o.config())


# --- the four cases of the issue, each without an inventory ---


def test_count_64_is_the_allocators_error_in_lint_and_a_warning_in_the_webhook(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", count=64))
    code, found = _lint(capsys, tmp_path, claim)
    assert code == 1 and _found(found) == [("spec.devices.requests[0].exactly.count", "error")]
    assert found[0]["message"].startswith("Invalid value: 64: number of requested devices 64 exceeds the claim "
                                          "limit of 32")
    assert found[0]["stage"] == "scheduling"  # kube-apiserver admits it: the allocator refuses it
    verdict = _webhook(claim)
    assert verdict.allowed and len(verdict.warnings) == 1 and "exceeds the claim limit of 32" in verdict.warnings[0]


def test_the_claim_limit_sums_requests_and_takes_the_smallest_subrequest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subs = {"name": "flex", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 40},
        {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 16}]}
    code, found = _lint(capsys, tmp_path, o.claim(o.request("a", count=16), subs))
    assert code == 0  # 16 + min(40, 16) = 32: allowed, but the 40 can never be allocated
    assert _found(found) == [("spec.devices.requests[1].firstAvailable[0].count", "warning")]
    code, found = _lint(capsys, tmp_path, o.claim(o.request("a", count=17), subs))
    assert code == 1 and _found(found)[0] == ("spec.devices.requests", "error")
    assert "number of requested devices 33 exceeds the claim limit of 32" in found[0]["message"]


def test_a_misspelt_attribute_is_an_error_with_the_closest_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", f'{NV}.productname == "NVIDIA A100-SXM4-40GB"'))
    code, found = _lint(capsys, tmp_path, claim)
    assert code == 1 and _found(found) == [(SEL, "error")]
    assert "no release of gpu.nvidia.com (v25.3, v25.8, v25.12, HEAD) publishes an attribute " \
           "gpu.nvidia.com/productname; did you mean productName?" in found[0]["message"]
    assert _webhook(claim).allowed


def test_comparing_a_string_attribute_with_a_number_is_never_true(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, found = _lint(capsys, tmp_path, o.claim(o.request("gpu", f"{NV}.productName == 80")))
    assert code == 0 and _found(found) == [(SEL, "warning")]
    assert found[0]["message"] == ("gpu.nvidia.com/productName is a string attribute: compared with int 80 by == "
                                   "it is never true")


@pytest.mark.parametrize(("expression", "message"), [
    (f"80 != {NV}.productName", "by != it is always true"),
    (f"{NV}.productName < 3", "by < it fails with a CEL runtime error"),
    (f'{NV}.driverVersion == "570.1.0"', "a version attribute: compared with string '570.1.0' by == it is never"),
    (f'{NV}.cudaComputeCapability == semver("9.0.0")', None),
    (f"{NV}.?productName.orValue('') == 'x'", None),
    (f"cel.bind(a, {NV}, a.productName == 80)", "compared with int 80"),
], ids=["ne", "ordering", "version-vs-string", "version-ok", "optional-not-compared", "through-bind"])
def test_literal_type_mismatches(expression: str, message: str | None, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, found = _lint(capsys, tmp_path, o.claim(o.request("gpu", expression)))
    messages = [f["message"] for f in found if f["severity"] == "warning"]
    assert (messages == []) if message is None else (len(messages) == 1 and message in messages[0]), messages


def test_a_selector_that_is_a_string_attribute_is_an_error_in_lint_a_warning_in_the_webhook(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", f"{NV}.productName"))
    code, found = _lint(capsys, tmp_path, claim)
    assert code == 1 and _found(found) == [(SEL, "error")]
    assert "the selector evaluates to string, not bool" in found[0]["message"]
    assert "could not be converted to bool" in found[0]["message"]
    verdict = _webhook(claim)  # kube-apiserver accepts it (the attribute is typed any): the webhook only warns
    assert verdict.allowed and "evaluates to string, not bool" in verdict.warnings[0]


def test_a_statically_non_bool_selector_keeps_the_apiservers_refusal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", "device.driver"))
    code, found = _lint(capsys, tmp_path, claim)
    assert code == 1 and [f["field"] for f in found if f["severity"] == "error"] == [SEL]
    assert "must evaluate to bool or the unknown type, not string" in found[0]["message"]  # upstream's wording
    assert found[0]["stage"] == "admission"
    # kube-apiserver refuses it before any webhook: were it to reach the webhook, gpuclaim would not refuse it
    verdict = _webhook(claim)
    assert verdict.allowed and "not checked" in verdict.warnings[0]


def test_a_ternary_of_int_attributes_is_not_bool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expression = f"{NV}.productName == 'x' ? {NV}.index : {NV}.minor"
    _, found = _lint(capsys, tmp_path, o.claim(o.request("gpu", expression)))
    assert any("evaluates to int, not bool" in f["message"] for f in found if f["severity"] == "error")


# --- releases, capacities, constraints, MIG ---


def test_an_attribute_only_some_releases_publish_is_a_warning_naming_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, found = _lint(capsys, tmp_path, o.claim(o.request("gpu", f'{NV}.pcieBusID == "0000:10:1c.0"')))
    assert _found(found) == [(SEL, "warning")]
    assert ("published only by gpu.nvidia.com releases v25.3, v25.8 (not by v25.12, HEAD)" in found[0]["message"]
            and "renamed it to resource.kubernetes.io/pciBusID" in found[0]["message"])


@pytest.mark.parametrize("expression", [
    f'has({NV}.pcieBusID) && {NV}.pcieBusID == "0000:10:1c.0"',
    f'{NV}.?pcieBusID.orValue("") == "0000:10:1c.0"',
    f'"pcieBusID" in {NV} ? {NV}.pcieBusID == "0000:10:1c.0" : false',
], ids=["has", "optional", "in-ternary"])
def test_an_attribute_only_some_releases_publish_read_behind_a_guard_is_no_finding(
        expression: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # devices of the releases without it make the guard false: nothing fails at run time
    code, found = _lint(capsys, tmp_path, o.claim(o.request("gpu", expression)))
    assert code == 0 and _found(found) == []


def test_capacities_are_checked_and_an_attribute_used_as_a_capacity_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, found = _lint(capsys, tmp_path, o.claim(
        o.request("a", "device.capacity['gpu.nvidia.com'].memorySlice3.compareTo(quantity('1')) == 0",
                  cls="mig.nvidia.com"),
        o.request("b", "device.capacity['gpu.nvidia.com'].memroy.compareTo(quantity('1Gi')) >= 0"),
        o.request("c", "device.attributes['gpu.nvidia.com'].memory == 1")))
    errors = {f["field"]: f["message"] for f in found if f["severity"] == "error"}
    assert set(errors) == {"spec.devices.requests[1].exactly.selectors[0].cel.expression",
                           "spec.devices.requests[2].exactly.selectors[0].cel.expression"}
    assert "a capacity gpu.nvidia.com/memroy; did you mean memory?" in errors[
        "spec.devices.requests[1].exactly.selectors[0].cel.expression"]
    assert "memory is a capacity: read it as device.capacity[\"gpu.nvidia.com\"].memory" in errors[
        "spec.devices.requests[2].exactly.selectors[0].cel.expression"]


def test_constraint_attributes_unknown_unique_and_bool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gaudi = [o.request("g", cls="gaudi.intel.com", count=4)]
    code, found = _lint(capsys, tmp_path, o.claim(*gaudi, constraints=[
        {"matchAttribute": "resource.kubernetes.io/pcieroot"},
        {"matchAttribute": "gaudi.intel.com/serial"},
        {"distinctAttribute": "gaudi.intel.com/healthy"}]))
    assert code == 1
    assert sorted(_found(found)) == [("spec.devices.constraints[0].matchAttribute", "error"),
                                     ("spec.devices.constraints[1].matchAttribute", "warning"),
                                     ("spec.devices.constraints[2].distinctAttribute", "warning")]
    messages = {f["field"]: f["message"] for f in found if f["severity"] != "info"}
    assert "did you mean resource.kubernetes.io/pcieRoot?" in messages["spec.devices.constraints[0].matchAttribute"]
    assert "different on every device: matchAttribute over 4 devices is never satisfied" in messages[
        "spec.devices.constraints[1].matchAttribute"]
    messages = [f["message"] for f in found]  # type: ignore[assignment]
    assert any("at most 2 devices can have distinct values, not 4" in m for m in messages)


@pytest.mark.parametrize(("expression", "message"), [
    (f"{NV}.type == 'gpu' && {NV}.parentUUID == 'x'",
     "gpu.nvidia.com/parentUUID is not published on gpu devices (only on mig devices), which the selectors ask for"),
    (f"{NV}.type == 'mig' && {NV}.parentIndex == 0",
     "gpu.nvidia.com/parentIndex is published on mig devices only by gpu.nvidia.com releases v25.3"),
    (f"{NV}.type == 'vfio' && {NV}.deviceID == '0x2330'", None),
    (f"!({NV}.type == 'gpu') && {NV}.parentUUID == 'x'", None),  # a negation does not pin the type
    (f"({NV}.type == 'gpu' || {NV}.type == 'mig') && {NV}.parentUUID == 'x'", None),
], ids=["mig-only-on-gpu", "mig-by-release", "vfio-ok", "negated", "either"])
def test_attributes_of_other_device_types(expression: str, message: str | None, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _, found = _lint(capsys, tmp_path, o.claim(o.request("r", expression)))
    messages = [f["message"] for f in found if f["severity"] == "warning"]
    assert (messages == []) if message is None else (len(messages) == 1 and message in messages[0]), messages


def test_a_mig_profile_the_product_does_not_offer_is_flagged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expression = f"{NV}.productName == 'NVIDIA H100 80GB HBM3' && {NV}.profile == '1g.5gb'"
    _, found = _lint(capsys, tmp_path, o.claim(o.request("mig", expression, cls="mig.nvidia.com"),
                                               o.request("typo", f"{NV}.profile == '1g.5g'", cls="mig.nvidia.com")))
    assert [f["message"] for f in found if f["severity"] == "warning"] == [
        "NVIDIA H100 80GB HBM3 does not offer the MIG profile 1g.5gb (it offers 1g.10gb, 1g.10gb+me, 1g.20gb, "
        "2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)",
        "no NVIDIA GPU offers a MIG profile '1g.5g'; did you mean 1g.5gb?"]


def test_with_an_inventory_the_mig_profiles_of_its_gpus_are_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("mig", f"{NV}.profile == '1g.5gb'", cls="mig.nvidia.com"))
    _, found = _lint(capsys, tmp_path, claim)
    assert _found(found) == []  # an A100-40GB offers it
    _, found = _lint(capsys, tmp_path, claim, args=("--slices", str(o.H100_SLICES)))
    assert any(f["message"].startswith("no GPU of the inventory offers the MIG profile 1g.5gb: NVIDIA H100 80GB "
                                       "HBM3 offers 1g.10gb") for f in found)


# --- the inventory wins; the config adds ---


def test_what_the_devices_publish_wins_over_the_shipped_schema(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    intel = o.FIXTURES / "resourceslices/intel-gpu-rpl-s-igpu-plus-B580-xe.yaml"
    bare = o.claim(o.request("gpu", "device.attributes['gpu.intel.com'].type == 'gpu'", cls="gpu.intel.com"))
    _, found = _lint(capsys, tmp_path, bare)
    assert _found(found) == [(SEL, "warning")]  # shipped: only v0.11 publishes `type`
    assert "published only by gpu.intel.com releases v0.11" in found[0]["message"]
    claim = o.claim(o.request("gpu", "has(device.attributes['gpu.intel.com'].type)", cls="gpu.intel.com"))
    _, found = _lint(capsys, tmp_path, claim)
    assert _found(found) == []  # read behind has(): devices of other releases cannot make it fail
    _, found = _lint(capsys, tmp_path, claim, args=("--slices", str(intel)))
    assert (SEL, "error") in _found(found)  # these two real devices do not publish it at all
    assert any("no device of gpu.intel.com in the inventory (2 devices) publishes an attribute gpu.intel.com/type "
               "(the shipped schema knows it" in f["message"] for f in found)


def test_config_schemas_add_a_driver_and_replace_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"schemas": [
        {"driver": "fpga.example.org", "releases": ["v1", "v2"],
         "attributes": [{"name": "bitstream", "type": "string"}, {"name": "lanes", "type": "int", "releases": ["v2"]}]},
        {"driver": "gpu.nvidia.com", "replace": True, "attributes": [{"name": "type", "type": "string"}]}]}))
    claim = o.claim(o.request("f", "device.attributes['fpga.example.org'].bitstrem == 'x' && "
                                   "device.attributes['fpga.example.org'].lanes == 4", cls="fpga"),
                    o.request("g", f"{NV}.productName == 'x'"))
    code, found = _lint(capsys, tmp_path, claim, args=("--config", str(config)))
    assert code == 1
    messages = " | ".join(f["message"] for f in found if f["severity"] != "info")
    assert "no release of fpga.example.org (v1, v2) publishes an attribute fpga.example.org/bitstrem; did you mean " \
           "bitstream?" in messages
    assert "fpga.example.org/lanes is published only by fpga.example.org releases v2" in messages
    assert "publishes an attribute gpu.nvidia.com/productName" in messages  # the replaced NVIDIA schema: only `type`
    _, found = _lint(capsys, tmp_path, claim, args=("--config", str(config), "--slices", str(o.H100_SLICES)))
    assert not any("gpu.nvidia.com/productName" in f["message"] for f in found)  # the real devices publish it


# --- explain ---


def test_explain_names_the_schema_and_the_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = o.claim(o.request("gpu", f"{NV}.productName == 'NVIDIA H100 80GB HBM3'"))
    _, found = _lint(capsys, tmp_path, claim, args=("--explain",))
    (info,) = [f for f in found if f["severity"] == "info"]
    assert info["field"] == "spec.devices.requests[0].exactly"
    assert info["explain"]["schemas"][0] == {
        "driver": "gpu.nvidia.com", "schema": "shipped", "releases": ["v25.3", "v25.8", "v25.12", "HEAD"],
        "deviceTypes": ["gpu", "mig", "vfio"], "devices": None,
        "source": registry.registry().schemas["gpu.nvidia.com"].source}
    assert info["explain"]["attributes"] == ["gpu.nvidia.com/productName"] and not info["explain"]["inventory"]
    _, found = _lint(capsys, tmp_path, claim, args=("--explain", "--slices", str(o.H100_SLICES), str(o.CLASSES)))
    (info,) = [f for f in found if f["severity"] == "info"]
    assert info["explain"]["schemas"][0]["schema"] == "inventory" and info["explain"]["schemas"][0]["devices"] == 16
    path = tmp_path / "in.yaml"
    assert main(["lint", str(path), "--explain"]) == 0
    assert ("spec.devices.requests[0].exactly: explain: request gpu checked against gpu.nvidia.com (shipped schema; "
            "releases v25.3, v25.8, v25.12, HEAD; device types gpu, mig, vfio); reads gpu.nvidia.com/productName; "
            "no inventory (--slices): shipped schemas only") in capsys.readouterr().out


# --- real examples: the true positives the schemas find, and nothing else ---


def test_the_upstream_examples_get_only_true_schema_findings(capsys: pytest.CaptureFixture[str]) -> None:
    found: dict[str, list[tuple[str, str, str]]] = {}
    for path in sorted(o.EXAMPLES.rglob("*.yaml")):
        main(["lint", str(path), "-o", "json"])
        for f in json.loads(capsys.readouterr().out or "[]"):
            if any(w in f["message"] for w in ("published only by", "publishes", "never", "MIG profile", "evaluates")):
                found.setdefault(str(path.relative_to(o.EXAMPLES)), []).append(
                    (f["field"], f["severity"], f["message"]))
    assert {name: [(field, severity) for field, severity, _ in items] for name, items in found.items()} == {
        "amd-k8s-gpu-dra-driver/example-partitions-distinct-parents.yaml": [
            ("spec.devices.constraints[0].distinctAttribute", "warning")],
        "amd-k8s-gpu-dra-driver/example-partitions-same-parent.yaml": [
            ("spec.devices.constraints[0].matchAttribute", "warning")],
        "nvidia-dra-driver-gpu/quickstart_v1_gpu-test6.yaml": [
            ("spec.spec.devices.requests[0].exactly.selectors[0].cel.expression", "warning")],
        "nvidia-dra-driver-gpu/fabric-manager-partitioning_resourceClaimTemplates.yaml": [
            ("spec.spec.devices.constraints[0].matchAttribute", "warning")],
    }
    # HEAD's gpu-test6 still selects by `index`, which the driver stopped publishing in v25.8
    assert found["nvidia-dra-driver-gpu/quickstart_v1_gpu-test6.yaml"][0][2].startswith(
        "attribute gpu.nvidia.com/index is published only by gpu.nvidia.com releases v25.3 (not by v25.8, v25.12, "
        "HEAD)")
    # at the examples' own commit (Oct 2025) partitions publish parentDeviceID, not deviceID; since 2026 deviceID
    # is the PCI device id, the same on every MI300X
    for name in ("example-partitions-distinct-parents.yaml", "example-partitions-same-parent.yaml"):
        assert found[f"amd-k8s-gpu-dra-driver/{name}"][0][2].startswith(
            "constraint attribute gpu.amd.com/deviceID is published on amdgpu-partition devices only by gpu.amd.com "
            "releases 2026 (not by 2025)")
    # partition<N> exists only at HEAD, behind the FabricManagerPartitioning gate
    assert found["nvidia-dra-driver-gpu/fabric-manager-partitioning_resourceClaimTemplates.yaml"][0][2].startswith(
        "constraint attribute gpu.nvidia.com/partition2 is published only by gpu.nvidia.com releases HEAD (not by "
        "v25.3, v25.8, v25.12)")


# --- property: names the schema publishes, compared with values of their type, are never flagged ---

_LITERALS = {"int": "1", "bool": "true", "string": "'x'", "version": "semver('1.0.0')"}
_SCHEMAS = [s for s in registry.registry() if s.driver != "resource.kubernetes.io"]


@st.composite
def _reads(draw: st.DrawFn) -> tuple[str, str, str]:
    schema = draw(st.sampled_from(_SCHEMAS))
    entry = draw(st.sampled_from([e for e in schema.attributes if e.type is not None and not e.releases]))
    return schema.driver, f"device.attributes['{entry.domain}']['{entry.name.replace('<N>', '2')}']", entry.type or ""


@settings(max_examples=60, deadline=None)
@given(read=_reads(), typo=st.booleans())
def test_every_published_attribute_passes_and_a_changed_name_does_not(read: tuple[str, str, str], typo: bool) -> None:
    driver, source, kind = read
    if typo:
        source = source[:-2] + "Zq']"
    expression = f"device.driver == '{driver}' && {source} == {_LITERALS[kind]}"
    verdict = validate_object(o.claim(o.request("r", expression, cls="any")), operation="CREATE",
                              inventory=OfflineInventory(), config=o.config())
    assert verdict.allowed
    flagged = [w for w in verdict.warnings if "publishes an attribute" in w]
    assert bool(flagged) == typo, verdict.warnings
    assert not [w for w in verdict.warnings if "never true" in w]


# --- property: the claim limit is the allocator's sum of smallest counts ---

_COUNTS = st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=3), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(requests=_COUNTS, subrequests=st.lists(st.booleans(), min_size=4, max_size=4))
def test_the_claim_limit_error_is_exactly_the_allocators_condition(requests: list[list[int]],
                                                                   subrequests: list[bool]) -> None:
    built = []
    for i, (counts, use_subs) in enumerate(zip(requests, subrequests, strict=False)):
        if use_subs:
            built.append({"name": f"r{i}", "firstAvailable": [
                {"name": f"s{k}", "deviceClassName": "gpu.nvidia.com", "count": c} for k, c in enumerate(counts)]})
        else:
            built.append(o.request(f"r{i}", count=counts[0]))
    total = sum(min(c) if s else c[0] for c, s in zip(requests, subrequests, strict=False))
    verdict = validate_object(o.claim(*built), operation="CREATE", inventory=OfflineInventory(), config=o.config(),
                              lint=True)
    limit_errors = [e for e in verdict.scheduling if "exceeds the claim limit of 32" in e.detail]
    assert verdict.allowed  # admission: the apiserver accepts any count
    assert bool(limit_errors) == (total > 32)
    if limit_errors:
        assert f"number of requested devices {total} exceeds the claim limit of 32" in limit_errors[0].detail


def test_what_each_slice_publishes_is_read_once_and_kept_across_index_changes() -> None:
    import dataclasses

    from gpuclaim.webhook.validate import DeviceIndex
    from gpuclaim.webhook.validate.schemas import SchemaCheck

    slices = [s for s in o.slices(o.H100_SLICES) if s.driver == "gpu.nvidia.com"]
    index = DeviceIndex.build(slices)
    check = SchemaCheck.build((), index, severity="warn")
    assert check.observed is not None and check.observed["gpu.nvidia.com"].devices == 16
    before = [segment.schemas for segment in index.segments]
    changed = dataclasses.replace(slices[0], meta=dataclasses.replace(slices[0].meta, resource_version="999"))
    newer = index.replaced({slices[0].name: changed})
    assert newer is not None and newer is not index
    again = SchemaCheck.build((), newer, severity="warn")
    after = [segment.schemas for segment in newer.segments]
    assert after[1] is before[1]  # the unchanged slice was not read again
    assert after[0] is not before[0] and again.observed == check.observed
