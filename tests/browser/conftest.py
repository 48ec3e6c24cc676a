"""The browser fixtures: one headless Chromium per module, and per test a check of its console (browser_harness.py).

Every test that uses ``browser`` fails when the page logged a console error (a CSP violation, a script error, a
failed load) unless it declares the errors it expects with ``browser.expect_console``; a screenshot of the page
as the test left it is saved to the artifact directory, named after the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_harness import Browser, artifacts_dir, chromium_session


class PageBrowser:
    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.driver = browser.driver
        self.expected: list[re.Pattern[str]] = []

    def expect_console(self, pattern: str) -> None:
        """A console error matching ``pattern`` is part of what the test checks (an HTTP 403, say)."""
        self.expected.append(re.compile(pattern))


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    yield from chromium_session()


@pytest.fixture
def browser(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[PageBrowser]:
    chromium.console()     # drain what an earlier test left
    page = PageBrowser(chromium)
    yield page
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("::", 1)[-1])
    try:
        chromium.screenshot(artifacts_dir() / f"{name}.png")
    finally:
        errors = [e for e in chromium.console_errors() if not any(p.search(e) for p in page.expected)]
        chromium.driver.get("about:blank")
        # what a test signed in with stays with it
        chromium.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
        chromium.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
        assert errors == [], f"console errors on the page: {errors}"
