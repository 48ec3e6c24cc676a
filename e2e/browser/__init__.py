"""Headless Chromium for the fleet page's tests and benchmark: Debian's chromium and chromium-driver, via selenium.

The flags are those this machine's closed network needs (polyglot machines: no background networking, no component
update, no sync) plus a fresh profile per start. ``missing()`` says why a browser cannot run here; callers skip with
that reason (tests) or report it (the benchmark). Console messages are read from Chromium's browser log.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")


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

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def wait_for(self, script: str, timeout: float = 10.0) -> Any:
        """Poll a JavaScript expression (``return ...``) until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.driver.execute_script(script)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for: {script}")
            time.sleep(0.05)

    def drawn(self, revision: int | None = None, timeout: float = 10.0) -> int:
        """Wait until fleet.js has drawn ``revision`` (any, when None); the revision drawn."""
        want = "" if revision is None else f" === '{revision}'"
        self.wait_for(f"return document.documentElement.getAttribute('data-drawn-revision'){want}", timeout)
        return int(self.driver.execute_script("return document.documentElement.getAttribute('data-drawn-revision')"))
