"""The fleet page through the fleet port's own app (gpuclaim/fleet/api.py) in headless Chromium.

The app is the one the extender serves, with a FleetIndex fed the demo inventory's objects as cache events. The
access verdicts come from fleet-core's table reviewer (tests/fleet/test_access.py): the RBAC evaluation itself is
the apiserver's, tested on real apiservers; here the browser's side of it is checked: signing in with a token, the
401 and 403 pages, a namespace-scoped viewer's page. Also: the cells of a known allocation show its pod, a pod
scheduled later appears without a reload, the filters reach the API and narrow the page.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser_harness import Served, serve_in_thread

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
from test_access import reviewer

from gpuclaim.demo import inventory
from gpuclaim.dra.config import load_config
from gpuclaim.fleet import access, api, model

CONFIG = load_config({})
GAUDI = Path(__file__).resolve().parents[1] / "fixtures" / "resourceslices" / "intel-gaudi2-2dev.yaml"


def claim(namespace: str, name: str, pool: str, device: str, pod: str | None) -> dict[str, Any]:
    """A claim allocated on one device, reserved for ``pod`` (as kube-scheduler leaves it) or for nobody."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}] if pod else []}}


@pytest.fixture
def fleet_app() -> Iterator[tuple[Served, model.FleetIndex]]:
    demo = inventory.build()
    index = model.FleetIndex(CONFIG)
    for kind in ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim"):
        for obj in demo.of_kind(kind):
            index.on_event(kind, "ADDED", copy.deepcopy(obj))
    index.on_event("ResourceClaim", "ADDED", claim("team-a", "alice-nb-gpu", "p5-h100-0", "gpu-0", "alice-nb"))
    with serve_in_thread(lambda: api.create_app(CONFIG, index=index, access=access.Access(reviewer()))) as served:
        yield served, index


def sign_in(browser: Any, url: str, token: str) -> None:
    """Every request of the browser carries ``Authorization: Bearer <token>``, as behind an authenticating proxy
    (the sign-in form is test_the_sign_in_form_keeps_the_token_in_a_cookie)."""
    browser.driver.execute_cdp_cmd("Network.enable", {})
    browser.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {token}"}})
    browser.driver.get(url + "/fleet")


def labels_of(driver: Any) -> dict[tuple[str, str], str]:
    cells = driver.execute_script("""
        return Array.from(document.querySelectorAll('#fleet-rows .row')).flatMap(r =>
          Array.from(r.querySelectorAll('.cell')).map(c => [r.dataset.node, c.querySelector('.dn').textContent,
                                                             c.getAttribute('aria-label')]));""")
    return {(node, name): label for node, name, label in cells}


def test_a_cluster_wide_viewer_signs_in_and_sees_every_pod_on_its_devices(browser, fleet_app) -> None:
    served, index = fleet_app
    sign_in(browser, served.url, "t-admin")
    browser.browser.drawn(timeout=15)
    driver = browser.driver
    assert "showing the whole cluster" in driver.find_element("id", "fleet-meta").text
    labels = labels_of(driver)
    assert len(labels) == served.call(lambda: index.fleet_summary()["devices"]["total"])
    for device in ("gpu-0", "gpu-1", "gpu-5"):
        assert "pod research/llm-finetune-0; claim research/llm-finetune-0-gpus; namespace research" in \
            labels[("p5-h100-1", device)]
    assert "pod team-a/alice-nb" in labels[("p5-h100-0", "gpu-0")]
    assert labels[("p5-h100-1", "gpu-6")].endswith(": free")
    # the server-rendered summary and the one fleet.js draws agree
    devices = driver.find_element("css selector", '#fleet-summary [data-field="devices"]').text
    assert devices.startswith(f"{len(labels)} devices: ")


