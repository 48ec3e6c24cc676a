"""Typed application keys: everything the webhook app shares lives on the app under one of these (no globals)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.certs.files import CertReloader
from gpuclaim.dra.config import Config
from gpuclaim.webhook.admit import Checks, Context
from gpuclaim.webhook.metrics import WebhookMetrics

if TYPE_CHECKING:  # the kube package costs import time; the webhook imports it only with a cluster
    from gpuclaim.kube.config import ApiConfig

CONFIG = web.AppKey("gpuclaim.webhook.config", Config)
REGISTRY = web.AppKey("gpuclaim.webhook.registry", CollectorRegistry)
METRICS = web.AppKey("gpuclaim.webhook.metrics", WebhookMetrics)
CHECKS = web.AppKey("gpuclaim.webhook.checks", Checks)
# the TLS certificate's reloader; None when the caller serves its own context (readiness then skips certs)
RELOADER: web.AppKey[CertReloader | None] = web.AppKey("gpuclaim.webhook.reloader")
# the kube ApiConfig to build the cluster view from; None: run without a cluster
KUBE: web.AppKey[ApiConfig | None] = web.AppKey("gpuclaim.webhook.kube")
TIME_LIMIT = web.AppKey("gpuclaim.webhook.time_limit", float)
# the namespace the webhook runs in (POD_NAMESPACE): where the garbage collector's Lease lives; None: unknown
NAMESPACE: web.AppKey[str | None] = web.AppKey("gpuclaim.webhook.namespace")


@dataclass(slots=True)
class State:
    """The app's mutable part, owned by the app: what checks see (the cluster view arrives at startup).
    Whether shutdown began and what is in flight is gpuclaim.serving's (`serving.run.LIFECYCLE`)."""

    context: Context
    gc: Any = None  # the garbage collector (kube.garbage.GarbageCollector) while it runs


STATE = web.AppKey("gpuclaim.webhook.state", State)
