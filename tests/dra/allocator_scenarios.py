"""Test-only hypothesis strategies: random allocator scenarios (the shape tests/dra/allocator_oracle.py runs)
for the differential against the upstream allocator.

Every scenario is a set of objects the 1.34 apiserver accepts (gpuclaim's parsers must report no error): several
drivers, pools and slices per pool, pool generations (obsolete slices) and incomplete pools, duplicate device
names (an invalid pool), slices on a node / on all nodes / by node selector (In, NotIn, Exists, DoesNotExist,
Gt, Lt on labels whose values Go's strconv.ParseInt may refuse, matchFields on metadata.name), devices with and
without attributes and capacity (so selectors hit runtime errors), devices with bindingConditions and taints
(requests with tolerations), classes and
requests with CEL selectors over attributes and capacity, ExactCount and All, firstAvailable, adminAccess,
matchAttribute and distinctAttribute (per request list or claim-wide, attributes of one driver or shared across
drivers), devices already allocated, shared devices (allowMultipleAllocations, capacities with request policies:
stepped ranges, discrete values, defaults) with capacity requests (some naming a capacity the device lacks) and
shares other claims already hold (allocatedClaims with shareID and consumedCapacity), and the scheduler's feature
set or a random one.

Slices are listed with pools sorted by (driver, pool) — see allocator_oracle for why.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gpuclaim.dra import api

GPU, NIC = "gpu.example.com", "nic.example.com"
SHARED = "resource.kubernetes.io/pcieRoot"
NODES = ("node-1", "node-2")
# valid label values; "5_0" and 20 digits are int() for Python, not for Go's strconv.ParseInt
RANK_VALUES = ("1", "5", "50", "007", "5_0", "5.0", "99999999999999999999", "abc")
REGIONS = ("r1", "r2")
# Gt/Lt values of slice selectors: valid label values; ParseInt refuses the last two (upstream: allocation error)
GT_VALUES = ("0", "4", "10", "4", "10", "0", "5_0", "99999999999999999999")

SELECTORS = {
    GPU: (
        f'device.attributes["{GPU}"].model == "a100"',
        f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
        f'device.attributes["{GPU}"].numa == 1',
        f'"numa" in device.attributes["{GPU}"] && device.attributes["{GPU}"].numa == 0',
        f'device.attributes["{GPU}"].fast',
        f'device.attributes["{SHARED.split("/")[0]}"].pcieRoot == "pci-0"',
    ),
    NIC: (
        f'device.attributes["{NIC}"].model == "cx7"',
        f'"model" in device.attributes["{NIC}"]',
    ),
}
CLASSES = (
    ("gpu", (f'device.driver == "{GPU}"',)),
    ("nic", (f'device.driver == "{NIC}"',)),
    ("any", ("true",)),
    ("big", (f'device.driver == "{GPU}"', f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0')),
)
CLASS_DRIVER = {"gpu": GPU, "nic": NIC, "any": GPU, "big": GPU}
MATCH_ATTRIBUTES = (f"{GPU}/numa", f"{GPU}/model", f"{GPU}/fast", SHARED, f"{NIC}/model")
FEATURE_KEYS = ("adminAccess", "prioritizedList", "deviceStatus", "deviceTaints", "partitionableDevices")
# from 0.35 on (structured.Features): DeviceBinding and DeviceStatus are one flag; with ConsumableCapacity random
# sets also reach 0.35's experimental and 0.36+'s incubating code, and without it the implementations that ignore
# capacity requests and refuse distinctAttribute
FEATURE_KEYS_35 = ("adminAccess", "prioritizedList", "deviceBindingAndStatus", "deviceTaints", "partitionableDevices",
                   "consumableCapacity")


def rare(draw: st.DrawFn, percent: int) -> bool:
    """True about ``percent``% of the time (hypothesis favours small integers, so the rare side is the top)."""
    return bool(draw(st.integers(0, 99)) >= 100 - percent)


@st.composite
def devices(draw: st.DrawFn, driver: str, prefix: str, version: str = "1.34") -> list[dict[str, Any]]:
    effects = TAINT_EFFECTS if version == "1.34" else (*TAINT_EFFECTS, "None")  # "None" is new in 1.35
    out = []
    names = draw(st.lists(st.integers(0, 7), min_size=0, max_size=5, unique=True))
    for n in names:
        device: dict[str, Any] = {"name": f"{prefix}{n}"}
        attrs: dict[str, Any] = {}
        if driver == GPU:
            if not rare(draw, 15):
                attrs["model"] = {"string": draw(st.sampled_from(["a100", "h100"]))}
            if not rare(draw, 20):
                attrs["numa"] = {"int": draw(st.integers(0, 1))}
            if not rare(draw, 40):
                attrs["fast"] = {"bool": draw(st.booleans())}
            if rare(draw, 25):
                device["allowMultipleAllocations"] = True  # a shared device (DRAConsumableCapacity)
                device["capacity"] = draw(shared_capacity())
            elif not rare(draw, 20):
                device["capacity"] = {"memory": {"value": draw(st.sampled_from(["16Gi", "40Gi", "80Gi"]))}}
        elif not rare(draw, 20):
            attrs["model"] = {"string": draw(st.sampled_from(["cx7", "cx6"]))}
        if not rare(draw, 30):
            attrs[SHARED] = {"string": draw(st.sampled_from(["pci-0", "pci-1"]))}
        if attrs:
            device["attributes"] = attrs
        if rare(draw, 8):  # DRADeviceTaints: excludes the device from requests that do not tolerate it
            device["taints"] = [{"key": draw(st.sampled_from(TAINT_KEYS)), "effect": draw(st.sampled_from(effects))}]
        if rare(draw, 6):
            device["bindingConditions"] = ["IsPrepared"]
            device["bindingFailureConditions"] = ["BindingFailed"]
            if draw(st.booleans()):
                device["bindsToNode"] = True
        out.append(device)
    return out


TAINT_KEYS = ("k0", "k1")
TAINT_EFFECTS = ("NoSchedule", "NoExecute")


@st.composite
def tolerations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One or two tolerations of the taints ``devices`` draws (or of none of them)."""
    out = []
    for _ in range(draw(st.integers(1, 2))):
        t: dict[str, Any] = {"operator": draw(st.sampled_from(["Exists", "Equal"]))}
        if t["operator"] == "Equal" or draw(st.booleans()):
            t["key"] = draw(st.sampled_from(TAINT_KEYS))
        if t["operator"] == "Equal":
            t["value"] = ""
        if draw(st.booleans()):
            t["effect"] = draw(st.sampled_from(TAINT_EFFECTS))
        out.append(t)
    return out


