"""Following the cluster's /version: the model in use, the pinned version winning, what a server does with a
version or gate it cannot model (logs it, keeps answering), and the info metric."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import load_config
from gpuclaim.kube.client import ApiUnavailable
from gpuclaim.kube.version import ClusterVersion


class _Client:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def get(self, path: str) -> Any:
        assert path == "/version"
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _version(**kubernetes: Any) -> tuple[ClusterVersion, CollectorRegistry]:
    registry = CollectorRegistry()
    return ClusterVersion(load_config({"kubernetes": kubernetes}).kubernetes, registry=registry), registry


def _info(registry: CollectorRegistry, model: str, cluster: str, source: str) -> float | None:
    return registry.get_sample_value("gpuclaim_kubernetes_version_info",
                                     {"model": model, "cluster": cluster, "source": source})


async def test_the_cluster_version_is_followed_and_exported(caplog: pytest.LogCaptureFixture) -> None:
    version, registry = _version()
    assert version.model.name == "1.37" and _info(registry, "1.37", "", "default") == 1.0
    caplog.set_level(logging.INFO, logger="gpuclaim.kube.version")
    await version.refresh(_Client({"gitVersion": "v1.35.4-eks-1a2b"}))
    assert version.model.name == "1.35" and _info(registry, "1.35", "v1.35.4-eks-1a2b", "cluster") == 1.0
    assert "the cluster runs v1.35.4-eks-1a2b; gpuclaim models 1.35 (was 1.37)" in caplog.text
    await version.refresh(_Client({"gitVersion": "v1.37.2"}))  # upgraded
    assert version.model.name == "1.37" and _info(registry, "1.37", "v1.37.2", "cluster") == 1.0


async def test_a_pinned_version_wins_and_a_different_cluster_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    version, registry = _version(version="1.36")
    await version.refresh(_Client({"gitVersion": "v1.37.2"}))
    assert version.model.name == "1.36" and _info(registry, "1.36", "v1.37.2", "config") == 1.0
    assert "kubernetes.version pins 1.36 but the cluster's /version says v1.37.2" in caplog.text


async def test_an_unreachable_apiserver_keeps_the_model_in_use(caplog: pytest.LogCaptureFixture) -> None:
    version, _ = _version()
    await version.refresh(_Client({"gitVersion": "v1.35.0"}))
    await version.refresh(_Client(ApiUnavailable("GET /version: no answer")))
    await version.refresh(_Client({"major": "1"}))
    assert version.model.name == "1.35"
    assert "could not read the cluster's /version" in caplog.text and "has no gitVersion" in caplog.text


async def test_a_version_too_old_or_too_new_is_logged_and_the_nearest_model_used(
        caplog: pytest.LogCaptureFixture) -> None:
    version, _ = _version()
    await version.refresh(_Client({"gitVersion": "v1.33.7"}))
    assert version.model.name == "1.34"
    assert "Kubernetes 1.33.7 is not supported: gpuclaim supports 1.34 to 1.37" in caplog.text
    await version.refresh(_Client({"gitVersion": "v1.38.0"}))
    assert version.model.name == "1.37" and "newer than gpuclaim knows" in caplog.text


async def test_a_gate_the_cluster_version_cannot_take_is_logged_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    # valid for 1.36 (beta, not locked), locked on in 1.37
    version, _ = _version(featureGates={"DRAExtendedResource": False})
    await version.refresh(_Client({"gitVersion": "v1.36.3"}))
    assert not version.model.gate("DRAExtendedResource")
    await version.refresh(_Client({"gitVersion": "v1.37.2"}))
    assert version.model.name == "1.37" and version.model.gate("DRAExtendedResource")
    assert "kubernetes.featureGates: feature gate 'DRAExtendedResource' is locked to true" in caplog.text
