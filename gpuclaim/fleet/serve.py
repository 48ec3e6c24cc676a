"""The fleet view inside the extender process: an index fed by the extender's own cache, and the fleet listener.

``attach`` is called while the extender's app is built, before its cache starts, so the index sees every event
from the first list on. The index is flushed in steps by a background task, so a burst of events (the first list
of 5,000 nodes) never holds the event loop long; a request flushes what little is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from gpuclaim.dra.config import Config
from gpuclaim.fleet import access as fleet_access
from gpuclaim.fleet import api, model
from gpuclaim.fleet import metrics as fleet_metrics

log = logging.getLogger(__name__)
FLUSH_STEP = 200  # nodes per step: about 30 ms of work at 8 devices a node (measured on the demo fleet)
FLUSH_PERIOD = 0.5


def attach(config: Config, *, cache: Any, client: Any, listen: str, ssl_context: ssl.SSLContext | None,
           on_started: Callable[[str], None] | None = None,
           registry: CollectorRegistry | None = None) -> Callable[[web.Application], AsyncIterator[None]]:
    """``cache``: the extender's kube.cache.ClusterCache; ``client``: its KubeClient (for the reviews);
    ``registry``: the extender's metrics registry, where the gpuclaim_fleet_* gauges are read from this index."""
    index = model.FleetIndex(config)
    cache.subscribe(index.on_event)
    if registry is not None:
        fleet_metrics.register(registry, index)

    def namespaces() -> Iterable[str]:
        holding = sorted(index.namespaces())
        yield from holding
        seen = set(holding)
        for key in sorted(cache.objects("Namespace")):
            if key not in seen:
                yield key

    access = api.access_from(config, fleet_access.KubeReviewer(client, time_limit=config.cluster.api_timeout_seconds))
    app = api.create_app(config, index=index, access=access, namespaces=namespaces)
    serve = api.serve_ctx(app, listen=listen, ssl_context=ssl_context, on_started=on_started)

    async def keep_current() -> None:
        while True:
            version = getattr(cache, "version", None)
            if version is not None:
                index.set_model(version.model)
                index.kubernetes_version = getattr(version, "cluster", None)
            left = index.flush(FLUSH_STEP)
            await asyncio.sleep(0 if left else FLUSH_PERIOD)  # more to do: let requests in between, then go on

    async def ctx(parent: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(keep_current(), name="gpuclaim-fleet-index")
        try:
            async for _ in serve(parent):
                yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return ctx
