"""The API double on loopback TLS and a client for it, for the live inventory's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from e2e.apiserver import RunningDouble, Settings, Store, serve
from kube import config
from kube.client import KubeClient


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
