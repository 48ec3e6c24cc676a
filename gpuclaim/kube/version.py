"""The Kubernetes version the servers model: the cluster's ``/version``, followed, unless the config pins one.

The cluster view reads ``/version`` when it starts and again after every list (a relist follows a control plane
restart, which is how an upgrade shows), so an upgraded control plane is followed without a restart of gpuclaim.
A pinned ``kubernetes.version`` wins; ``/version`` is still read to say when the two differ. The model in use is
logged when it changes and exported as ``gpuclaim_kubernetes_version_info{model,cluster,source}``.

Nothing here refuses to run: a version gpuclaim cannot model, or a gate override that version does not have, is
logged as an error and the nearest model is used, because the webhook must keep answering admissions.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Info

from gpuclaim.dra import versions
from gpuclaim.dra.config import KubernetesConfig
from gpuclaim.kube.client import ApiError, ApiUnavailable

log = logging.getLogger(__name__)
Source = Literal["config", "cluster", "default"]


class ClusterVersion:
    """``model``: the :class:`versions.KubernetesModel` in use now (read it per request, it may change)."""

    def __init__(self, config: KubernetesConfig, *, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.cluster: str | None = None  # the gitVersion last read from /version
        self.source: Source = "config" if config.version is not None else "default"
        self.model = self._resolve(config.version)
        self._info = Info("gpuclaim_kubernetes_version", "the Kubernetes version gpuclaim models (model), what the "
                          "cluster's /version said (cluster) and where the model came from (source)",
                          registry=registry)
        self._publish()

    async def refresh(self, client: Any) -> None:
        """Read ``/version`` and follow it; an unreachable apiserver keeps the model in use."""
        try:
            body = await client.get("/version")
        except (ApiError, ApiUnavailable) as exc:
            log.warning("could not read the cluster's /version, keeping the Kubernetes %s model: %s",
                        self.model.name, exc)
            return
        git_version = body.get("gitVersion")
        if not isinstance(git_version, str):
            log.warning("the cluster's /version has no gitVersion, keeping the Kubernetes %s model", self.model.name)
            return
        self.observe(git_version)

    def observe(self, git_version: str) -> None:
        """Take the cluster's ``gitVersion`` into account (the pinned version, if any, still wins)."""
        changed_cluster = git_version != self.cluster
        self.cluster = git_version
        if self.config.version is not None:
            if changed_cluster:
                pinned = versions.parse_version(self.config.version)
                try:
                    seen = versions.parse_version(git_version)
                except versions.VersionError:
                    seen = None
                if seen is None or seen.minor != pinned.minor:
                    log.warning("kubernetes.version pins %s but the cluster's /version says %s; modelling %s",
                                self.config.version, git_version, self.model.name)
            self._publish()
            return
        before = self.model
        self.model = self._resolve(git_version)
        self.source = "cluster"
        if self.model != before or changed_cluster:
            log.info("Kubernetes version: the cluster runs %s; gpuclaim models %s (was %s)", git_version,
                     self.model.name, before.name, extra={"kubernetes_version": git_version,
                                                          "model": self.model.name})
        self._publish()

    def _resolve(self, version: str | None) -> versions.KubernetesModel:
        gates = self.config.feature_gates
        try:
            resolved = versions.resolve(version, feature_gates=gates)
        except versions.GateError as err:
            log.error("kubernetes.featureGates: %s; modelling the version's default gates", err)
            return versions.resolve(version).model
        except versions.VersionError as err:
            nearest = versions.model_for(versions.OLDEST, feature_gates=None)
            log.error("%s; modelling %s, the oldest supported", err, nearest.name)
            return nearest
        for warning in resolved.warnings:
            log.warning(warning)
        return resolved.model

    def _publish(self) -> None:
        self._info.info({"model": self.model.name, "cluster": self.cluster or "", "source": self.source})
