"""Typed application keys (aiohttp AppKey): the shared objects of one extender app, no module globals."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import ExtenderConfig
from gpuclaim.serving.connections import SourceSlots

from .metrics import ExtenderMetrics
from .predict import ClusterView
from .readiness import Readiness

CONFIG = web.AppKey("gpuclaim.extender.config", ExtenderConfig)
VIEW = web.AppKey("gpuclaim.extender.view", ClusterView)
METRICS = web.AppKey("gpuclaim.extender.metrics", ExtenderMetrics)
READINESS = web.AppKey("gpuclaim.extender.readiness", Readiness)
REGISTRY = web.AppKey("gpuclaim.extender.registry", CollectorRegistry)
# held while a request with many candidates is predicted, in slices: one such request at a time (handlers.py)
LONG_CALLS = web.AppKey("gpuclaim.extender.long_calls", asyncio.Lock)
# held while a big body is read: a few per source at a time (handlers.py)
BIG_READS = web.AppKey("gpuclaim.extender.big_reads", SourceSlots)
# the cluster's mixed nodes (kube.mixed.MixedNodes) with the mixedNodes policy; None without a live cluster view
MIXED: web.AppKey[Any] = web.AppKey("gpuclaim.extender.mixed")
