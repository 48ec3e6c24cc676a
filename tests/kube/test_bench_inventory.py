"""The cache benchmark's generated inventory is valid 1.34 (the double loads it without validating)."""

from __future__ import annotations

from pathlib import Path

import orjson
from official_schemas import assert_valid

from e2e.bench import cache as bench


def test_every_kind_the_benchmark_generates_validates_against_1_34(tmp_path: Path) -> None:
    bench.generate(tmp_path, nodes=3, claims=5, namespaces=2)
    seen = set()
    for path in sorted(tmp_path.iterdir()):
        for item in orjson.loads(path.read_bytes())["items"]:
            assert_valid(item)
            seen.add(item["kind"])
    assert seen == {"Namespace", "Node", "ResourceSlice", "ResourceClaim", "DeviceClass"}


def test_claims_allocate_distinct_devices_of_existing_slices() -> None:
    nodes, claims = 4, 20
    allocated = [bench._claim(i, nodes, 2)["status"]["allocation"]["devices"]["results"][0] for i in range(claims)]
    ids = {(r["pool"], r["device"]) for r in allocated}
    assert len(ids) == claims
    devices = {(s["spec"]["pool"]["name"], d["name"]) for s in map(bench._slice, range(nodes))
               for d in s["spec"]["devices"]}
    assert ids <= devices