def test_a_pod_scheduled_later_appears_without_a_reload(browser, fleet_app) -> None:
    served, index = fleet_app
    sign_in(browser, served.url, "t-admin")
    first = browser.browser.drawn(timeout=15)
    driver = browser.driver
    driver.execute_script("window.__sameDocument = true")
    pending = claim("research", "late-gpu", "p5-h100-2", "gpu-3", None)
    served.call(lambda: index.on_event("ResourceClaim", "ADDED", pending))   # allocated, nobody runs it yet
    browser.browser.wait_for("return document.documentElement.getAttribute('data-drawn-revision') !== "
                             f"'{first}'", timeout=10)
    assert labels_of(driver)[("p5-h100-2", "gpu-3")].startswith("gpu-3 (NVIDIA H100 80GB HBM3): reserved")
    second = browser.browser.drawn(timeout=1)
    bound = claim("research", "late-gpu", "p5-h100-2", "gpu-3", "late-0")
    served.call(lambda: index.on_event("ResourceClaim", "MODIFIED", bound))   # the scheduler bound the pod
    browser.browser.wait_for("return document.documentElement.getAttribute('data-drawn-revision') !== "
                             f"'{second}'", timeout=10)
    label = labels_of(driver)[("p5-h100-2", "gpu-3")]
    assert label.startswith("gpu-3 (NVIDIA H100 80GB HBM3): allocated") and "pod research/late-0" in label
    assert driver.execute_script("return window.__sameDocument") is True


def test_a_namespace_scoped_viewer_sees_only_its_namespace(browser, fleet_app) -> None:
    served, _ = fleet_app
    sign_in(browser, served.url, "t-alice")
    browser.browser.drawn(timeout=15)
    driver = browser.driver
    assert "showing namespaces team-a" in driver.find_element("id", "fleet-meta").text
    labels = labels_of(driver)
    assert "pod team-a/alice-nb" in labels[("p5-h100-0", "gpu-0")]
    held = labels[("p5-h100-1", "gpu-0")]
    assert held.endswith("allocated; used by a namespace you may not see")
    page_text = driver.find_element("tag name", "body").text + " ".join(labels.values())
    assert "research" not in page_text and "llm-finetune" not in page_text
    # asking for another namespace is refused, and the page says so
    browser.expect_console(r"api/v1/fleet\?namespace=research.* 403")
    driver.find_element("id", "fleet-f-namespace").send_keys("research")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.getElementById('fleet-status').textContent.includes('HTTP 403')")
    assert "namespace: you may not list pods in namespace 'research'" in driver.find_element("id", "fleet-status").text


@pytest.mark.parametrize(("token", "status", "words"), [
    ("", 401, "Bearer token"),
    ("t-nobody", 401, "Bearer token"),
    ("t-bob", 403, "bob"),
], ids=["no-token", "unknown-token", "no-rights"])
def test_a_viewer_without_rights_gets_the_sign_in_page_not_the_fleet(browser, fleet_app, token, status,
                                                                      words) -> None:
    served, _ = fleet_app
    driver = browser.driver
    browser.expect_console(rf"/fleet - Failed to load resource: the server responded with a status of {status}")
    browser.expect_console(r"/favicon.ico - Failed to load resource: .* 404")   # the sign-in page has no icon
    if token:
        sign_in(browser, served.url, token)
    else:
        driver.get(served.url + "/fleet")
    assert driver.find_elements("id", "fleet-rows") == []
    assert words in driver.find_element("tag name", "body").text
    # and the API itself, asked from the page's origin with the same credentials
    browser.expect_console(rf"/api/v1/fleet - Failed to load resource: .* {status}")
    answer = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/v1/fleet', {credentials: 'same-origin'}).then(r => done(r.status));""")
    assert answer == status


def test_the_sign_in_form_keeps_the_token_in_a_cookie(browser, fleet_app) -> None:
    served, _ = fleet_app
    driver = browser.driver
    browser.expect_console(r"/fleet - Failed to load resource: the server responded with a status of 401")
    browser.expect_console(r"/favicon.ico - Failed to load resource: .* 404")
    driver.get(served.url + "/fleet")
    driver.find_element("css selector", "input[name=token]").send_keys("t-admin")
    driver.find_element("css selector", "form button[type=submit]").click()
    browser.browser.drawn(timeout=15)
    assert any(c["name"] == api.COOKIE and c["httpOnly"] for c in driver.get_cookies())


