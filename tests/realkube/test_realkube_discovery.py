"""The real kube-apiserver is the judge of what the API double tells kubectl: for every kind the double serves, its
aggregated discovery entry (scope, kind, singular, short names, categories, status subresource; the verbs minus
`deletecollection`, which the double does not serve) and its Table (columns, and the cells the double's printer
makes of the real server's own objects, ages aside) equal kube-apiserver's. Only on the release the double claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from realkube_cluster import Kube, cpu_pod, gpu_pod

from e2e.kube import build
from gpuclaim.double.apiserver import RESOURCE_TYPES, discovery, negotiation, tables

V2 = negotiation.DISCOVERY_V2.content_type
TABLE = negotiation.TABLE_V1.content_type
PRINTED = [rt for rt in RESOURCE_TYPES if rt.kind in tables.TABLES]  # Event has no printer in the double


@pytest.fixture
def claimed(kube: Kube) -> Iterator[Kube]:
    """The control plane of the release the double claims, holding a converted GPU pod (its template and claim,
    allocated and reserved) and an ordinary one, both bound, so every printer has rows to print."""
    if build.release(kube.minor) != discovery.KUBERNETES_VERSION:
        pytest.skip(f"the double claims {discovery.KUBERNETES_VERSION}; this control plane is {kube.minor}")
    with kube.scratch_namespace("printers") as ns:
        for pod in (gpu_pod("gpu", ns), cpu_pod("cpu", ns)):
            kube.api.create(pod)
            kube.wait_bound(ns, pod["metadata"]["name"])
        yield kube


def _get(kube: Kube, path: str, accept: str) -> Any:
    reply = kube.api.session.get(kube.api.server + path, headers={"Accept": accept}, timeout=30)
    assert reply.status_code == 200, reply.text[:500]
    return reply.json()


def _entries(document: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(item["metadata"].get("name", ""), version["version"], r["resource"]): r
            for item in document["items"] for version in item["versions"] for r in version["resources"]}


def test_discovery_of_every_served_kind_matches_kube_apiserver(claimed: Kube) -> None:
    real = _entries(_get(claimed, "/api", V2)) | _entries(_get(claimed, "/apis", V2))
    double = _entries(discovery.aggregated(True)) | _entries(discovery.aggregated(False))
    assert set(double) <= set(real)
    for key, ours in double.items():
        theirs = dict(real[key])
        theirs["verbs"] = [v for v in theirs["verbs"] if v != "deletecollection"]
        theirs["subresources"] = [s for s in theirs.get("subresources", []) if s["subresource"] == "status"]
        for field in ("responseKind", "scope", "singularResource", "verbs", "shortNames", "categories",
                      "subresources"):
            assert ours.get(field) == (theirs.get(field) or None), (key, field)


@pytest.mark.parametrize("rt", PRINTED, ids=[rt.kind for rt in PRINTED])
def test_the_doubles_table_of_the_real_objects_is_kube_apiservers(claimed: Kube, rt: Any) -> None:
    theirs = _get(claimed, rt.base_path(), TABLE)
    objects = _get(claimed, rt.base_path(), "application/json")["items"]
    ours = tables.table(rt, objects, now=0.0, include_object="None", no_headers=False,
                        group_version="meta.k8s.io/v1", list_meta={})
    fields = ("name", "type", "format", "priority")
    assert [{f: c.get(f, "") for f in fields} for c in ours["columnDefinitions"]] == [
        {f: c.get(f, "") for f in fields} for c in theirs["columnDefinitions"]]
    age = [c["name"] for c in ours["columnDefinitions"]].index("Age")

    def cells(table: dict[str, Any]) -> list[list[Any]]:
        return [row["cells"][:age] + row["cells"][age + 1:] for row in table["rows"]]

    assert theirs["rows"] and cells(ours) == cells(theirs)
