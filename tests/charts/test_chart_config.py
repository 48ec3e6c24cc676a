"""The chart's config ConfigMap is a valid gpuclaim config (dra.config.load_config), the config
part of values.schema.json is exactly dra/config.py's schema, and the chart's admission selectors
agree with the config the webhook runs with."""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import pytest
import yaml
from celpy import celtypes
from chart_helpers import REPO, VALUE_SETS, Rendered, cel_eval, render_values
from config_schema import SCHEMA_FILE, config_schema

from gpuclaim.dra import config as gpuclaim_config


def loaded(rendered: Rendered) -> gpuclaim_config.Config:
    text = rendered.one("ConfigMap", "-config")["data"]["config.yaml"]
    return gpuclaim_config.load_config(yaml.safe_load(text))


@pytest.mark.parametrize("values_set", sorted(VALUE_SETS))
def test_the_rendered_config_loads_without_errors(render: Any, values_set: str) -> None:
    loaded(render(values_set))


def test_the_kind_run_config_loads_and_points_converted_pods_at_the_second_scheduler() -> None:
    values = yaml.safe_load((REPO / "e2e" / "kind" / "values.yaml").read_text())
    config = loaded(render_values(values))
    assert config.conversion.scheduler_name == "gpuclaim-scheduler"
    assert config.conversion.mapping_for("gpu.example.com/gpu") is not None


def test_second_scheduler_name_reaches_the_loaded_config(render: Any) -> None:
    assert loaded(render("second-scheduler")).conversion.scheduler_name == "gpuclaim-scheduler"
    assert loaded(render("default")).conversion.scheduler_name is None


def test_values_schema_config_section_is_generated_from_dra_config() -> None:
    on_disk = json.loads(SCHEMA_FILE.read_text())["properties"]["config"]
    assert on_disk == config_schema(), "regenerate with: python tests/charts/config_schema.py"


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"logging": {"level": "loud"}}, "/config/logging/level"),
        ({"conversion": {"mappings": [{"resource": "a.example/gpu"}]}}, "/config/conversion/mappings/0"),
        ({"extender": {"policy": "random"}}, "/config/extender/policy"),
        ({"webhook": {"maxBodyBytes": "3Mi"}}, "/config/webhook/maxBodyBytes"),
        ({"cluster": {"staleAfterSecs": 5}}, "/config/cluster"),
    ],
    ids=["enum", "missing-required-key", "extender-enum", "wrong-type", "unknown-key"],
)
def test_config_mistakes_fail_at_install_with_the_key_path(
    chart: helm.Chart, config: dict[str, Any], where: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as err:
        chart.validate_schema({"config": config})
    assert where in str(err.value)
    # and the loader, which runs in the pod, agrees that the config is bad
    with pytest.raises(gpuclaim_config.ConfigError):
        gpuclaim_config.load_config(config)


def selected(rendered: Rendered, resource: str) -> bool:
    (hook,) = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]}}
    result = cel_eval(hook["matchConditions"][0]["expression"], object=pod)
    assert isinstance(result, celtypes.BoolType)
    return bool(result)


def example(mapping: gpuclaim_config.ResourceMapping) -> str:
    return mapping.resource[:-1] + "1g.10gb" if mapping.resource.endswith("*") else mapping.resource


def test_default_match_resources_select_exactly_the_default_mappings(render: Any) -> None:
    rendered: Rendered = render("default")
    config = loaded(rendered)
    for mapping in config.conversion.mappings:
        assert selected(rendered, example(mapping)), mapping.resource
    values = rendered.values["webhook"]["matchResources"]
    expected_names = [m.resource for m in gpuclaim_config.DEFAULT_MAPPINGS if not m.resource.endswith("*")]
    expected_prefixes = [m.resource[:-1] for m in gpuclaim_config.DEFAULT_MAPPINGS if m.resource.endswith("*")]
    assert (values["names"], values["prefixes"]) == (expected_names, expected_prefixes)


def test_configured_mappings_drive_the_match_conditions() -> None:
    mappings = [
        {"resource": "gpu.example.com/gpu", "deviceClassName": "gpu.example.com"},
        {"resource": "vendor.example/part-*", "deviceClassName": "parts.vendor.example"},
    ]
    rendered = render_values({"config": {"conversion": {"mappings": mappings}}})
    config = loaded(rendered)
    for mapping in config.conversion.mappings:
        assert selected(rendered, example(mapping))
    # nvidia.com/gpu is no longer mapped, so its pods no longer pay for a webhook call
    assert not selected(rendered, "nvidia.com/gpu")
    assert not selected(rendered, "vendor.example/part")


def test_the_opt_out_label_of_the_selectors_is_the_one_the_webhook_honours(render: Any) -> None:
    rendered: Rendered = render("default")
    opt_out = loaded(rendered).conversion.opt_out
    (hook,) = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    namespace_rule = hook["namespaceSelector"]["matchExpressions"][1]
    assert (namespace_rule["key"], namespace_rule["values"]) == (opt_out.namespace_label, [opt_out.value])
    # pods: the selector reads a label, the webhook an annotation of the same key and value
    pod_rule = hook["objectSelector"]["matchExpressions"][0]
    assert (pod_rule["key"], pod_rule["values"]) == (opt_out.annotation, [opt_out.value])
