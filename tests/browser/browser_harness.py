"""Headless Chromium for the page tests: Debian's chromium and chromium-driver, driven by selenium.

``.ci/run`` installs both (``apt-get install chromium chromium-driver``) and sets ``GPUCLAIM_BROWSER=require``, so
in CI a missing browser fails instead of skipping. Elsewhere the tests skip, with the reason in pytest's summary
(``-rs``). The flags are those this machine's closed network needs (no background networking, no component
update, no sync, a fresh profile per start). Console messages are read from the browser log; screenshots go to
``$GPUCLAIM_TEST_ARTIFACTS/browser/`` (default ``.test-artifacts/browser/`` in the repository, ignored by git).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")


def artifacts_dir() -> Path:
    base = Path(os.environ.get("GPUCLAIM_TEST_ARTIFACTS") or ROOT / ".test-artifacts")
    path = base / "browser"
    path.mkdir(parents=True, exist_ok=True)
    return path


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        return ("Debian's chromium and chromium-driver are not installed "
                "(apt-get install -y chromium chromium-driver, as .ci/run does)")
    return None


class Browser:
    """One headless Chromium with a fresh profile; ``console_errors()`` drains the SEVERE console entries."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="gpuclaim-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={self.profile}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=shutil.which("chromedriver") or "chromedriver")
        self.driver = webdriver.Chrome(options=options, service=service)
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)

    def console(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.driver.get_log("browser")
        return entries

    def console_errors(self) -> list[str]:
        return [f"{e.get('level')}: {e.get('message')}" for e in self.console() if e.get("level") == "SEVERE"]

    def screenshot(self, name: str) -> Path:
        path = artifacts_dir() / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


@contextlib.contextmanager
def serve_in_thread(make_app: Callable[[], web.Application]) -> Iterator[str]:
    """Serve an aiohttp app on loopback from its own thread and event loop (selenium blocks); yield its URL."""
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
        yield f"http://127.0.0.1:{started['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(started["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
