"""The chart's fleet-view parts (docs/fleet.md): the extender's fleet port and Service port, the viewer roles (the
exact rules, bound to whom the values say), and the opt-in Grafana dashboard, whose queries use only the metrics
gpuclaim/fleet/metrics.py exports, with only their labels."""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import pytest
from chart_helpers import NAMESPACE, RELEASE, Rendered

from gpuclaim.fleet import metrics

RBAC = "rbac.authorization.k8s.io"
LABELS = {metrics.DEVICES: {"node", "driver", "model", "state"},
          metrics.LARGEST_FREE_TIGHT_GROUP: {"node", "driver"}, metrics.STRANDED: {"node", "driver"}}
PROMQL_WORDS = {"sum", "by", "max", "count", "topk", "or", "vector", "without", "label_values"}


def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(group, res, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for res in rule["resources"] for verb in rule["verbs"]}


def named(rendered: Rendered, kind: str, suffix: str) -> list[dict[str, Any]]:
    return [o for o in rendered.of_kind(kind) if o["metadata"]["name"].endswith(suffix)]


def test_the_extender_serves_the_fleet_on_its_own_port_and_the_service_exposes_it(render: Any) -> None:
    rendered: Rendered = render("fleet")
    (container,) = rendered.one("Deployment", "-extender")["spec"]["template"]["spec"]["containers"]
    assert "--fleet-listen=0.0.0.0:9444" in container["args"]
    assert {"name": "fleet", "containerPort": 9444, "protocol": "TCP"} in container["ports"]
    ports = {p["name"]: p for p in rendered.one("Service", "-extender")["spec"]["ports"]}
    assert ports["fleet"] == {"name": "fleet", "port": 8080, "targetPort": "fleet", "protocol": "TCP"}
    # never on the webhook, never on the scheduler-facing port
    (webhook,) = rendered.one("Deployment", "-webhook")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in webhook["args"] if a.startswith("--fleet")]
    assert ports["https"]["targetPort"] == "https"


def test_without_the_fleet_view_there_is_no_fleet_port(render: Any) -> None:
    rendered: Rendered = render("no-fleet")
    (container,) = rendered.one("Deployment", "-extender")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--fleet")]
    assert [p["name"] for p in container["ports"]] == ["https", "metrics"]
    assert [p["name"] for p in rendered.one("Service", "-extender")["spec"]["ports"]] == ["https", "metrics"]


def test_the_fleet_viewer_cluster_role_grants_exactly_the_reads_of_the_view_and_is_bound_to_nobody(
        render: Any) -> None:
    rendered: Rendered = render("default")
    (role,) = named(rendered, "ClusterRole", "-fleet-viewer")
    # list pods + list resourceclaims cluster-wide is what the page's SubjectAccessReview asks for the whole
    # fleet; the rest is what `gpuclaim fleet` lists live (tests/test_fleet_command.py checks they agree)
    assert granted(role) == {("", "pods", "list"), ("", "nodes", "list"),
                             *(("resource.k8s.io", r, "list") for r in ("resourceclaims", "resourceslices",
                                                                       "deviceclasses", "devicetaintrules"))}
    assert not [o for o in rendered if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and "fleet-viewer" in o["roleRef"]["name"]]
    # the extender's own right to ask who a viewer is (TokenReview, SubjectAccessReview): tests/charts/test_chart_rbac.py
    (reviews,) = named(rendered, "ClusterRoleBinding", "-extender-fleet-reviews")
    assert reviews["subjects"] == [{"kind": "ServiceAccount", "name": f"{RELEASE}-gpuclaim-extender",
                                    "namespace": NAMESPACE}]
    assert not named(rendered, "Role", "-fleet-viewer") and not named(rendered, "ClusterRole", "-fleet-devices")
    assert not named(rendered, "ConfigMap", "-fleet-dashboard")


def test_viewers_and_namespace_viewers_get_the_bindings_the_values_name(render: Any) -> None:
    rendered: Rendered = render("fleet")
    values = rendered.values["fleet"]["rbac"]
    (binding,) = named(rendered, "ClusterRoleBinding", "-fleet-viewer")
    assert binding["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": f"{RELEASE}-gpuclaim-fleet-viewer"}
    assert binding["subjects"] == values["viewers"]
    roles = {r["metadata"]["namespace"]: r for r in named(rendered, "Role", "-fleet-viewer")}
    assert set(roles) == {"team-a", "team-b"}
    for entry in values["namespaceViewers"]:
        # the pods and claims of that namespace only: what SubjectAccessReview finds for a filtered view
        assert granted(roles[entry["namespace"]]) == {("", "pods", "list"), ("resource.k8s.io", "resourceclaims",
                                                                               "list")}
        (bound,) = [b for b in named(rendered, "RoleBinding", "-fleet-viewer")
                    if b["metadata"]["namespace"] == entry["namespace"]]
        assert bound["roleRef"] == {"apiGroup": RBAC, "kind": "Role", "name": f"{RELEASE}-gpuclaim-fleet-viewer"}
        assert bound["subjects"] == entry["subjects"]
    # the device inventory (no tenant names) that `fleet pods -n NS` also lists, for every namespace viewer
    (devices,) = named(rendered, "ClusterRole", "-fleet-devices")
    assert granted(devices) == {("resource.k8s.io", r, "list") for r in ("resourceslices", "deviceclasses",
                                                                         "devicetaintrules")}
    (devices_binding,) = named(rendered, "ClusterRoleBinding", "-fleet-devices")
    assert devices_binding["subjects"] == [s for e in values["namespaceViewers"] for s in e["subjects"]]


