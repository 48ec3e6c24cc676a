"""values.schema.json makes bad values fail at install time with a message naming the key."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_helpers import NAMESPACE, RELEASE, VALUE_SETS

BAD: dict[str, tuple[dict[str, Any], str]] = {
    "unknown-failure-policy": (
        {"webhook": {"mutating": {"failurePolicy": "Maybe"}}},
        "/webhook/mutating/failurePolicy",
    ),
    "timeout-over-apiserver-max": (
        {"webhook": {"validating": {"timeoutSeconds": 31}}},
        "/webhook/validating/timeoutSeconds",
    ),
    "zero-replicas": ({"webhook": {"replicas": 0}}, "/webhook/replicas"),
    "typo-in-top-level-key": ({"webhok": {}}, "webhok"),
    "typo-in-config-section": ({"config": {"conversoin": {}}}, "conversoin"),
    "unknown-certs-mode": ({"certs": {"mode": "vault"}}, "/certs/mode"),
    "secret-mode-without-secret": ({"certs": {"mode": "secret"}}, "/certs/secretName"),
    "secret-mode-without-ca": ({"certs": {"mode": "secret", "secretName": "tls"}}, "/certs/caBundle"),
    "second-scheduler-without-extender": (
        {"scheduler": {"second": {"enabled": True}}, "extender": {"enabled": False}},
        "/extender/enabled",
    ),
    "no-resources-to-match": (
        {"webhook": {"matchResources": {"names": [], "prefixes": []}}},
        "/webhook/matchResources",
    ),
    "cel-injection-in-resource-name": (
        {"webhook": {"matchResources": {"names": ["nvidia.com/gpu' || true || '"]}}},
        "/webhook/matchResources/names/0",
    ),
    "zero-extender-weight": ({"scheduler": {"extender": {"weight": 0}}}, "/scheduler/extender/weight"),
    "bad-http-timeout": ({"scheduler": {"extender": {"httpTimeout": "5 seconds"}}}, "/scheduler/extender/httpTimeout"),
    "plain-http-url-prefix": (
        {"scheduler": {"extender": {"urlPrefix": "http://x:80"}}},
        "/scheduler/extender/urlPrefix",
    ),
    "privileged-port": ({"extender": {"port": 443}}, "/extender/port"),
    "limits-removed": ({"webhook": {"resources": {"limits": None}}}, "/webhook/resources"),
    "bad-digest": ({"image": {"digest": "latest"}}, "/image/digest"),
    "uppercase-scheduler-name": ({"scheduler": {"second": {"name": "GPU"}}}, "/scheduler/second/name"),
    "root-user": ({"securityContext": {"runAsUser": 0}}, "/securityContext/runAsUser"),
    "privileged-fleet-port": ({"fleet": {"port": 80}}, "/fleet/port"),
    "fleet-viewer-namespace-not-a-name": (
        {"fleet": {"rbac": {"namespaceViewers": [{"namespace": "Team_A", "subjects": [{"kind": "Group",
                                                                                      "name": "a"}]}]}}},
        "/fleet/rbac/namespaceViewers/0/namespace",
    ),
    "fleet-viewer-without-subjects": (
        {"fleet": {"rbac": {"namespaceViewers": [{"namespace": "team-a", "subjects": []}]}}},
        "/fleet/rbac/namespaceViewers/0/subjects",
    ),
    "fleet-viewer-subject-kind-typo": (
        {"fleet": {"rbac": {"viewers": [{"kind": "Groups", "name": "admins"}]}}}, "/fleet/rbac/viewers/0/kind",
    ),
    "fleet-dashboard-label-not-a-string": (
        {"fleet": {"dashboard": {"labels": {"grafana_dashboard": 1}}}}, "/fleet/dashboard/labels/grafana_dashboard",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_values_are_rejected_with_the_offending_key(chart: helm.Chart, case: str) -> None:
    values, where = BAD[case]
    with pytest.raises(helm.HelmValuesError) as schema_error:
        chart.validate_schema(values)
    assert where in str(schema_error.value)
    # The same check runs when the chart is rendered for an install.
    with pytest.raises(helm.HelmValuesError) as render_error:
        chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    assert where in str(render_error.value)


@pytest.mark.parametrize("values_set", sorted(VALUE_SETS))
def test_every_tested_values_set_is_accepted(chart: helm.Chart, values_set: str) -> None:
    chart.validate_schema(VALUE_SETS[values_set])


def test_openshift_style_unset_uid_is_accepted(chart: helm.Chart) -> None:
    chart.validate_schema({"securityContext": {"runAsUser": None, "runAsGroup": None}})
