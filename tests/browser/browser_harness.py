"""The browser tests' harness: e2e.browser's headless Chromium, the artifact directory, a server in a thread.

Screenshots go to ``$GPUCLAIM_TEST_ARTIFACTS/browser/`` (default ``.test-artifacts/browser/`` in the repository,
ignored by git). ``.ci/run`` installs Chromium and sets ``GPUCLAIM_BROWSER=require``, so in CI a missing browser
fails instead of skipping (conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from e2e.browser import Browser, missing

__all__ = ["Browser", "Served", "artifacts_dir", "missing", "serve_in_thread"]

ROOT = Path(__file__).resolve().parents[2]


def artifacts_dir() -> Path:
    return Path(os.environ.get("GPUCLAIM_TEST_ARTIFACTS") or ROOT / ".test-artifacts") / "browser"


class Served:
    """An app served from its own thread: ``url``, and ``call(fn)`` to run ``fn`` on that thread's event loop (what
    the app owns, a FleetIndex say, is only touched there)."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self.loop = loop

    def call(self, fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)


@contextlib.contextmanager
def serve_in_thread(make_app: Callable[[], web.Application]) -> Iterator[Served]:
    """Serve an aiohttp app on loopback from its own thread and event loop (selenium blocks)."""
    loop = asyncio.new_event_loop()
    started: dict[str, Any] = {}
    ready = threading.Event()

    async def start() -> None:
        runner = web.AppRunner(make_app(), handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        started["runner"] = runner
        started["port"] = runner.addresses[0][1]

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:
            started["error"] = exc
        ready.set()
        if "error" not in started:
            loop.run_forever()

    thread = threading.Thread(target=main, name="browser-test-server", daemon=True)
    thread.start()
    ready.wait(30)
    if "error" in started:
        raise started["error"]
    try:
        yield Served(f"http://127.0.0.1:{started['port']}", loop)
    finally:
        asyncio.run_coroutine_threadsafe(started["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def chromium_session() -> Iterator[Browser]:
    """A module fixture's body: one headless Chromium, or a skip that says why (a failure under
    GPUCLAIM_BROWSER=require, as .ci/run sets it once chromium is installed)."""
    reason = missing()
    if reason:
        if os.environ.get("GPUCLAIM_BROWSER") == "require":
            pytest.fail(f"GPUCLAIM_BROWSER=require but {reason}")
        pytest.skip(f"browser tests skipped: {reason}")
    browser = Browser()
    try:
        yield browser
    finally:
        browser.close()
