"""The fleet metrics on `gpuclaim demo --keep`: the extender's metrics port (the URL the demo prints) agrees with its
fleet API, read with the demo's cluster-wide viewer token, device state by device state and node by node."""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest
from kept_demo import kept_demo
from prometheus_client.parser import text_string_to_metric_families

from gpuclaim.fleet import metrics

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_demo_extenders_metrics_port_exports_what_its_fleet_api_shows(tmp_path: Path) -> None:
    with kept_demo(tmp_path, timeout=240) as report:
        stack = report["stack"]
        token = json.loads(Path(stack["fleet"]["tokens"]).read_text())["admin"]
        request = urllib.request.Request(stack["fleet"]["api"], headers={"Authorization": f"Bearer {token}"})
        context = ssl.create_default_context(cafile=stack["fleet"]["ca"])
        deadline = time.monotonic() + 60
        while True:  # the index and the scrape read the same cache; wait until both have the whole fleet
            with urllib.request.urlopen(request, context=context, timeout=30) as reply:
                fleet = orjson.loads(reply.read())
            with urllib.request.urlopen(report["stack"]["extender"]["metrics"], timeout=30) as reply:
                text = reply.read().decode()
            families = {f.name: f for f in text_string_to_metric_families(text) if f.name in metrics.NAMES}
            exported = Counter({(s.labels["node"], s.labels["driver"], s.labels["model"], s.labels["state"]): s.value
                                for s in families[metrics.DEVICES].samples}) if families else Counter()
            if fleet["nodes"] and sum(exported.values()) == fleet["summary"]["devices"]["total"]:
                break
            assert time.monotonic() < deadline, "the metrics never counted the fleet the API shows"
            time.sleep(0.5)
        shown: Counter[tuple[str, str, str, str]] = Counter()
        for node in fleet["nodes"]:
            for group in node["groups"]:
                for d in group["devices"]:
                    shown[(node["name"], d["driver"], d["model"] or "", d["state"])] += 1
        assert +exported == shown
        assert shown and any(state == "allocated" for *_, state in shown)  # the demo's busy GPUs
        largest = {(s.labels["node"], s.labels["driver"]): s.value
                   for s in families[metrics.LARGEST_FREE_TIGHT_GROUP].samples}
        stranded = {(s.labels["node"], s.labels["driver"]): s.value for s in families[metrics.STRANDED].samples}
        for node in fleet["nodes"]:
            if len(node["drivers"]) == 1:
                key = (node["name"], node["drivers"][0])
                assert largest[key] == node["summary"]["largestFreeTightGroup"]
                assert stranded[key] == node["summary"]["stranded"]
