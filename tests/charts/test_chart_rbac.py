"""RBAC is exactly what each component needs: every (subject, verb, resource, name) grant the chart
renders is listed here, so a new permission fails this test until it is justified."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from chart_helpers import NAMESPACE, Rendered, cel_eval, render_values

from gpuclaim.dra.config import load_config

# (namespace or "*" for cluster-wide, apiGroup, resource, verb, resourceName or "*")
Grant = tuple[str, str, str, str, str]

CLUSTER_VIEW: set[Grant] = {
    ("*", "resource.k8s.io", res, verb, "*")
    for res in ("resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates")
    for verb in ("list", "watch")
} | {("*", "", res, verb, "*") for res in ("namespaces", "nodes") for verb in ("list", "watch")}

# the extender alone: the DeviceTaintRules kube-scheduler applies before allocating (dra/taints.py)
TAINT_RULES: set[Grant] = {("*", "resource.k8s.io", "devicetaintrules", verb, "*") for verb in ("list", "watch")}
#: the fleet page's access check (gpuclaim/fleet/access.py): reviews are answered, never stored
FLEET_REVIEWS: set[Grant] = {("*", "authentication.k8s.io", "tokenreviews", "create", "*"),
                             ("*", "authorization.k8s.io", "subjectaccessreviews", "create", "*")}

WEBHOOK_WRITES: set[Grant] = {
    ("*", "resource.k8s.io", res, verb, "*")
    for res in ("resourceclaimtemplates", "resourceclaims")
    for verb in ("create", "get")  # get: compare the spec of an object that answered 409
}

# garbage collection (config.gc, on by default): delete what gpuclaim made once idle, patch its last-used
# annotation on re-use, list the pods that may still reference it; one Lease for the elected collector
GC: set[Grant] = {
    ("*", "resource.k8s.io", res, verb, "*")
    for res in ("resourceclaimtemplates", "resourceclaims")
    for verb in ("delete", "patch")
} | {
    ("*", "", "pods", "list", "*"),
    (NAMESPACE, "coordination.k8s.io", "leases", "create", "*"),
    (NAMESPACE, "coordination.k8s.io", "leases", "get", "gc-gpuclaim-webhook-gc"),
    (NAMESPACE, "coordination.k8s.io", "leases", "update", "gc-gpuclaim-webhook-gc"),
}

# the quota controller (config.quota, opt-in): read every ResourceQuota, write only its own (kube/quota.py), watch
# them for the admission pre-check; one Lease for the elected controller
QUOTA: set[Grant] = {
    ("*", "", "resourcequotas", verb, "*") for verb in ("list", "watch", "create", "update", "delete")
} | {
    (NAMESPACE, "coordination.k8s.io", "leases", "create", "*"),
    (NAMESPACE, "coordination.k8s.io", "leases", "get", "gc-gpuclaim-webhook-quota"),
    (NAMESPACE, "coordination.k8s.io", "leases", "update", "gc-gpuclaim-webhook-quota"),
}

CERTS: set[Grant] = {
    (NAMESPACE, "", "secrets", "get", "gc-gpuclaim-tls"),
    (NAMESPACE, "", "secrets", "update", "gc-gpuclaim-tls"),
    # create cannot be limited by name; the ValidatingAdmissionPolicy narrows it (see below)
    (NAMESPACE, "", "secrets", "create", "*"),
    ("*", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "list", "*"),
    ("*", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "list", "*"),
    ("*", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update", "gc-gpuclaim-webhook"),
    ("*", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", "gc-gpuclaim-webhook"),
}

SCHEDULER_OWN: set[Grant] = {
    (NAMESPACE, "coordination.k8s.io", "leases", "create", "*"),
    (NAMESPACE, "coordination.k8s.io", "leases", "get", "gpuclaim-scheduler"),
    (NAMESPACE, "coordination.k8s.io", "leases", "update", "gpuclaim-scheduler"),
}


def grants(rendered: Rendered) -> tuple[dict[str, set[Grant]], dict[str, set[tuple[str, str, str]]]]:
    """Per ServiceAccount: the grants from roles the chart renders, and bindings to roles it does not render."""
    roles: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for obj in rendered:
        if obj["kind"] in ("Role", "ClusterRole"):
            roles[(obj["kind"], obj["metadata"].get("namespace", "*"), obj["metadata"]["name"])] = obj["rules"]
    out: dict[str, set[Grant]] = {}
    external: dict[str, set[tuple[str, str, str]]] = {}
    for obj in rendered:
        if obj["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = obj["roleRef"]
        scope = obj["metadata"].get("namespace", "*")
        role_ns = scope if ref["kind"] == "Role" else "*"
        for subject in obj["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["namespace"] == NAMESPACE
            sa = subject["name"]
            rules = roles.get((ref["kind"], role_ns, ref["name"]))
            if rules is None:
                external.setdefault(sa, set()).add((obj["kind"], scope, ref["name"]))
                continue
            for rule in rules:
                assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
                for group in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for verb in rule["verbs"]:
                            for name in rule.get("resourceNames", ["*"]):
                                assert "*" not in (group, res, verb), f"wildcard in {rule}"
                                out.setdefault(sa, set()).add((scope, group, res, verb, name))
    return out, external


def test_default_install_grants_exactly_the_needed_verbs(render: Any) -> None:
    granted, external = grants(render("default"))
    assert granted == {
        "gc-gpuclaim-webhook": CLUSTER_VIEW | WEBHOOK_WRITES | GC,
        "gc-gpuclaim-extender": CLUSTER_VIEW | TAINT_RULES | FLEET_REVIEWS,
        "gc-gpuclaim-certs": CERTS,
    }
    assert external == {}


def test_without_garbage_collection_the_webhook_deletes_nothing_and_has_no_lease(render: Any) -> None:
    rendered: Rendered = render("no-gc")
    granted, _ = grants(rendered)
    assert granted["gc-gpuclaim-webhook"] == CLUSTER_VIEW | WEBHOOK_WRITES
    assert not [o for o in rendered if o["metadata"]["name"] == "gc-gpuclaim-webhook-gc"]


def test_the_lease_the_role_names_is_the_one_the_webhook_config_uses(render: Any) -> None:
    config = yaml.safe_load(render("default").one("ConfigMap", "-config")["data"]["config.yaml"])
    assert config["gc"]["leaseName"] == "gc-gpuclaim-webhook-gc"
    assert load_config(config).gc.lease_name == "gc-gpuclaim-webhook-gc"
    no_gc = yaml.safe_load(render("no-gc").one("ConfigMap", "-config")["data"]["config.yaml"])
    # exactly the values: no lease name for a collector that never runs
    assert no_gc["gc"] == {"enabled": False} and set(no_gc) == {"gc", "webhook", "extender"}  # + the client CAs


def test_the_quota_controller_is_opt_in_and_gets_its_own_lease(render: Any) -> None:
    granted, _ = grants(render("quota"))
    assert granted["gc-gpuclaim-webhook"] == CLUSTER_VIEW | WEBHOOK_WRITES | GC | QUOTA
    config = yaml.safe_load(render("quota").one("ConfigMap", "-config")["data"]["config.yaml"])
    assert load_config(config).quota.lease_name == "gc-gpuclaim-webhook-quota"
    default, _ = grants(render("default"))
    assert not {g for g in default["gc-gpuclaim-webhook"] if g[2] == "resourcequotas"}


def test_the_extender_can_write_nothing(render: Any) -> None:
    granted, _ = grants(render("default"))
    # its only `create`s are the fleet page's reviews, which the apiserver answers and never stores
    assert {g[3] for g in granted["gc-gpuclaim-extender"] - FLEET_REVIEWS} == {"list", "watch"}
    without_fleet, _ = grants(render("no-fleet"))
    assert without_fleet["gc-gpuclaim-extender"] == CLUSTER_VIEW | TAINT_RULES


@pytest.mark.parametrize("values_set", ["cert-manager", "user-secret"])
def test_without_builtin_certs_nobody_touches_secrets_or_webhook_configurations(render: Any, values_set: str) -> None:
    granted, _ = grants(render(values_set))
    assert granted == {"gc-gpuclaim-webhook": CLUSTER_VIEW | WEBHOOK_WRITES | GC,
                       "gc-gpuclaim-extender": CLUSTER_VIEW | TAINT_RULES | FLEET_REVIEWS}


def test_no_extender_means_no_extender_service_account_or_binding(render: Any) -> None:
    rendered: Rendered = render("no-extender")
    granted, _ = grants(rendered)
    assert set(granted) == {"gc-gpuclaim-webhook", "gc-gpuclaim-certs"}
    assert not [o for o in rendered if o["metadata"]["name"] == "gc-gpuclaim-extender"]


def test_second_scheduler_gets_the_upstream_roles_and_only_its_own_lease(render: Any) -> None:
    granted, external = grants(render("second-scheduler"))
    assert granted["gc-gpuclaim-scheduler"] == SCHEDULER_OWN
    # As kubernetes.io "Configure Multiple Schedulers" prescribes.
    assert external == {
        "gc-gpuclaim-scheduler": {
            ("ClusterRoleBinding", "*", "system:kube-scheduler"),
            ("ClusterRoleBinding", "*", "system:volume-scheduler"),
            ("RoleBinding", "kube-system", "extension-apiserver-authentication-reader"),
        }
    }


def test_secret_create_is_narrowed_to_the_one_tls_secret_by_an_admission_policy(render: Any) -> None:
    rendered: Rendered = render("default")
    policy = rendered.one("ValidatingAdmissionPolicy")
    binding = rendered.one("ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": NAMESPACE
    }
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["secrets"] and "CREATE" in rule["operations"]

    def run(expr: str, **activation: Any) -> bool:
        return bool(cel_eval(expr, **activation))

    (condition,) = spec["matchConditions"]
    certs_user = {"userInfo": {"username": f"system:serviceaccount:{NAMESPACE}:gc-gpuclaim-certs"}}
    other_user = {"userInfo": {"username": f"system:serviceaccount:{NAMESPACE}:gc-gpuclaim-webhook"}}
    assert run(condition["expression"], request=certs_user)
    assert not run(condition["expression"], request=other_user)

    (validation,) = spec["validations"]
    tls = {"metadata": {"name": "gc-gpuclaim-tls"}, "type": "kubernetes.io/tls"}
    token = {"metadata": {"name": "gc-gpuclaim-tls"}, "type": "kubernetes.io/service-account-token"}
    other = {"metadata": {"name": "anything-else"}, "type": "kubernetes.io/tls"}
    assert run(validation["expression"], object=tls)
    assert not run(validation["expression"], object=token)
    assert not run(validation["expression"], object=other)


def test_the_audit_cluster_role_lists_exactly_what_the_audit_reads_and_is_bound_to_nobody(render: Any) -> None:
    from gpuclaim.audit.sources import LISTED

    rendered: Rendered = render("default")
    (role,) = [o for o in rendered if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gc-gpuclaim-audit"]
    granted = {(group, res, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for res in rule["resources"] for verb in rule["verbs"]}
    assert granted == {(v.rpartition("/")[0], plural, "list") for _, v, plural in LISTED}
    assert not [o for o in rendered if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and o["roleRef"]["name"] == "gc-gpuclaim-audit"]


def test_the_fleet_port_adds_only_token_and_access_reviews_to_the_extender() -> None:
    """With the fleet port on, by the chart's fleet.enabled (the default) or by config fleet.listen, the extender
    asks TokenReview and SubjectAccessReview (docs/fleet.md); with neither, not even that."""
    for values in ({}, {"fleet": {"enabled": False}, "config": {"fleet": {"listen": "0.0.0.0:8890"}}}):
        granted, external = grants(render_values(values))
        assert granted["gc-gpuclaim-extender"] == CLUSTER_VIEW | TAINT_RULES | FLEET_REVIEWS, values
        assert external == {}
    granted, _ = grants(render_values({"fleet": {"enabled": False}}))
    assert granted["gc-gpuclaim-extender"] == CLUSTER_VIEW | TAINT_RULES