# request policies of a shared device's memory: a stepped range, discrete values, or none; defaults valid under them
MEMORY_POLICIES: tuple[dict[str, Any] | None, ...] = (
    None,
    {"default": "10Gi", "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}},
    {"validRange": {"min": "5Gi"}},
    {"default": "20Gi", "validValues": ["10Gi", "20Gi", "40Gi"]},
    {"default": "16Gi"},
)
CAPACITY_REQUESTS = ("1Gi", "5Gi", "10Gi", "15Gi", "25Gi", "40Gi", "100Gi", "1")


@st.composite
def shared_capacity(draw: st.DrawFn) -> dict[str, Any]:
    """Capacities of a device that allows multiple allocations: memory (maybe with a request policy), maybe cores
    (steps of 1 from 1, default 1), or none at all."""
    if rare(draw, 10):
        return {}
    memory: dict[str, Any] = {"value": draw(st.sampled_from(["40Gi", "80Gi"]))}
    policy = draw(st.sampled_from(MEMORY_POLICIES))
    if policy is not None:
        memory["requestPolicy"] = policy
    out = {"memory": memory}
    if rare(draw, 40):
        out["cores"] = {"value": draw(st.sampled_from(["2", "8"])),
                        "requestPolicy": {"default": "1", "validRange": {"min": "1", "step": "1"}}}  # fmt: skip
    return out


@st.composite
def node_selectors(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["region", "rank-gt", "rank-lt", "exists", "notin", "name"]))
    if kind == "region":
        req = {"key": "region", "operator": "In", "values": [draw(st.sampled_from(REGIONS))]}
    elif kind in ("rank-gt", "rank-lt"):
        req = {"key": "rank", "operator": "Gt" if kind == "rank-gt" else "Lt",
               "values": [draw(st.sampled_from(GT_VALUES))]}  # fmt: skip
    elif kind == "exists":
        req = {"key": "rank", "operator": draw(st.sampled_from(["Exists", "DoesNotExist"]))}
    elif kind == "notin":
        req = {"key": "region", "operator": "NotIn", "values": [draw(st.sampled_from(REGIONS))]}
    else:
        return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                        "values": [draw(st.sampled_from(NODES))]}]}]}  # fmt: skip
    return {"nodeSelectorTerms": [{"matchExpressions": [req]}]}


