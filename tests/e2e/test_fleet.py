"""The fleet API on `gpuclaim demo --keep`: the extender's fleet port over TLS, access decided by the API double's
TokenReview and SubjectAccessReview over the RBAC objects the demo creates (gpuclaim/demo/viewers.py); `gpuclaim
fleet` (and the `kubectl-gpuclaim` entry point) reading the same stack live; and the page's URL as the demo prints
it in text."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kept_demo import kept_demo

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("fleet-demo")
    with kept_demo(workdir) as report:
        fleet = report["keep"]["fleet"]
        tokens = json.loads(Path(fleet["tokens"]).read_text())
        context = ssl.create_default_context(cafile=fleet["ca"])
        api_ca = workdir / "apiserver-ca.crt"
        yield {"report": report, "fleet": fleet, "tokens": tokens, "context": context,
               "api": report["stack"]["apiserver"]["url"], "api_context": ssl.create_default_context(
                   cafile=str(api_ca))}


def get(demo: dict[str, Any], query: str = "", token: str | None = None, path: str = "/api/v1/fleet"
        ) -> tuple[int, dict[str, str], bytes]:
    base = demo["fleet"]["url"].removesuffix("/fleet")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"{base}{path}{'?' + query if query else ''}", headers=headers)
    try:
        with urllib.request.urlopen(request, context=demo["context"], timeout=30) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def devices(fleet: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(n["name"], d) for n in fleet["nodes"] for g in n["groups"] for d in g["devices"]]


def allocated_claims(demo: dict[str, Any]) -> list[dict[str, Any]]:
    request = urllib.request.Request(demo["api"] + "/apis/resource.k8s.io/v1/resourceclaims",
                                     headers={"Authorization": "Bearer double-token"})
    with urllib.request.urlopen(request, context=demo["api_context"], timeout=30) as reply:
        items = orjson.loads(reply.read())["items"]
    return [c for c in items if (c.get("status") or {}).get("reservedFor")
            and (c["status"].get("allocation") or {}).get("devices", {}).get("results")]


def test_a_known_allocation_shows_its_pod_on_its_device(demo: dict[str, Any]) -> None:
    status, _, body = get(demo, token=demo["tokens"]["admin"])
    assert status == 200
    fleet = orjson.loads(body)
    assert fleet["scope"] == {"clusterWide": True, "namespaces": []}
    by_device = {(d["driver"], d["pool"], d["name"]): d for _, d in devices(fleet)}
    claims = allocated_claims(demo)
    assert claims, "the demo leaves pods running with allocated claims"
    for claim in claims:
        ns = claim["metadata"]["namespace"]
        pods = [{"namespace": ns, "name": r["name"]} for r in claim["status"]["reservedFor"]]
        for result in claim["status"]["allocation"]["devices"]["results"]:
            device = by_device[(result["driver"], result["pool"], result["device"])]
            assert device["state"] == "allocated"
            assert {"namespace": ns, "name": claim["metadata"]["name"]} in device["claims"]
            assert all(p in device["pods"] for p in pods)


def test_without_a_token_401_and_without_rights_403(demo: dict[str, Any]) -> None:
    status, headers, _ = get(demo)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    status, _, _ = get(demo, token="not-a-token-the-apiserver-issued")
    assert status == 401
    status, _, body = get(demo, token=demo["tokens"]["none"])
    assert status == 403 and b"no-rights" in body
    status, _, body = get(demo, path="/fleet")
    assert status == 401 and b"<form" in body


def test_a_namespace_token_sees_its_namespace_and_the_rest_redacted(demo: dict[str, Any]) -> None:
    status, _, body = get(demo, token=demo["tokens"]["ml-team"])
    assert status == 200
    fleet = orjson.loads(body)
    assert fleet["scope"] == {"clusterWide": False, "namespaces": ["ml-team"]}
    namespaces = {x["namespace"] for _, d in devices(fleet) for x in (*d["claims"], *d["pods"])}
    assert namespaces == {"ml-team"}
    assert b"research" not in body  # the other team's claims and pods (and its name) are not in the answer
    redacted = [d for _, d in devices(fleet) if d["redacted"]]
    assert redacted and all(d["state"] in ("allocated", "reserved") and not d["pods"] for d in redacted)
    status, _, body = get(demo, "namespace=research", token=demo["tokens"]["ml-team"])
    assert status == 403 and orjson.loads(body)["parameter"] == "namespace"


def test_since_the_current_revision_is_304(demo: dict[str, Any]) -> None:
    _, _, body = get(demo, token=demo["tokens"]["admin"])
    revision = orjson.loads(body)["revision"]
    status, _, _ = get(demo, f"since={revision}", token=demo["tokens"]["admin"])
    assert status == 304


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["driver", "model", "namespace", "nodeSelector", "since", "bogus"]),
                          st.text(max_size=40)), min_size=1, max_size=3))
def test_hostile_query_strings_get_200_or_a_400_naming_the_parameter(demo: dict[str, Any],
                                                                     pairs: list[tuple[str, str]]) -> None:
    status, _, body = get(demo, urllib.parse.urlencode(pairs), token=demo["tokens"]["admin"])
    if status == 400:
        error = orjson.loads(body)
        assert error["parameter"] and error["message"].startswith(f"{error['parameter']}: ")
    else:
        assert status in (200, 304), body[:300]


def fleet_command(demo: dict[str, Any], *args: str, program: str = "gpuclaim") -> subprocess.CompletedProcess[str]:
    """`gpuclaim fleet ...` (or the `kubectl-gpuclaim` console script kubectl runs as a plugin) against the kept
    demo's API double, live, with the kubeconfig the demo printed."""
    argv = ([sys.executable, "-m", "gpuclaim"] if program == "gpuclaim"
            else [str(Path(sys.executable).parent / program)])
    return subprocess.run([*argv, "fleet", *args, "--kubeconfig", demo["report"]["keep"]["kubeconfig"]],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_gpuclaim_fleet_reads_the_demo_stack_live_as_the_api_shows_it(demo: dict[str, Any]) -> None:
    done = fleet_command(demo, "pods", "-A", "-o", "json")
    assert done.returncode == 0, done.stderr
    view = orjson.loads(done.stdout)
    got = {(p["namespace"], p["name"], c["name"], (d["driver"], d["pool"], d["name"]))
           for p in view["pods"] for c in p["claims"] for d in c["devices"]}
    claims = allocated_claims(demo)
    assert claims
    want = {(c["metadata"]["namespace"], pod["name"], c["metadata"]["name"], (r["driver"], r["pool"], r["device"]))
            for c in claims for pod in c["status"]["reservedFor"]
            for r in c["status"]["allocation"]["devices"]["results"]}
    assert got == want
    # `fleet nodes`: every device in the state, with the holders, that the extender's fleet API shows
    done = fleet_command(demo, "nodes", "-o", "json")
    assert done.returncode == 0, done.stderr
    _, _, body = get(demo, token=demo["tokens"]["admin"])

    def states(fleet: dict[str, Any]) -> dict[tuple[str, str, str], tuple[str, list[Any], list[Any]]]:
        return {(d["driver"], d["pool"], d["name"]): (d["state"], d["pods"], d["claims"]) for _, d in devices(fleet)}

    cli, page = orjson.loads(done.stdout), orjson.loads(body)
    assert states(cli) == states(page) and cli["summary"]["devices"] == page["summary"]["devices"]
    # the kubectl plugin's entry point, text output, one namespace
    done = fleet_command(demo, "pods", "-n", "research", program="kubectl-gpuclaim")
    assert done.returncode == 0, done.stderr
    research = {(ns, pod, claim, "/".join(dev)) for ns, pod, claim, dev in want if ns == "research"}
    assert research
    for _, pod, claim, device in research:
        assert any(line.split()[1] == pod and claim in line and device in line for line in done.stdout.splitlines())
    assert "ml-team" not in done.stdout


@pytest.mark.timeout(300)
def test_the_kept_demo_prints_the_pages_url_where_the_page_answers_until_stopped(tmp_path: Path) -> None:
    """`gpuclaim demo --keep` as a user reads it (text): the URL it prints serves the page to a token from the file
    it names, over TLS with the demo's CA (`<workdir>/tls/ca.crt`, docs/fleet.md), until the printed stop command."""
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "demo", "--keep", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=240, cwd=REPO, check=False)
    pids = [int(m) for m in re.findall(r"^  \S+: pid (\d+)$", done.stdout, re.M)]
    try:
        assert done.returncode == 0, done.stderr[-3000:]
        kept = re.search(r"^  fleet page: (https://\S+/fleet) \(sign in with a token from (\S+)\)$", done.stdout, re.M)
        assert kept, done.stdout[-3000:]
        url, tokens = kept.groups()
        assert f"fleet page {url} (viewer tokens: {tokens})" in done.stdout  # the report's stack lines name it too
        request = urllib.request.Request(url, headers={
            "Authorization": f"Bearer {json.loads(Path(tokens).read_text())['admin']}"})
        context = ssl.create_default_context(cafile=str(tmp_path / "tls" / "ca.crt"))
        with urllib.request.urlopen(request, context=context, timeout=30) as reply:
            page = reply.read().decode()
        assert reply.status == 200 and 'id="fleet-summary"' in page and "showing the whole cluster" in page
        stop = re.search(r"^Stop it with: sh (\S+)$", done.stdout, re.M)
        assert stop and pids
        subprocess.run(["sh", stop.group(1)], check=True, timeout=30)
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(request, context=context, timeout=5)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
