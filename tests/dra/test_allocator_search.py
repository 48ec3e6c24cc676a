"""The allocator's search and its errors, on small made-up fleets (tests/dra/allocator_fleet.py)."""

from __future__ import annotations

from allocator_fleet import DRIVER, claim, exact, gpu, klass, slice_

from gpuclaim.dra import api
from gpuclaim.dra.allocator import NodeInfo, allocate
from gpuclaim.dra.allocator import model as amodel

N1 = NodeInfo("n1", {"zone": "a"})
CLASSES = {"gpu": klass()}


def _devices(outcome: amodel.AllocationOutcome) -> list[str]:
    assert outcome.status == "allocated", outcome
    return [r.device for c in outcome.claims for r in c.results]


def test_a_missing_attribute_in_a_request_selector_aborts_with_upstream_wording() -> None:
    slices = [slice_("n1", [gpu("g0")])]
    outcome = allocate(N1, [claim(exact("r", 1, "gpu", f"device.attributes['{DRIVER}'].model == 'x'"))],
                       slices=slices, classes=CLASSES)  # fmt: skip
    assert outcome.status == "error"
    assert outcome.error is not None and outcome.error.startswith("claim ns/c: selector #0: CEL runtime error: ")
    assert "gpu.example.com/n1/g0" in outcome.error


def test_a_class_selector_runtime_error_names_the_class_and_index() -> None:
    classes = {"gpu": klass("gpu", f"device.driver == '{DRIVER}'", f"device.attributes['{DRIVER}'].nope")}
    outcome = allocate(N1, [claim(exact())], slices=[slice_("n1", [gpu("g0")])], classes=classes)
    assert outcome.status == "error" and outcome.error is not None
    assert outcome.error.startswith("class gpu: selector #1: CEL runtime error: ")


def test_selectors_stop_at_the_first_false_so_later_ones_never_fail() -> None:
    classes = {"gpu": klass("gpu", "device.driver == 'other'", f"device.attributes['{DRIVER}'].nope")}
    outcome = allocate(N1, [claim(exact())], slices=[slice_("n1", [gpu("g0")])], classes=classes)
    assert outcome.status == "unsatisfiable"


def test_a_compile_error_surfaces_only_when_a_device_is_checked() -> None:
    bad = claim(exact("r", 1, "gpu", "noSuchVar"))
    assert allocate(N1, [bad], slices=[], classes=CLASSES).status == "unsatisfiable"
    outcome = allocate(N1, [bad], slices=[slice_("n1", [gpu("g0")])], classes=CLASSES)
    assert outcome.status == "error" and outcome.error is not None
    assert outcome.error.startswith("claim ns/c: selector #0: CEL compile error: compilation failed:")


def test_unknown_class_is_an_error_not_unschedulable() -> None:
    outcome = allocate(N1, [claim(exact("r", 1, "missing"))], slices=[slice_("n1", [gpu("g0")])], classes=CLASSES)
    assert outcome.status == "error"
    assert outcome.error == ('claim ns/c, request r: could not retrieve device class missing: '
                             'deviceclass.resource.k8s.io "missing" not found')  # fmt: skip


def test_the_search_budget_is_reported_distinctly() -> None:
    slices = [slice_("n1", [gpu(f"g{i}", numa=i % 2) for i in range(12)])]
    same_numa = [{"matchAttribute": f"{DRIVER}/numa"}]
    claims = [claim(exact("r", 3), constraints=same_numa, name=f"c{i}") for i in range(4)]
    full = allocate(N1, claims, slices=slices, classes=CLASSES)
    assert full.status == "allocated" and full.steps > 10
    small = allocate(N1, claims, slices=slices, classes=CLASSES, max_steps=10)
    assert small.status == "budget" and small.error == "search budget exhausted" and small.steps == 11
    # five such claims cannot fit in 12 devices: proving it takes an exhaustive search, which the budget cuts
    five = [claim(exact("r", 3), constraints=same_numa, name=f"c{i}") for i in range(5)]
    assert allocate(N1, five, slices=slices, classes=CLASSES, max_steps=2_000).status == "budget"


def test_more_than_32_devices_in_a_claim_is_an_error_and_first_available_can_avoid_it() -> None:
    slices = [slice_("n1", [gpu(f"g{i}") for i in range(40)])]
    too_many = allocate(N1, [claim(exact("a", 20), exact("b", 13))], slices=slices, classes=CLASSES)
    assert too_many.error == "claim ns/c: number of requested devices 33 exceeds the claim limit of 32"
    first = {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "count": 13},
                                             {"name": "small", "deviceClassName": "gpu", "count": 12}]}  # fmt: skip
    outcome = allocate(N1, [claim(exact("a", 20), first)], slices=slices, classes=CLASSES)
    assert {r.request for r in outcome.claims[0].results} == {"a", "b/small"}


