"""The config file loader: defaults, typed sections, and every problem reported with its key path."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra import config as cfg
from gpuclaim.dra.config import ConfigError, load_config


def issues(data: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(data)
    return [str(i) for i in info.value.issues]


def test_no_file_and_empty_file_give_the_defaults() -> None:
    assert load_config(None) == load_config({}) == cfg.Config()
    c = load_config(None)
    assert [m.resource for m in c.conversion.mappings] == ["nvidia.com/gpu", "nvidia.com/mig-*", "amd.com/gpu"]
    assert c.conversion.topology.mode == "firstAvailable"
    assert c.conversion.topology.attributes == ("resource.kubernetes.io/pcieRoot",)
    assert c.webhook.max_body_bytes == 3 * 1024 * 1024
    assert c.validation.runtime_error == "deny" and c.validation.no_match == "warn"
    assert c.extender.policy == "binpack"


def test_default_mappings_resolve_gpu_mig_and_amd() -> None:
    conversion = load_config(None).conversion
    gpu = conversion.mapping_for("nvidia.com/gpu")
    mig = conversion.mapping_for("nvidia.com/mig-1g.10gb")
    amd = conversion.mapping_for("amd.com/gpu")
    assert gpu and gpu.device_class_name == "gpu.nvidia.com" and gpu.selectors_for("nvidia.com/gpu") == ()
    assert mig and mig.device_class_name == "mig.nvidia.com"
    (selector,) = mig.selectors_for("nvidia.com/mig-1g.10gb")
    assert "profile == '1g.10gb'" in selector and selector.startswith("'profile' in device.attributes")
    assert amd and amd.device_class_name == "gpu.amd.com"
    assert conversion.mapping_for("nvidia.com/mig-") is None
    assert conversion.mapping_for("example.com/fpga") is None


def test_a_full_file_is_read_into_typed_sections() -> None:
    text = """
conversion:
  mappings:
  - resource: nvidia.com/gpu
    deviceClassName: h100.example.com
    selectors: ["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"]
  topology: {mode: required, attributes: [resource.kubernetes.io/pcieRoot, gpu.nvidia.com/parentUUID]}
  gfdMigration: {enabled: false}
  excludedNamespaces: [kube-system, monitoring]
  schedulerName: gpu-scheduler
validation: {runtimeError: warn, noMatch: deny, podPolicy: warn}
webhook:
  listen: "[::]:9443"
  tls: {minVersion: "1.3", certFile: /tls/tls.crt, keyFile: /tls/tls.key}
  maxBodyBytes: 1048576
extender:
  policy: spread
  topologyAttributes: [{name: resource.kubernetes.io/pcieRoot, weight: 3}]
  productFacts: [{productName: NVIDIA H100, nvlinkDomain: none}]
