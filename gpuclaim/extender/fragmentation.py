"""What a pick leaves behind on the node: free matching devices and whole units.

- Matching devices: the node's devices that any alternative of the pod's pending requests could take (class
  and request selectors true). ``free_before`` excludes devices other claims hold; ``free_after`` also the pick.
- Units (``NodeTopology.unit``): a MIG parent, else a PCIe root (the heaviest attribute source), else the
  device. A unit is whole while none of its devices is held. ``broken``: units the pick takes from whole.

``binpack`` (kube-scheduler's MostAllocated, by ratio): ``fit = 1 - free_after / matching``; the pick should also
keep whole units whole (``whole = 1 - broken / units touched``), so ``F = 0.7 fit + 0.3 whole``: the node where
the pod finishes off a partly used GPU, MIG parent or PCIe pair wins, and an empty node stays empty.
``spread`` (LeastAllocated): ``F = free_after / matching``.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuclaim.dra.api import DeviceID
from gpuclaim.dra.topology import NodeTopology

Policy = Literal["binpack", "spread"]
FIT_WEIGHT = 0.7
WHOLE_WEIGHT = 0.3


@dataclass(frozen=True, slots=True)
class Fragmentation:
    value: float  # 0..1, higher is better under the policy
    matching: int
    free_before: int
    free_after: int
    units_touched: int
    broken: int

    def describe(self, policy: Policy) -> str:
        text = f"leaves {self.free_after} of {self.matching} matching devices free"
        if policy == "binpack" and self.units_touched:
            text += f", takes {self.broken} of {self.units_touched} units it uses from whole"
        return f"{text} ({policy} {self.value:.2f})"


def fragmentation(
    *,
    policy: Policy,
    matching: Sequence[DeviceID],
    held: Collection[DeviceID],
    picked: Collection[DeviceID],
    all_devices: Sequence[DeviceID],
    topology: NodeTopology,
) -> Fragmentation:
    """``held``: devices other claims hold on this node; ``picked``: what the pod takes (adminAccess excluded)."""
    free_before = [d for d in matching if d not in held]
    free_after = sum(1 for d in free_before if d not in picked)
    total = len(matching)
    touched: set[Hashable] = {topology.unit(d) for d in picked}
    held_units = {topology.unit(d) for d in all_devices if d in held}
    broken = sum(1 for u in touched if u not in held_units)
    if total == 0:
        value = 0.0
    elif policy == "spread":
        value = free_after / total
    else:
        fit = 1 - free_after / total
        whole = 1 - broken / len(touched) if touched else 1.0
        value = FIT_WEIGHT * fit + WHOLE_WEIGHT * whole
    return Fragmentation(value=value, matching=total, free_before=len(free_before), free_after=free_after,
                         units_touched=len(touched), broken=broken)  # fmt: skip