def test_a_fleet_port_that_is_already_taken_fails_the_install_naming_the_key(chart: helm.Chart) -> None:
    for taken in (8443, 9090):
        with pytest.raises(Exception, match=r"fleet\.port: .* a port of its own"):
            chart.render({"fleet": {"port": taken}}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    chart.render({"fleet": {"port": 8443, "enabled": False}}, name=RELEASE, namespace=NAMESPACE, is_install=True)


def test_a_fleet_service_port_the_extenders_service_already_has_fails_the_install_naming_the_key(
        chart: helm.Chart) -> None:
    """kube-apiserver refuses a Service with two ports of one number (Duplicate value), so the install would fail
    at apply time; the chart refuses it when rendering, naming the value."""
    for taken in ({"fleet": {"servicePort": 443}}, {"fleet": {"servicePort": 9191}, "extender": {"metricsPort": 9191}}):
        with pytest.raises(Exception, match=r"fleet\.servicePort: .* a Service port of its own"):
            chart.render(taken, name=RELEASE, namespace=NAMESPACE, is_install=True)
    chart.render({"fleet": {"servicePort": 443, "enabled": False}}, name=RELEASE, namespace=NAMESPACE,
                 is_install=True)


def dashboard(rendered: Rendered) -> tuple[dict[str, Any], dict[str, Any]]:
    (config_map,) = named(rendered, "ConfigMap", "-fleet-dashboard")
    return config_map, json.loads(config_map["data"]["gpuclaim-fleet.json"])


def expressions(board: dict[str, Any]) -> list[str]:
    found = [t["expr"] for p in board["panels"] for t in p.get("targets", ())]
    found += [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return found


def test_the_dashboard_config_map_is_labelled_for_the_grafana_sidecar(render: Any) -> None:
    config_map, board = dashboard(render("fleet"))
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "GPUs"}
    assert board["uid"] == "gpuclaim-fleet" and board["panels"]
    custom = helm.Chart.load(str(__import__("chart_helpers").CHART)).render(
        {"fleet": {"dashboard": {"enabled": True, "labels": {"dashboards": "gpu"}}}}, name=RELEASE,
        namespace=NAMESPACE, is_install=True)
    text = next(t for p, t in custom.items() if p.endswith("fleet-dashboard.yaml"))
    assert "dashboards: gpu" in text and f"namespace: {NAMESPACE}" in text and "grafana_folder" not in text


def test_every_dashboard_query_uses_only_the_fleet_metrics_and_their_labels(render: Any) -> None:
    _, board = dashboard(render("fleet"))
    exprs = expressions(board)
    assert len(exprs) >= 8
    used: set[str] = set()
    for expr in exprs:
        names = {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r'"[^"]*"', "", expr))
                 if w.startswith("gpuclaim")}
        assert names, expr
        assert names <= set(metrics.NAMES), expr
        used |= names
        labels = set(re.findall(r"(\w+)\s*(?:=~|!=|=)\s*\"", expr))
        for group in re.findall(r"by \(([^)]*)\)", expr):
            labels |= {g.strip() for g in group.split(",")}
        allowed = set.intersection(*(LABELS[n] for n in names))
        assert labels <= allowed, (expr, labels - allowed)
    assert used == set(metrics.NAMES)  # each metric is on the board
    # every panel and variable reads the board's data source variable
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("values", ["fleet", "default"])
def test_the_install_notes_say_how_to_reach_the_page_on_the_service_the_chart_renders(render: Any,
                                                                                        values: str) -> None:
    """What `helm install` prints: a port-forward to the Service and port the chart really renders for the fleet
    (fleet.servicePort, 8080 in the "fleet" set), the page's address through it, and the viewer roles by name."""
    rendered: Rendered = render(values)
    forward = re.search(r"kubectl -n (\S+) port-forward svc/(\S+) (\d+):(\d+)\n", rendered.notes)
    assert forward, rendered.notes
    namespace, service, local, remote = forward.groups()
    svc = rendered.one("Service", "-extender")
    assert (namespace, service) == (NAMESPACE, svc["metadata"]["name"])
    (port,) = [p for p in svc["spec"]["ports"] if p["port"] == int(remote)]
    assert port["targetPort"] == "fleet"
    assert f"https://localhost:{local}/fleet" in rendered.notes
    (role,) = named(rendered, "ClusterRole", "-fleet-viewer")
    assert f"ClusterRole {role['metadata']['name']}, " in rendered.notes
    bound = named(rendered, "ClusterRoleBinding", "-fleet-viewer")
    assert ("bound to nobody yet" in rendered.notes) == (not bound)
    roles = named(rendered, "Role", "-fleet-viewer")
    if roles:
        assert f"Role {role['metadata']['name']} in " + ", ".join(r["metadata"]["namespace"] for r in roles) + "." \
            in rendered.notes


def test_without_the_fleet_view_the_notes_say_nothing_of_it(render: Any) -> None:
    assert "fleet" not in render("no-fleet").notes.lower()
