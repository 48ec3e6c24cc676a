"""Suite-wide fixtures: fixture files live under tests/fixtures, tests only talk to loopback.

`double` serves the Kubernetes API double (e2e/apiserver) over TLS on loopback in the test's
event loop; `client` is a `kube.KubeClient` for it, configured from the kubeconfig the double
writes, exactly as the servers configure theirs.
"""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# gpuclaim.dra.cel raises the interpreter's recursion limit when first imported; hypothesis fails a test during
# which the limit changes ("recursion limit changed during test"), and since the CLI imports command modules
# lazily that first import can fall inside one. Import it once, before any test runs.
import gpuclaim.dra.cel  # noqa: F401
from gpuclaim.double.apiserver import RunningDouble, Settings, Store, serve
from gpuclaim.kube import config
from gpuclaim.kube.client import KubeClient
from gpuclaim.serving import logs

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The servers' log set-up (JSON, debug) writing to a string for the test; the root logger restored after."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    handler = logs.setup(level="debug", fmt="json", stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
async def double(tmp_path: Path) -> AsyncIterator[RunningDouble]:
    running = await serve(store=Store(history_size=200), workdir=tmp_path, settings=Settings(bookmark_interval=0.2))
    yield running
    await running.close()


@pytest.fixture
async def client(double: RunningDouble) -> AsyncIterator[KubeClient]:
    kube_client = KubeClient(config.from_kubeconfig(double.kubeconfig), timeout=5.0)
    yield kube_client
    await kube_client.close()