cluster: {staleAfterSeconds: 30, backoff: {capSeconds: 5}}
certs: {reloadIntervalSeconds: 30}
logging: {level: debug, format: text}
"""
    c = load_config(yaml.safe_load(text))
    assert c.conversion.mappings == (
        cfg.ResourceMapping(
            resource="nvidia.com/gpu",
            device_class_name="h100.example.com",
            selectors=("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",),
        ),
    )
    assert c.conversion.topology == cfg.TopologyConfig(
        "required", ("resource.kubernetes.io/pcieRoot", "gpu.nvidia.com/parentUUID")
    )
    assert c.conversion.gfd_migration.enabled is False and c.conversion.gfd_migration.keep_node_selector is True
    assert c.conversion.scheduler_name == "gpu-scheduler"
    assert c.validation == cfg.ValidationConfig(runtime_error="warn", no_match="deny", pod_policy="warn")
    assert c.webhook.listen == "[::]:9443" and c.webhook.tls.min_version == "1.3"
    assert c.extender.topology_attributes == (cfg.TopologyAttribute("resource.kubernetes.io/pcieRoot", 3.0),)
    assert isinstance(c.extender.topology_attributes[0].weight, float)
    assert c.extender.product_facts[0].nvlink_domain == "none"
    assert c.cluster.backoff.cap_seconds == 5.0 and c.cluster.backoff.initial_seconds == 0.5
    assert c.logging.level == "debug"
    assert c.certs.reload_interval_seconds == 30.0


def test_the_config_is_immutable() -> None:
    c = load_config(None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.webhook.listen = "x"  # type: ignore[misc]


CASES = [
    ("unknown-top", {"bogus": 1}, "bogus: unknown key"),
    ("unknown-nested", {"webhook": {"tls": {"minVerison": "1.3"}}}, "webhook.tls.minVerison: unknown key"),
    (
        "wrong-type-in-list",
        {
            "conversion": {
                "mappings": [{"resource": "a.io/x", "deviceClassName": "a"}] * 2
                + [{"resource": "b.io/y", "deviceClassName": 3}]
            }
        },
        "conversion.mappings[2].deviceClassName: expected a string, got int",
    ),
    (
        "missing-required",
        {"conversion": {"mappings": [{"resource": "a.io/x"}]}},
        "conversion.mappings[0].deviceClassName: required key is missing",
    ),
    ("bool-is-not-int", {"webhook": {"maxBodyBytes": True}}, "webhook.maxBodyBytes: expected an integer, got bool"),
    ("section-not-mapping", {"webhook": [1]}, "webhook: expected a mapping, got list"),
    ("bad-choice", {"extender": {"policy": "random"}}, "extender.policy: must be one of binpack, spread, got 'random'"),
    (
        "yaml-off",
        yaml.safe_load("conversion: {topology: {mode: off}}"),
        "conversion.topology.mode: must be one of firstAvailable, required, off, got bool False",
    ),
    ("bad-listen", {"extender": {"listen": "localhost"}}, "extender.listen: must be HOST:PORT"),
    ("bad-port", {"webhook": {"listen": ":70000"}}, "webhook.listen: must be HOST:PORT"),
    ("negative", {"cluster": {"staleAfterSeconds": -1}}, "cluster.staleAfterSeconds: must be greater than zero"),
    (
        "not-fq",
        {"conversion": {"topology": {"attributes": ["pcieRoot"]}}},
        "conversion.topology.attributes: must be fully qualified",
    ),
    (
        "bad-class",
        {"conversion": {"mappings": [{"resource": "a.io/x", "deviceClassName": "Bad Class"}]}},
        "conversion.mappings[0].deviceClassName: must be a lowercase RFC 1123",
    ),
    (
        "bad-resource",
        {"conversion": {"mappings": [{"resource": "gpu", "deviceClassName": "a"}]}},
        "conversion.mappings[0].resource: must be an extended resource name",
    ),
    (
        "dup-mapping",
        {"conversion": {"mappings": [{"resource": "a.io/x", "deviceClassName": "a"}] * 2}},
        "conversion.mappings[1].resource: duplicate mapping",
    ),
    ("half-tls", {"webhook": {"tls": {"certFile": "/c"}}}, "webhook.tls: certFile and keyFile must be set together"),
    ("removed-cert-key", {"certs": {"caOverlapDays": 400}}, "certs.caOverlapDays: unknown key"),
    ("top-not-mapping", ["a"], "expected a mapping, got list"),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_names_the_key_path(data: Any, expected: str) -> None:
    found = issues(data)
    assert any(i.startswith(expected) for i in found), found


@pytest.mark.parametrize(("gc", "expected"), [
    ({"idleSeconds": 0}, "gc.idleSeconds: must be greater than zero"),
    ({"intervalSeconds": -1}, "gc.intervalSeconds: must be greater than zero"),
    ({"leaseName": "Not_A_Name"}, "gc.leaseName: must be a lowercase RFC 1123 subdomain"),
    ({"leaseNamespace": "a.b"}, "gc.leaseNamespace: must be a namespace name"),
    ({"leaseDurationSeconds": 10}, "gc.leaseDurationSeconds: must be greater than gc.renewDeadlineSeconds"),
    ({"retryPeriodSeconds": 9}, "gc.renewDeadlineSeconds: must be greater than 1.2 x gc.retryPeriodSeconds"),
    ({"dryRun": "yes"}, "gc.dryRun: expected a boolean"),
], ids=["idle-zero", "interval-negative", "lease-name", "lease-namespace", "duration-vs-deadline",
        "deadline-vs-retry", "dry-run-type"])
def test_gc_settings_are_checked_like_client_go_checks_its_election(gc: dict[str, Any], expected: str) -> None:
    found = issues({"gc": gc})
    assert any(i.startswith(expected) for i in found), found


def test_gc_defaults_are_one_hour_idle_and_client_go_lease_timings() -> None:
    gc = load_config(None).gc
    assert (gc.enabled, gc.idle_seconds, gc.dry_run, gc.lease_name) == (True, 3600.0, False, "gpuclaim-gc")
    assert (gc.lease_duration_seconds, gc.renew_deadline_seconds, gc.retry_period_seconds) == (15.0, 10.0, 2.0)


def test_the_quota_controller_is_opt_in() -> None:
    quota = load_config(None).quota
    assert (quota.enabled, quota.precheck, quota.interval_seconds, quota.lease_name) == (False, True, 10.0,
                                                                                         "gpuclaim-quota")
    with pytest.raises(ConfigError, match=r"quota\.intervalSeconds"):
        load_config({"quota": {"intervalSeconds": 0}})


def test_several_errors_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"webhook": {"listen": 1, "maxBodyBytes": "x"}, "extender": {"policy": 2}, "nope": {}})
    assert len(info.value.issues) == 4
    assert str(info.value).startswith("config: 4 errors: ")


def test_schema_description_lists_camel_case_keys() -> None:
    keys = cfg.config_keys()
    assert set(keys) == {"conversion", "validation", "webhook", "extender", "cluster", "certs", "gc", "quota",
                         "mixedNodes", "logging", "kubernetes", "schemas", "fleet"}
    assert keys["kubernetes"] == {"version": "string", "featureGates": {"<name>": "bool"}}
    assert keys["gc"]["idleSeconds"] == "number"
    assert keys["webhook"]["maxBodyBytes"] == "int"
    assert keys["conversion"]["topology"]["mode"] == ["firstAvailable", "required", "off"]


# --- property: wrong types anywhere give path-named errors, never a traceback ---

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10)
_values = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6
)


def _all_key_paths(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for key, sub in schema.items():
        out.append((*prefix, key))
        if isinstance(sub, dict):
            out += _all_key_paths(sub, (*prefix, key))
    return out


KEY_PATHS = _all_key_paths(cfg.config_keys())


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(KEY_PATHS), value=_values)
def test_any_value_at_any_key_loads_or_fails_with_that_key_path(path: tuple[str, ...], value: Any) -> None:
    data: dict[str, Any] = {}
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    try:
        load_config(data)
    except ConfigError as exc:
        dotted = ".".join(path)
        assert exc.issues
        assert all(i.path.startswith(dotted) or i.path.startswith(path[0]) for i in exc.issues), exc.issues


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(st.text(max_size=12) | st.integers(), _values, max_size=4))
def test_arbitrary_documents_never_raise_anything_but_config_error(data: dict[Any, Any]) -> None:
    try:
        load_config(data)
    except ConfigError as exc:
        assert all(str(i) for i in exc.issues)


@pytest.mark.parametrize(("value", "bound"), [
    ("0.0.0.0:8443", ("0.0.0.0", 8443)), (":9090", ("0.0.0.0", 9090)), ("[::]:8888", ("::", 8888)),
    ("[::1]:0", ("::1", 0)), ("gpuclaim.example:443", ("gpuclaim.example", 443)),
])  # fmt: skip
def test_split_listen_gives_the_address_both_servers_bind(value: str, bound: tuple[str, int]) -> None:
    assert load_config({"extender": {"listen": value}}).extender.listen == value  # the config accepts it
    assert cfg.split_listen(value) == bound


# --- kubernetes: the version and gates gpuclaim models (issue 24) ---


def test_kubernetes_version_and_gates_load_into_a_model() -> None:
    kube = load_config({"kubernetes": {"version": "v1.36.3", "featureGates": {"DRAConsumableCapacity": False}}})
    resolved = kube.kubernetes.model("v1.37.2")  # a pinned version wins over the cluster's
    assert resolved.model.name == "1.36" and not resolved.model.gate("DRAConsumableCapacity")
    unpinned = load_config({}).kubernetes
    assert unpinned.model("v1.35.4-eks-1").model.name == "1.35" and unpinned.model().model.name == "1.37"


@pytest.mark.parametrize(("section", "message"), [
    ({"version": "1.33"}, "kubernetes.version: Kubernetes 1.33 is not supported (supported: 1.34 to 1.37)"),
    ({"version": "latest"}, "kubernetes.version: must be a Kubernetes version such as 1.37"),
    ({"version": 1.36}, "kubernetes.version: expected a string, got float"),
    ({"featureGates": {"DRAFoo": True}}, "kubernetes.featureGates.DRAFoo: feature gate 'DRAFoo' does not exist"),
    ({"featureGates": {"DRAConsumableCapacity": "off"}},
     "kubernetes.featureGates.DRAConsumableCapacity: expected a boolean, got str"),
    ({"version": "1.35", "featureGates": {"DRADerivedAttributes": True}},
     "kubernetes.featureGates.DRADerivedAttributes: feature gate 'DRADerivedAttributes' does not exist in "
     "Kubernetes 1.35"),
    ({"version": "1.37", "featureGates": {"DRAExtendedResource": False}},
     "kubernetes.featureGates.DRAExtendedResource: feature gate 'DRAExtendedResource' is locked to true"),
], ids=["too-old", "not-a-version", "a-number", "unknown-gate", "not-a-bool", "gate-of-a-later-version",
        "locked-gate"])
def test_a_bad_kubernetes_section_is_an_error_naming_the_key(section: dict[str, Any], message: str) -> None:
    assert any(i.startswith(message) for i in issues({"kubernetes": section})), issues({"kubernetes": section})


def test_an_unpinned_gate_is_accepted_when_some_supported_version_has_it() -> None:
    # DRAExtendedResource is locked on only in 1.37: whether the cluster may turn it off depends on its version
    assert load_config({"kubernetes": {"featureGates": {"DRAExtendedResource": False}}})