@st.composite
def pools(draw: st.DrawFn, driver: str, index: int, node: str, version: str = "1.34") -> list[dict[str, Any]]:
    """The slices of one pool: the newest generation (maybe incomplete) and maybe obsolete older ones."""
    name = f"pool-{index}"
    where_kind = draw(st.sampled_from(["node", "node", "all", "selector"]))
    if where_kind == "node":
        where: dict[str, Any] = {"nodeName": draw(st.sampled_from(NODES)) if rare(draw, 25) else node}
    elif where_kind == "all":
        where = {"allNodes": True}
    else:
        where = {"nodeSelector": draw(node_selectors())}
    generation = draw(st.integers(1, 3))
    count = draw(st.integers(1, 2))
    present = draw(st.integers(1, count)) if rare(draw, 15) else count  # sometimes incomplete
    slices = []
    if generation > 1 and draw(st.booleans()):
        slices.append(_slice(driver, name, generation - 1, count, f"old-{index}", where,
                             draw(devices(driver, "old-", version))))  # fmt: skip
    for k in range(present):
        # the same name prefix in two slices of a pool may repeat a device name: the pool is invalid
        prefix = "d0-" if k and rare(draw, 15) else f"d{k}-"
        slices.append(_slice(driver, name, generation, count, f"s{index}-{k}", where,
                             draw(devices(driver, prefix, version))))  # fmt: skip
    return slices


def _slice(driver: str, pool: str, generation: int, count: int, name: str, where: dict[str, Any],
           devs: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    spec = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            **where, "devices": devs}  # fmt: skip
    return {"apiVersion": api.API_VERSION, "kind": "ResourceSlice", "metadata": {"name": f"{driver[:3]}-{name}"},
            "spec": spec}  # fmt: skip


@st.composite
def exact_request(draw: st.DrawFn, sub: bool) -> dict[str, Any]:
    klass = draw(st.sampled_from([c[0] for c in CLASSES]))
    body: dict[str, Any] = {"deviceClassName": klass}
    mode = "All" if rare(draw, 12) else "ExactCount"
    body["allocationMode"] = mode
    if mode == "ExactCount":
        body["count"] = 33 if rare(draw, 1) else draw(st.sampled_from([1, 1, 1, 2, 3]))
    if rare(draw, 35):
        body["selectors"] = [{"cel": {"expression": draw(st.sampled_from(SELECTORS[CLASS_DRIVER[klass]]))}}]
    if not sub and rare(draw, 8):
        body["adminAccess"] = True
    if rare(draw, 15):  # copied into each result by the versions whose allocator does (allocator_oracle)
        body["tolerations"] = draw(tolerations())
    if rare(draw, 30):  # DRAConsumableCapacity: capacity requests (a name a device lacks makes it not fit)
        wanted = {draw(st.sampled_from(["memory", "memory", "cores", f"{GPU}/memory"])):
                  draw(st.sampled_from(CAPACITY_REQUESTS)) for _ in range(draw(st.integers(1, 2)))}  # fmt: skip
        body["capacity"] = {"requests": wanted}
    return body


