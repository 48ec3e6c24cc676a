"""Fixtures: TLS material for the session, and the webhook app served over real TLS on loopback."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from server_helpers import Server, StandInChecks, make_config, reloader_for, serving

from gpuclaim.double import tls as selfsigned
from gpuclaim.dra.config import Config
from gpuclaim.webhook import app


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> selfsigned.TlsFiles:
    return selfsigned.issue(tmp_path_factory.mktemp("webhook-tls"), hosts=("127.0.0.1", "localhost"))


@pytest.fixture
def config() -> Config:
    return make_config(maxBodyBytes=64 * 1024)


@pytest.fixture
async def server(tls_files: selfsigned.TlsFiles, config: Config) -> AsyncIterator[Server]:
    # every log call runs (a bad `extra` key only fails when the level is enabled)
    logger = logging.getLogger("gpuclaim")
    saved_level = logger.level
    logger.setLevel(logging.DEBUG)
    checks = StandInChecks()
    application = app.create_app(config, checks=checks, reloader=reloader_for(tls_files), time_limit=1.0)
    try:
        async with serving(application, tls_files, checks) as server:
            yield server
    finally:
        logger.setLevel(saved_level)


