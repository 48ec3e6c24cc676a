"""The admission registrations: fail-safe fields, selectors, and matchConditions CEL that compiles
and sends exactly the pods carrying a mapped GPU resource to the mutating webhook."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from celpy import celtypes
from chart_helpers import NAMESPACE, USER_CA_B64, Rendered, cel_eval, cel_program, render_values
from hypothesis import given, settings
from hypothesis import strategies as st

MAPPED = ("nvidia.com/gpu", "amd.com/gpu")
PREFIXES = ("nvidia.com/mig-",)


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": containers, **spec}
    if init is not None:
        body["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": body}


def ctr(limits: dict[str, str] | None = None, requests: dict[str, str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "busybox"}
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    if resources:
        c["resources"] = resources
    return c


def mutating(rendered: Rendered) -> dict[str, Any]:
    (hook,) = rendered.one("MutatingWebhookConfiguration")["webhooks"]
    return hook


def gpu_condition(rendered: Rendered) -> str:
    (cond,) = mutating(rendered)["matchConditions"]
    return cond["expression"]


def admits(expression: str, obj: dict[str, Any]) -> bool:
    result = cel_eval(expression, object=obj, request={"operation": "CREATE"})
    # An error value (e.g. no such key) would make kube-apiserver apply failurePolicy: never acceptable.
    assert isinstance(result, celtypes.BoolType), f"matchConditions must evaluate to a bool, got {result!r}"
    return bool(result)


SAMPLES = {
    "gpu-pod": (pod([ctr(limits={"nvidia.com/gpu": "1", "cpu": "1"})]), True),
    "plain-pod": (pod([ctr(limits={"cpu": "1", "memory": "1Gi"}, requests={"cpu": "500m"})]), False),
    "no-resources-at-all": (pod([ctr()]), False),
    "mig-pod": (pod([ctr(limits={"nvidia.com/mig-1g.10gb": "1"})]), True),
    "gpu-only-in-init-container": (pod([ctr(limits={"cpu": "1"})], init=[ctr(limits={"nvidia.com/gpu": "2"})]), True),
    "gpu-only-in-requests": (pod([ctr(requests={"amd.com/gpu": "1"})]), True),
    "gpu-in-second-container": (pod([ctr(), ctr(limits={"amd.com/gpu": "1"})]), True),
    "empty-init-containers": (pod([ctr(limits={"cpu": "1"})], init=[]), False),
    "lookalike-name": (pod([ctr(limits={"example.com/nvidia.com/gpu": "1", "nvidia.com/gpu-memory": "1"})]), False),
    "already-converted-has-claims": (
        pod([ctr(limits={"cpu": "1"})], resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpuclaim-x"}]),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_mutating_match_condition_sends_only_pods_with_a_mapped_resource(render: Any, name: str) -> None:
    obj, expected = SAMPLES[name]
    assert admits(gpu_condition(render("default")), obj) is expected


resource_names = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-3g.40gb",
     "nvidia.com/mig-", "example.com/foo", "nvidia.com/gpu.shared", "hugepages-2Mi", "amd.com/gpux"]
)
resource_maps = st.one_of(st.none(), st.dictionaries(resource_names, st.sampled_from(["1", "2", "500m"]), max_size=4))
containers = st.lists(st.builds(ctr, limits=resource_maps, requests=resource_maps), max_size=3)


def reference(obj: dict[str, Any]) -> bool:
    """What the condition must compute, written independently in Python."""
    spec = obj["spec"]
    for c in spec["containers"] + spec.get("initContainers", []):
        res = c.get("resources", {})
        for key in list(res.get("limits", {})) + list(res.get("requests", {})):
            if key in MAPPED or key.startswith(PREFIXES):
                return True
    return False


@settings(max_examples=150, deadline=None)
@given(main=containers.filter(bool), init=st.one_of(st.none(), containers))
def test_match_condition_agrees_with_a_python_reference_on_random_pods(main: Any, init: Any) -> None:
    from chart_helpers import _render

    obj = pod(main, init=init)
    assert admits(gpu_condition(_render("default")), obj) is reference(obj)


def test_match_condition_follows_the_configured_resource_names(render: Any) -> None:
    expression = gpu_condition(render("strict"))  # names: nvidia.com/gpu, gpu.example.com/gpu; no prefixes
    assert admits(expression, pod([ctr(limits={"gpu.example.com/gpu": "1"})]))
    assert not admits(expression, pod([ctr(limits={"nvidia.com/mig-1g.10gb": "1"})]))
    assert not admits(expression, pod([ctr(limits={"amd.com/gpu": "1"})]))


def test_prefix_only_configuration_renders_a_valid_condition() -> None:
    rendered = render_values({"webhook": {"matchResources": {"names": [], "prefixes": ["vendor.example/"]}}})
    expression = gpu_condition(rendered)
    cel_program(expression)
    assert admits(expression, pod([ctr(limits={"vendor.example/anything": "1"})]))
    assert not admits(expression, pod([ctr(limits={"nvidia.com/gpu": "1"})]))


def test_mutating_webhook_is_fail_safe_by_default(render: Any) -> None:
    rendered: Rendered = render("default")
    config = rendered.one("MutatingWebhookConfiguration")
    assert config["metadata"]["labels"]["app.kubernetes.io/name"] == "gpuclaim"
    assert config["metadata"]["labels"]["app.kubernetes.io/instance"] == "gc"
    hook = mutating(rendered)
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 5
    assert hook["reinvocationPolicy"] == "IfNeeded"
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    assert hook["rules"] == [{**pods, "scope": "Namespaced"}]
    assert hook["clientConfig"] == {
        "service": {"name": "gc-gpuclaim-webhook", "namespace": NAMESPACE, "path": "/mutate", "port": 443}
    }


def test_failure_policy_and_timeout_come_from_values(render: Any) -> None:
    rendered: Rendered = render("strict")
    hook = mutating(rendered)
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 3)
    for vhook in rendered.one("ValidatingWebhookConfiguration")["webhooks"]:
        assert vhook["failurePolicy"] == "Fail"


def selects_namespace(hook: dict[str, Any], labels: dict[str, str]) -> bool:
    """Evaluate a matchExpressions-only label selector as kube-apiserver does."""
    for expr in hook["namespaceSelector"]["matchExpressions"]:
        assert expr["operator"] == "NotIn"
        if labels.get(expr["key"]) in expr["values"]:
            return False
    return True


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        ({"kubernetes.io/metadata.name": "ml-team"}, True),
        ({"kubernetes.io/metadata.name": "kube-system"}, False),
        ({"kubernetes.io/metadata.name": NAMESPACE}, False),
        ({"kubernetes.io/metadata.name": "ml-team", "gpuclaim.io/webhook": "disabled"}, False),
        ({"kubernetes.io/metadata.name": "ml-team", "gpuclaim.io/webhook": "enabled"}, True),
    ],
    ids=["ordinary", "kube-system", "release-namespace", "opted-out", "other-label-value"],
)
def test_namespace_selector_excludes_system_own_and_opted_out_namespaces(
    render: Any, labels: dict[str, str], selected: bool
) -> None:
    rendered: Rendered = render("default")
    _dra, pods = rendered.one("ValidatingWebhookConfiguration")["webhooks"]
    for hook in (mutating(rendered), pods):
        assert selects_namespace(hook, labels) is selected
        assert hook["objectSelector"] == {
            "matchExpressions": [{"key": "gpuclaim.io/webhook", "operator": "NotIn", "values": ["disabled"]}]
        }


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        ({"kubernetes.io/metadata.name": "ml-team"}, True),
        ({"kubernetes.io/metadata.name": "kube-system"}, False),
        ({"kubernetes.io/metadata.name": NAMESPACE}, False),
        ({"kubernetes.io/metadata.name": "ml-team", "gpuclaim.io/webhook": "disabled"}, True),
    ],
    ids=["ordinary", "kube-system", "release-namespace", "opt-out-label-ignored"],
)
def test_dra_objects_are_always_validated_the_opt_out_is_for_pod_conversion_only(
    render: Any, labels: dict[str, str], selected: bool
) -> None:
    """Issue 14, finding 6: a claim labelled gpuclaim.io/webhook=disabled skipped every check."""
    for profile in ("default", "strict"):
        dra, _pods = render(profile).one("ValidatingWebhookConfiguration")["webhooks"]
        assert dra["name"] == "dra.validate.gpuclaim.io"
        assert "objectSelector" not in dra  # no label on the object can switch its validation off
        assert selects_namespace(dra, labels) is selected


def test_extra_excluded_namespaces_are_added(render: Any) -> None:
    hook = mutating(render("strict"))
    assert not selects_namespace(hook, {"kubernetes.io/metadata.name": "monitoring"})
    assert not selects_namespace(hook, {"kubernetes.io/metadata.name": "kube-system"})


def test_validating_webhook_covers_dra_objects_and_gpu_pods(render: Any) -> None:
    config = render("default").one("ValidatingWebhookConfiguration")
    dra, pods = config["webhooks"]
    for hook in (dra, pods):
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["failurePolicy"] == "Ignore"
        assert hook["clientConfig"]["service"]["path"] == "/validate"
        assert hook["matchPolicy"] == "Equivalent"
    (rule,) = dra["rules"]
    assert rule["apiGroups"] == ["resource.k8s.io"] and rule["apiVersions"] == ["v1"]
    assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
    assert sorted(rule["resources"]) == ["deviceclasses", "resourceclaims", "resourceclaimtemplates"]
    assert "matchConditions" not in dra
    (prule,) = pods["rules"]
    assert (prule["resources"], prule["operations"]) == (["pods"], ["CREATE"])
    (cond,) = pods["matchConditions"]
    assert admits(cond["expression"], SAMPLES["gpu-pod"][0])
    assert admits(cond["expression"], SAMPLES["already-converted-has-claims"][0])
    assert not admits(cond["expression"], SAMPLES["plain-pod"][0])


def test_validating_webhook_can_be_turned_off(render: Any) -> None:
    assert render("no-validation").of_kind("ValidatingWebhookConfiguration") == []


@pytest.mark.parametrize("values_set", ["default", "cert-manager"])
def test_ca_bundle_is_left_to_the_injector(render: Any, values_set: str) -> None:
    rendered: Rendered = render(values_set)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in rendered.one(kind)["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]


def test_user_secret_mode_puts_the_given_ca_bundle_in_every_webhook(render: Any) -> None:
    rendered: Rendered = render("user-secret")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in rendered.one(kind)["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == USER_CA_B64
            assert base64.b64decode(hook["clientConfig"]["caBundle"]).startswith(b"-----BEGIN CERTIFICATE-----")
    for dep in rendered.of_kind("Deployment"):
        (tls,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
        assert tls["secret"]["secretName"] == "my-webhook-tls"