def test_incomplete_pool_serves_exact_count_but_fails_all() -> None:
    slices = [slice_("n1", [gpu("g0")], count=2)]
    assert _devices(allocate(N1, [claim(exact())], slices=slices, classes=CLASSES)) == ["g0"]
    outcome = allocate(N1, [claim(exact("r", allocationMode="All"))], slices=slices, classes=CLASSES)
    assert outcome.error == ("claim ns/c, request r: asks for all devices, but resource pool gpu.example.com/n1 "
                             "is currently being updated")  # fmt: skip


def test_only_the_newest_pool_generation_counts() -> None:
    slices = [slice_("n1", [gpu("old")], generation=1), slice_("n1", [gpu("new")], generation=2)]
    assert _devices(allocate(N1, [claim(exact("r", allocationMode="All"))], slices=slices, classes=CLASSES)) == ["new"]


def test_all_with_a_device_breaking_a_constraint_is_an_error() -> None:
    slices = [slice_("n1", [gpu("g0", numa=0), gpu("g1", numa=1)])]
    constrained = claim(exact("r", allocationMode="All"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    outcome = allocate(N1, [constrained], slices=slices, classes=CLASSES)
    assert outcome.error == ("claim ns/c, request r: cannot add device gpu.example.com/n1/g1 because a claim "
                             "constraint would not be satisfied")  # fmt: skip


def test_match_attribute_compares_typed_values() -> None:
    # int 1 and bool true are different values even though Python says 1 == True
    slices = [slice_("n1", [gpu("g0", x=1), gpu("g1", x=True), gpu("g2", x=1)])]
    outcome = allocate(N1, [claim(exact("r", 2), constraints=[{"matchAttribute": f"{DRIVER}/x"}])],
                       slices=slices, classes=CLASSES)  # fmt: skip
    assert _devices(outcome) == ["g0", "g2"]


def test_backtracking_crosses_claims() -> None:
    slices = [slice_("n1", [gpu("big", mem=2), gpu("small", mem=1)])]
    sel = f"device.attributes['{DRIVER}'].mem >= "
    claims = [claim(exact("r", 1, "gpu", sel + "1"), name="first"),
              claim(exact("r", 1, "gpu", sel + "2"), name="second")]  # fmt: skip
    outcome = allocate(N1, claims, slices=slices, classes=CLASSES)
    assert [[r.device for r in c.results] for c in outcome.claims] == [["small"], ["big"]]


def test_network_attached_and_all_nodes_slices_shape_the_node_selector() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    slices = [slice_(None, [gpu("net0")], pool="net", nodeSelector=selector),
              slice_(None, [gpu("any0")], pool="everywhere", allNodes=True)]  # fmt: skip
    net = allocate(N1, [claim(exact("r", 1))], slices=[slices[0]], classes=CLASSES)
    assert amodel.node_selector_to_dict(net.claims[0].node_selector) == selector  # type: ignore[arg-type]
    anywhere = allocate(N1, [claim(exact("r", 2))], slices=slices, classes=CLASSES)
    assert sorted(_devices(anywhere)) == ["any0", "net0"]
    only_all = allocate(N1, [claim(exact("r", 1))], slices=[slices[1]], classes=CLASSES)
    assert only_all.claims[0].node_selector is None
    assert allocate(NodeInfo("n2", {"zone": "b"}), [claim(exact("r", 2))], slices=slices,
                    classes=CLASSES).status == "unsatisfiable"  # fmt: skip


def test_admin_access_cannot_take_the_same_device_twice_in_its_claim() -> None:
    slices = [slice_("n1", [gpu("g0")])]
    taken = {api.DeviceID(DRIVER, "n1", "g0")}
    admin = claim(exact("a", 1, adminAccess=True), exact("b", 1, adminAccess=True))
    assert allocate(N1, [admin], slices=slices, classes=CLASSES, allocated=taken).status == "unsatisfiable"
    one = allocate(N1, [claim(exact("a", 1, adminAccess=True))], slices=slices, classes=CLASSES, allocated=taken)
    assert one.claims[0].results[0].admin_access


def test_disabled_features_are_errors_as_upstream() -> None:
    slices = [slice_("n1", [gpu("g0")])]
    off = amodel.Features(admin_access=False, prioritized_list=False)
    admin = allocate(N1, [claim(exact("a", 1, adminAccess=True))], slices=slices, classes=CLASSES, features=off)
    assert admin.error == "claim ns/c, request a: admin access is requested, but the feature is disabled"
    first = {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}
    prio = allocate(N1, [claim(first)], slices=slices, classes=CLASSES, features=off)
    assert prio.error == "claim ns/c, request b: has subrequests, but the DRAPrioritizedList feature is disabled"
