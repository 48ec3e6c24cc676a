"""The webhook does its one-time work before it opens its port, not on the first requests' event loop (issue 14).

Measured before: the first /validate of a fresh process read and checked the shipped driver schemas on the event
loop (128-147 ms), and every request that came meanwhile waited; that stall alone was the hostile bench's
baseline p99. The schema registry's cache is process-wide, so the test empties it first.
"""

from __future__ import annotations

from server_helpers import make_config, pod_review, reloader_for, serving

from gpuclaim.double import tls as selfsigned
from gpuclaim.dra.schemas import registry
from gpuclaim.webhook import admit, app


async def test_the_shipped_schemas_are_read_before_the_port_opens(tls_files: selfsigned.TlsFiles) -> None:
    registry.registry.cache_clear()
    registry.shipped.cache_clear()
    application = app.create_app(make_config(), checks=admit.core_checks(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files))
    assert registry.shipped.cache_info().currsize == 0
    async with serving(application, tls_files) as server:
        # the port is open and nothing was asked yet: the schemas (and the registry the checks use) are loaded
        assert registry.shipped.cache_info().currsize == 1
        assert registry.registry.cache_info().currsize == 1
        status, body = await server.post("/mutate", pod_review())
        assert status == 200
        assert body["response"]["allowed"] is True
        assert registry.shipped.cache_info().misses == 1  # the requests found them loaded


async def test_a_warm_up_that_fails_does_not_keep_the_server_from_starting(tls_files: selfsigned.TlsFiles) -> None:
    class Broken(admit.CoreChecks):
        def warm_up(self, config: object) -> None:
            raise RuntimeError("warm-up broke")

    application = app.create_app(make_config(), checks=Broken(own_namespace="gpuclaim"),
                                 reloader=reloader_for(tls_files))
    async with serving(application, tls_files) as server:
        status, _ = await server.get("/healthz")
        assert status == 200