def test_the_filters_reach_the_api_and_narrow_the_page(browser, fleet_app) -> None:
    served, _ = fleet_app
    sign_in(browser, served.url, "t-admin")
    first = browser.browser.drawn(timeout=15)
    driver = browser.driver
    all_nodes = driver.execute_script("return document.querySelectorAll('#fleet-rows .row').length")
    driver.find_element("id", "fleet-f-model").send_keys("T4")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.querySelectorAll('#fleet-rows .row').length === 3")
    nodes = driver.execute_script("return Array.from(document.querySelectorAll('#fleet-rows .row'))"
                                  ".map(r => r.dataset.node)")
    assert nodes == ["gcp-t4-0", "gcp-t4-1", "gcp-t4-2"] and all_nodes == 19
    assert driver.current_url.endswith("/fleet?model=T4")
    # a node label, in the API's selector syntax; the server renders the same view from the address
    driver.find_element("id", "fleet-f-model").clear()
    selector = "nvidia.com/gpu.product in (Tesla-T4,NVIDIA-H100-80GB-HBM3)"
    driver.find_element("id", "fleet-f-nodeSelector").send_keys(selector)
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.querySelectorAll('#fleet-rows .row').length === 11")
    driver.refresh()
    rows = driver.execute_script("return document.querySelectorAll('#fleet-rows .row').length")
    assert rows == 11 and first >= 1
    # a bad selector is answered 400, naming the parameter, and shown
    browser.expect_console(r"api/v1/fleet\?nodeSelector=.* 400")
    field = driver.find_element("id", "fleet-f-nodeSelector")
    field.clear()
    field.send_keys("zone in (a")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.getElementById('fleet-status').textContent.includes('HTTP 400')")
    assert "nodeSelector" in driver.find_element("id", "fleet-status").text


def test_the_driver_and_namespace_filters_narrow_the_page(browser, fleet_app) -> None:
    """A second driver's node (the real Intel Gaudi2 slice of tests/fixtures/resourceslices/intel-gaudi2-2dev.yaml):
    the driver filter shows it alone, and a namespace shows only the devices that namespace's claims hold."""
    served, index = fleet_app
    gaudi = yaml.safe_load(GAUDI.read_text())
    served.call(lambda: index.on_event("Node", "ADDED", {"apiVersion": "v1", "kind": "Node",
                                                         "metadata": {"name": "rpl-s", "labels": {}}}))
    served.call(lambda: index.on_event("ResourceSlice", "ADDED", gaudi))
    sign_in(browser, served.url, "t-admin")
    browser.browser.drawn(timeout=15)
    driver = browser.driver
    assert driver.execute_script("return document.querySelectorAll('#fleet-rows .row').length") == 20
    driver.find_element("id", "fleet-f-driver").send_keys("gaudi.intel.com")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.querySelectorAll('#fleet-rows .row').length === 1")
    assert list(labels_of(driver)) == [("rpl-s", "0000-a0-00-0-0x1020"), ("rpl-s", "0000-b0-00-0-0x1020")]
    assert all(label.endswith(": free") for label in labels_of(driver).values())
    assert driver.find_element("css selector", '#fleet-summary [data-field="devices"]').text.startswith("2 devices")
    assert driver.current_url.endswith("/fleet?driver=gaudi.intel.com")
    driver.find_element("id", "fleet-f-driver").clear()
    driver.find_element("id", "fleet-f-namespace").send_keys("team-a")
    driver.find_element("css selector", "#fleet-filters button[type=submit]").click()
    browser.browser.wait_for("return document.querySelectorAll('#fleet-rows .row').length === 1 && "
                             "document.querySelector('#fleet-rows .row').dataset.node === 'p5-h100-0'")
    (label,) = labels_of(driver).values()
    assert label.startswith("gpu-0 (NVIDIA H100 80GB HBM3): allocated") and "pod team-a/alice-nb" in label
    assert driver.current_url.endswith("/fleet?namespace=team-a")
