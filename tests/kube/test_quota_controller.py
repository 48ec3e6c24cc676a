"""kube.quota: the controller keeps one mirror per legacy GPU quota, updates it when the legacy entry changes,
deletes mirrors with nothing left to keep, never touches the admins' quotas, and stops writing without the lease."""

from __future__ import annotations

import copy
from typing import Any

from prometheus_client import CollectorRegistry

from gpuclaim.dra import quota as rules
from gpuclaim.dra.config import ConversionConfig
from gpuclaim.kube.client import ApiError
from gpuclaim.kube.quota import QuotaController

ENTRY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


class FakeApi:
    """ResourceQuotas in memory, with the verbs the controller uses; records every write."""

    def __init__(self, *quotas: dict[str, Any]) -> None:
        self.quotas = {(q["metadata"]["namespace"], q["metadata"]["name"]): copy.deepcopy(q) for q in quotas}
        self.writes: list[tuple[str, str]] = []
        self.version = 0

    async def get(self, path: str) -> dict[str, Any]:
        if path == "/version":
            return {"gitVersion": "v1.35.4"}
        raise ApiError(404, "NotFound", path)

    async def list(self, path: str, *, params: Any = None) -> dict[str, Any]:
        assert path == "/api/v1/resourcequotas"
        return {"items": [copy.deepcopy(q) for q in self.quotas.values()], "metadata": {}}

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"].update(resourceVersion=str(self.version), uid=obj["metadata"].get("uid") or f"u{self.version}")
        return obj

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert key not in self.quotas
        self.writes.append(("create", key[1]))
        self.quotas[key] = self._stamp(copy.deepcopy(obj))
        return self.quotas[key]

    async def update(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert rules.is_mirror(self.quotas[key]), "an admin's quota was written"
        assert obj["metadata"]["resourceVersion"] == self.quotas[key]["metadata"]["resourceVersion"]
        self.writes.append(("update", key[1]))
        self.quotas[key] = self._stamp(copy.deepcopy(obj))
        return self.quotas[key]

    async def delete(self, path: str, *, preconditions: dict[str, str]) -> None:
        ns, name = path.split("/")[4], path.split("/")[-1]
        assert rules.is_mirror(self.quotas[(ns, name)]) and preconditions["uid"]
        self.writes.append(("delete", name))
        del self.quotas[(ns, name)]


def legacy(name: str, gpus: str, ns: str = "team") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"hard": {"requests.nvidia.com/gpu": gpus, "pods": "10"}}}


def controller(api: FakeApi) -> QuotaController:
    return QuotaController(api, conversion=ConversionConfig(), classes=dict,  # type: ignore[arg-type]
                           registry=CollectorRegistry())


async def test_a_mirror_is_created_kept_updated_and_deleted() -> None:
    api = FakeApi(legacy("gpus", "2"), {"apiVersion": "v1", "kind": "ResourceQuota",
                                        "metadata": {"name": "cpu", "namespace": "team", "uid": "c"},
                                        "spec": {"hard": {"requests.cpu": "4"}}})
    ctl = controller(api)
    result = await ctl.reconcile()
    assert result.created == ["team/gpuclaim-gpus"] and api.writes == [("create", "gpuclaim-gpus")]
    mirror = api.quotas[("team", "gpuclaim-gpus")]
    assert mirror["spec"]["hard"] == {ENTRY: "2"} and mirror["metadata"]["ownerReferences"][0]["uid"] == "uid-gpus"
    assert ctl.model is not None and ctl.model.name == "1.35"
    await ctl.reconcile()  # nothing changed: nothing written
    assert len(api.writes) == 1
    api.quotas[("team", "gpus")]["spec"]["hard"]["requests.nvidia.com/gpu"] = "3"
    assert (await ctl.reconcile()).updated == ["team/gpuclaim-gpus"]
    assert api.quotas[("team", "gpuclaim-gpus")]["spec"]["hard"] == {ENTRY: "3"}
    del api.quotas[("team", "gpus")]
    assert (await ctl.reconcile()).deleted == ["team/gpuclaim-gpus"]
    assert set(api.quotas) == {("team", "cpu")}


async def test_nothing_is_written_without_the_lease_and_scoped_quotas_are_reported() -> None:
    scoped = legacy("scoped", "1")
    scoped["spec"]["scopes"] = ["NotBestEffort"]
    api = FakeApi(legacy("gpus", "2"), scoped)
    ctl = controller(api)
    await ctl.reconcile(may_write=lambda: False)
    assert api.writes == []
    result = await ctl.reconcile()
    assert api.writes == [("create", "gpuclaim-gpus")]
    assert result.unkept == ["team/scoped: requests.nvidia.com/gpu: the quota has scopes, which never match a "
                             "ResourceClaim"]
