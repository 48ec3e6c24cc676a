"""The fleet page in headless Chromium on the real control plane (one run per minor under test): the extender's
fleet port as `python -m e2e.kube up` runs it, viewers' tokens from TokenRequest, decided by the real apiserver's
TokenReview and SubjectAccessReview over real RBAC, a pod the real kube-scheduler places appearing on the page
without a reload. Chromium as in tests/browser/ (skips with the reason without it; fails with GPUCLAIM_BROWSER=
require); it accepts the cluster's self-issued serving certificate (DevTools' Security domain)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realkube_cluster import Kube, gpu_pod

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
from browser_harness import Browser, artifacts_dir, chromium_session

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    yield from chromium_session()


def _token(kube: Kube, ns: str, name: str) -> str:
    kube.api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": ns, "name": name}})
    answer = kube.api.call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(answer["status"]["token"])


def _open(browser: Browser, url: str, token: str) -> None:
    driver = browser.driver
    driver.execute_cdp_cmd("Security.setIgnoreCertificateErrors", {"ignore": True})
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {token}"}})
    driver.get(url)


def _labels(driver: Any) -> list[str]:
    return list(driver.execute_script(
        "return Array.from(document.querySelectorAll('.cell')).map(c => c.getAttribute('aria-label'))"))


def test_the_fleet_page_on_the_real_control_plane(kube: Kube, chromium: Browser) -> None:
    url = f"https://127.0.0.1:{kube.state['gpuclaimPorts']['fleet']}/fleet"
    suffix = uuid.uuid4().hex[:6]
    role = f"fleet-page-viewer-{suffix}"
    with kube.scratch_namespace("fleet-page") as ns:
        kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": role},
                         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                                   {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                                    "verbs": ["list"]}]})
        ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}
        kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
                         "roleRef": ref, "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": "admin"}]})
        kube.api.create({"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                         "metadata": {"namespace": ns, "name": role}, "roleRef": ref,
                         "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": "viewer"}]})
        try:
            tokens = {name: _token(kube, ns, name) for name in ("admin", "viewer", "nobody")}
            chromium.console()
            _open(chromium, url, tokens["admin"])
            first = chromium.drawn(timeout=30)
            driver = chromium.driver
            driver.execute_script("window.__sameDocument = true")
            assert "showing the whole cluster" in driver.find_element("id", "fleet-meta").text
            # a pod the real scheduler places shows up on its device without a reload
            kube.api.create(gpu_pod("page-sees-me", ns))
            pod = kube.wait_bound(ns, "page-sees-me", timeout=60)
            assert pod["spec"].get("nodeName"), pod.get("status")
            chromium.wait_for("return Array.from(document.querySelectorAll('.cell')).some(c => c.getAttribute("
                              f"'aria-label').includes('pod {ns}/page-sees-me'))", timeout=30)
            assert chromium.drawn() != first and driver.execute_script("return window.__sameDocument") is True
            held = [label for label in _labels(driver) if f"pod {ns}/page-sees-me" in label]
            assert len(held) == 1 and ": allocated; " in held[0] and f"namespace {ns}" in held[0]
            chromium.screenshot(artifacts_dir() / f"fleet-realkube-{kube.minor}.png")
            assert chromium.console_errors() == []
            # a viewer bound in the namespace sees it, and nothing of other namespaces by name
            _open(chromium, url, tokens["viewer"])
            chromium.drawn(timeout=30)
            assert f"showing namespaces {ns}" in driver.find_element("id", "fleet-meta").text
            labels = _labels(driver)
            assert any(f"pod {ns}/page-sees-me" in label for label in labels)
            assert all("pod " not in label or f"pod {ns}/" in label for label in labels)
            assert chromium.console_errors() == []
            # an account without rights: 403, no fleet
            _open(chromium, url, tokens["nobody"])
            assert driver.find_elements("id", "fleet-rows") == []
            errors = chromium.console_errors()
            assert errors and all(" 403" in e or "favicon.ico" in e for e in errors), errors
        finally:
            driver = chromium.driver
            driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
            driver.get("about:blank")
            kube.api.delete(f"/apis/{RBAC}/v1/clusterrolebindings/{role}", grace=None)
            kube.api.delete(f"/apis/{RBAC}/v1/clusterroles/{role}", grace=None)
