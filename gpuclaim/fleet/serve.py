"""The fleet view inside the extender process: an index fed by the extender's own cache, and the fleet listener.

``attach`` is called while the extender's app is built, before its cache starts, so the index sees every event
from the first list on. The index is flushed in steps by a background task, so a burst of events (the first list
of 5,000 nodes) never holds the event loop long; a request flushes what little is left.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from aiohttp import web

from gpuclaim.dra.config import Config
from gpuclaim.fleet import access as fleet_access
from gpuclaim.fleet import api, model
from gpuclaim.tasks import running

log = logging.getLogger(__name__)
FLUSH_STEP = 20  # nodes per step: 1.6 ms a node of 8 GPUs measured on the loaded machine, so ~30 ms a step
FLUSH_PERIOD = 0.5
#: on the extender's app: the index the fleet port serves (fleet/metrics.py's collector reads it)
INDEX = web.AppKey("gpuclaim.fleet.serve.index", model.FleetIndex)


def attach(parent: web.Application, config: Config, *, cache: Any, client: Any, listen: str,
           ssl_context: ssl.SSLContext | None, on_started: Callable[[str], None] | None = None) -> model.FleetIndex:
    """Serve the fleet port while ``parent`` (the extender's app) runs; the index is also ``parent[INDEX]``.
    ``cache``: the extender's kube.cache.ClusterCache; ``client``: its KubeClient (for the reviews)."""
    index = model.FleetIndex(config)
    parent[INDEX] = index
    cache.subscribe(index.on_event)

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
        async with running(keep_current(), "gpuclaim-fleet-index"):
            async for _ in serve(parent):
                yield

    parent.cleanup_ctx.append(ctx)
    return index