@st.composite
def claims(draw: st.DrawFn, index: int) -> dict[str, Any]:
    requests = []
    for r in range(draw(st.sampled_from([1, 1, 2, 3]))):
        if rare(draw, 25):
            subs = [{"name": f"s{k}", **draw(exact_request(True))} for k in range(draw(st.integers(1, 3)))]
            requests.append({"name": f"r{r}", "firstAvailable": subs})
        else:
            requests.append({"name": f"r{r}", "exactly": draw(exact_request(False))})
    devices_spec: dict[str, Any] = {"requests": requests}
    constraints = []
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        kind = "distinctAttribute" if rare(draw, 25) else "matchAttribute"
        constraint: dict[str, Any] = {kind: draw(st.sampled_from(MATCH_ATTRIBUTES))}
        if len(requests) > 1 and draw(st.booleans()):
            names = draw(st.lists(st.sampled_from([r["name"] for r in requests]), min_size=1, unique=True))
            constraint["requests"] = names
        constraints.append(constraint)
    if constraints:
        devices_spec["constraints"] = constraints
    return {"apiVersion": api.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": f"claim-{index}", "namespace": "ns"}, "spec": {"devices": devices_spec}}  # fmt: skip


@st.composite
def holder(draw: st.DrawFn, index: int, driver: str, pool: str, device: dict[str, Any]) -> dict[str, Any]:
    """An allocated claim holding one or two shares of a shared device (results with shareID and what they
    consume), or rarely a dedicated result for it (the device was not shared when that claim was allocated)."""
    results = []
    for k in range(draw(st.integers(1, 2))):
        result: dict[str, Any] = {"request": "r0", "driver": driver, "pool": pool, "device": device["name"]}
        if not rare(draw, 10):
            result["shareID"] = f"00000000-0000-4000-8000-{index:06d}{k:06d}"
            consumed = {name: draw(st.sampled_from(["5Gi", "10Gi", "20Gi", "40Gi"])) if name == "memory" else "1"
                        for name in device.get("capacity", {})}  # fmt: skip
            if consumed:
                result["consumedCapacity"] = consumed
        results.append(result)
    return {"apiVersion": api.API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": f"holder-{index}", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}  # fmt: skip


@st.composite
def scenarios(draw: st.DrawFn, version: str = "1.34") -> dict[str, Any]:
    """A scenario for ``version``'s oracle (its ``features`` are named as that version's library names them)."""
    node_name = draw(st.sampled_from(NODES))
    labels = {}
    if not rare(draw, 25):
        labels["region"] = draw(st.sampled_from(REGIONS))
    if not rare(draw, 30):
        labels["rank"] = draw(st.sampled_from(RANK_VALUES))
    slices: list[dict[str, Any]] = []
    for i in range(0 if rare(draw, 3) else draw(st.integers(1, 4))):
        slices.extend(draw(pools(draw(st.sampled_from([GPU, GPU, NIC])), i, node_name, version)))
    slices.sort(key=lambda s: (s["spec"]["driver"], s["spec"]["pool"]["name"]))
    ids = [f"{s['spec']['driver']}/{s['spec']['pool']['name']}/{d['name']}"
           for s in slices for d in s["spec"]["devices"]]  # fmt: skip
    allocated = sorted(set(draw(st.lists(st.sampled_from(ids), max_size=3)))) if ids else []
    shared = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d) for s in slices for d in s["spec"]["devices"]
              if d.get("allowMultipleAllocations")]  # fmt: skip
    holders = [draw(holder(k, *entry)) for k, entry in enumerate(shared) if rare(draw, 50)]
    scenario: dict[str, Any] = {
        "node": {"name": node_name, "labels": labels},
        "slices": slices,
        "classes": [{"apiVersion": api.API_VERSION, "kind": "DeviceClass", "metadata": {"name": name},
                     "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}} for name, exprs in CLASSES],
        "allocatedDevices": allocated,
        "claims": [draw(claims(i)) for i in range(draw(st.integers(1, 2)))],
    }  # fmt: skip
    if holders:
        scenario["allocatedClaims"] = holders
    if rare(draw, 20):  # else that version's scheduler's default gates
        keys = FEATURE_KEYS if version == "1.34" else FEATURE_KEYS_35
        scenario["features"] = {k: not rare(draw, 25) for k in keys}
    return scenario
