"""The fleet page on the demo stack (`gpuclaim demo --keep`), in headless Chromium: the extender's fleet port over
TLS, access decided by the API double's TokenReview and SubjectAccessReview over the RBAC the demo creates
(gpuclaim/demo/viewers.py), the viewers' tokens from the file the demo writes.

Chromium is told to accept the demo's self-issued serving certificate (DevTools' Security domain): the TLS itself
is checked against the demo's CA in tests/e2e/test_fleet.py. The page is signed in to with an Authorization header
on every request, as behind an authenticating proxy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser_harness import artifacts_dir
from kept_demo import kept_demo

from gpuclaim.double.controllers import ResourceClaimController
from gpuclaim.double.scheduler import Scheduler
from gpuclaim.kube import config as kube_config
from gpuclaim.kube.client import KubeClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("fleet-demo-browser")
    with kept_demo(workdir) as report:
        fleet = report["keep"]["fleet"]
        yield {"url": fleet["url"], "tokens": json.loads(Path(fleet["tokens"]).read_text()),
               "kubeconfig": report["keep"]["kubeconfig"], "workdir": workdir}


def open_as(browser: Any, demo: dict[str, Any], token: str, query: str = "") -> int:
    driver = browser.driver
    driver.execute_cdp_cmd("Security.setIgnoreCertificateErrors", {"ignore": True})
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {token}"}})
    driver.get(demo["url"] + query)
    return int(browser.browser.drawn(timeout=20))


def cells(driver: Any) -> dict[tuple[str, str], str]:
    rows = driver.execute_script("""
        return Array.from(document.querySelectorAll('#fleet-rows .row')).flatMap(r =>
          Array.from(r.querySelectorAll('.cell')).map(c => [r.dataset.node, c.querySelector('.dn').textContent,
                                                             c.getAttribute('aria-label')]));""")
    return {(node, name): label for node, name, label in rows}


async def _claims(kubeconfig: str) -> list[dict[str, Any]]:
    client = KubeClient(kube_config.from_kubeconfig(kubeconfig), timeout=10.0)
    try:
        return list((await client.get("/apis/resource.k8s.io/v1/resourceclaims"))["items"])
    finally:
        await client.close()


async def _schedule(kubeconfig: str, pod: dict[str, Any]) -> dict[str, Any]:
    """What the demo does for each of its pods: create it (the webhook converts it), let the resourceclaim
    controller make its claim, and schedule it with the scheduler double (which allocates and reserves)."""
    client = KubeClient(kube_config.from_kubeconfig(kubeconfig), timeout=10.0)
    scheduler = Scheduler(client)
    try:
        namespace = pod["metadata"]["namespace"]
        await client.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        await ResourceClaimController(client).sync_once()
        pods, snapshot = await scheduler.snapshot()
        ours = next(p for p in pods if p["metadata"]["name"] == pod["metadata"]["name"])
        decision = await scheduler.schedule_one(ours, snapshot, [])
        return dict(decision.to_dict())
    finally:
        await scheduler.close()
        await client.close()


def test_the_page_loads_from_the_demo_with_each_allocation_on_its_pod(browser, demo) -> None:
    open_as(browser, demo, demo["tokens"]["admin"])
    driver = browser.driver
    labels = cells(driver)
    held = [c for c in asyncio.run(_claims(demo["kubeconfig"])) if (c.get("status") or {}).get("reservedFor")]
    assert held
    for claim in held:
        ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
        for result in claim["status"]["allocation"]["devices"]["results"]:
            label = labels[(result["pool"], result["device"])]
            parts = dict(part.split(" ", 1) for part in label.split("; ")[1:])
            assert f"{ns}/{name}" in parts["claim"].split(", "), label
            assert {f"{ns}/{c['name']}" for c in claim["status"]["reservedFor"]} <= set(parts["pod"].split(", "))
    # the screenshot docs/images/fleet.png is taken from: a p5 node, one allocated cell focused
    cell = driver.find_element("css selector", '.row[data-node="p5-h100-1"] .cell.s-allocated')
    driver.execute_script("arguments[0].closest('.row').scrollIntoView({block: 'center'}); arguments[0].focus()",
                          cell)
    assert driver.find_element("id", "fleet-tip").is_displayed()
    browser.browser.screenshot(artifacts_dir() / "fleet-demo.png")


def test_the_cells_are_reached_with_the_keyboard_and_carry_text_labels(browser, demo) -> None:
    from selenium.webdriver.common.keys import Keys

    open_as(browser, demo, demo["tokens"]["admin"])
    driver = browser.driver
    driver.find_element("id", "fleet-f-namespace").click()
    for _ in range(10):
        driver.switch_to.active_element.send_keys(Keys.TAB)
        if driver.switch_to.active_element.get_attribute("data-cell"):
            break
    first = driver.switch_to.active_element
    assert first.get_attribute("aria-label").startswith("gpu-0 (")
    assert first.text.split()[0] == "gpu-0" and first.text.split()[1] in ("free", "allocated", "reserved")
    first.send_keys(Keys.ARROW_RIGHT)
    assert driver.switch_to.active_element.text.split()[0] == "gpu-1"
    unlabelled = driver.execute_script("return Array.from(document.querySelectorAll('.cell')).filter(c =>"
                                       " !c.getAttribute('aria-label') || !c.textContent.trim()).length")
    assert unlabelled == 0


def test_a_newly_scheduled_pod_appears_without_a_reload(browser, demo) -> None:
    revision = open_as(browser, demo, demo["tokens"]["admin"])
    driver = browser.driver
    driver.execute_script("window.__sameDocument = true")
    pod = yaml.safe_load((demo["workdir"] / "my-gpu-pod.yaml").read_text())
    pod["metadata"]["name"] = "browser-sees-me"
    decision = asyncio.run(_schedule(demo["kubeconfig"], pod))
    assert decision.get("node"), decision
    browser.browser.wait_for("return Array.from(document.querySelectorAll('.cell')).some(c => "
                             "c.getAttribute('aria-label').includes('pod ml-team/browser-sees-me'))", timeout=15)
    assert int(browser.browser.drawn()) > revision
    assert driver.execute_script("return window.__sameDocument") is True


def test_a_namespace_token_sees_its_namespace_and_filters_narrow_the_page(browser, demo) -> None:
    open_as(browser, demo, demo["tokens"]["ml-team"])
    driver = browser.driver
    assert "showing namespaces ml-team" in driver.find_element("id", "fleet-meta").text
    text = " ".join(cells(driver).values()) + driver.find_element("tag name", "body").text
    assert "research" not in text and "used by a namespace you may not see" in text
    driver.find_element("id", "fleet-f-model").send_keys("T4")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return Array.from(document.querySelectorAll('#fleet-rows .row'))"
                             ".every(r => r.dataset.node.startsWith('gcp-t4-'))", timeout=10)
    assert driver.execute_script("return document.querySelectorAll('#fleet-rows .row').length") == 3


def test_a_token_without_rights_gets_403(browser, demo) -> None:
    driver = browser.driver
    browser.expect_console(r"/fleet - Failed to load resource: the server responded with a status of 403")
    browser.expect_console(r"/favicon.ico - Failed to load resource: .* 404")
    driver.execute_cdp_cmd("Security.setIgnoreCertificateErrors", {"ignore": True})
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                           {"headers": {"Authorization": f"Bearer {demo['tokens']['none']}"}})
    driver.get(demo["url"])
    assert driver.find_elements("id", "fleet-rows") == []
    assert "no-rights" in driver.find_element("tag name", "body").text
